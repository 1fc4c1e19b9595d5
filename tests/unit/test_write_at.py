"""`file_records.write_at`: the pending batches written back to back, whatever a write takes of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import file_records
from storage.file_records import write_at


def _buffers() -> list[bytes]:
    return [bytes([i % 251]) * size for i, size in enumerate([5, 0, 17, 1, 4096, 3, 250, 9])]


@pytest.mark.parametrize("limit", [None, 1, 2, 7, 100, 4097])
def test_the_buffers_land_back_to_back_even_when_writes_come_up_short(tmp_path: Path, limit: int | None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real_pwritev, real_pwrite = os.pwritev, os.pwrite
    calls: list[int] = []

    def short_pwritev(fd: int, buffers: list[bytes], offset: int) -> int:
        # a regular file may take part of a vectored write: at most `limit` bytes here
        joined = b"".join(bytes(b) for b in buffers)
        calls.append(len(buffers))
        return real_pwritev(fd, [joined if limit is None else joined[:limit]], offset)

    def short_pwrite(fd: int, data: bytes, offset: int) -> int:
        return real_pwrite(fd, bytes(data) if limit is None else bytes(data)[:limit], offset)

    monkeypatch.setattr(os, "pwritev", short_pwritev)
    monkeypatch.setattr(os, "pwrite", short_pwrite)
    monkeypatch.setattr(file_records, "_IOV_MAX", 3)  # several vectored calls per write
    path = tmp_path / "log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        real_pwrite(fd, b"head", 0)
        write_at(fd, _buffers(), 4)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"head" + b"".join(_buffers())
    assert all(n <= 3 for n in calls)
