"""`sinks.storage.file_span`: buffers and spans of other files land back to back at the position given,
adjacent spans of one file in one kernel copy, and the read-and-write fallback writes the same bytes."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sinks.storage import file_span
from sinks.storage.file_span import FileSpan, write_at


@pytest.fixture
def sources(tmp_path: Path) -> Iterator[tuple[int, int]]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(bytes(range(256)) * 40)
    b.write_bytes(b"B" * 5000)
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
    yield fa, fb
    os.close(fa)
    os.close(fb)


def _span(fd: int, offset: int, length: int) -> FileSpan:
    return FileSpan(fd, offset, length, os.pread(fd, min(length, 61), offset))


def _written(tmp_path: Path, pieces: list, position: int = 7) -> bytes:
    target = tmp_path / "target"
    fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.pwrite(fd, b"x" * position, 0)
        write_at(fd, pieces, position)
    finally:
        os.close(fd)
    return target.read_bytes()


def _expected(pieces: list, position: int = 7) -> bytes:
    return b"x" * position + b"".join(p.read() if isinstance(p, FileSpan) else p for p in pieces)


def test_buffers_and_spans_land_back_to_back(tmp_path: Path, sources: tuple[int, int]) -> None:
    fa, fb = sources
    pieces = [b"head", _span(fa, 0, 100), _span(fa, 100, 900), _span(fb, 10, 20), b"", b"mid",
              _span(fa, 5000, 17), _span(fa, 2000, 3), b"tail"]
    assert _written(tmp_path, pieces) == _expected(pieces)


def test_adjacent_spans_of_one_file_are_one_copy(
    tmp_path: Path, sources: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    fa, fb = sources
    calls: list[tuple[int, int, int]] = []
    real = file_span.copy_file_bytes

    def counted(source: int, offset: int, length: int, target: int, position: int) -> None:
        calls.append((source, offset, length))
        real(source, offset, length, target, position)

    monkeypatch.setattr(file_span, "copy_file_bytes", counted)
    pieces = [_span(fa, 0, 100), _span(fa, 100, 50), _span(fa, 150, 1), _span(fb, 151, 10), _span(fa, 161, 5)]
    assert _written(tmp_path, pieces) == _expected(pieces)
    assert calls == [(fa, 0, 151), (fb, 151, 10), (fa, 161, 5)]


def test_where_sendfile_cannot_copy_the_bytes_are_read_and_written(
    tmp_path: Path, sources: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    fa, _ = sources

    def refuse(*_args: object) -> int:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", refuse)
    pieces = [b"a", _span(fa, 3, 4000), b"z"]
    assert _written(tmp_path, pieces, position=0) == _expected(pieces, position=0)


def test_a_span_beyond_its_file_fails_loudly(tmp_path: Path, sources: tuple[int, int]) -> None:
    fa, _ = sources
    with pytest.raises(EOFError, match="short of its span"):
        _written(tmp_path, [_span(fa, 10_000, 500)])
    with pytest.raises(EOFError, match="short of its span"):
        _span(fa, 10_000, 500).read()
