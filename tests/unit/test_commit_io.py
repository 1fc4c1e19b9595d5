"""A group commit's system calls in C (`storage/_commit_io.c`) against their Python reference
(`storage.commit_io`): the same files from the same writes and records (buffers of every kind, more buffers
than one `pwritev` takes, a tmp file longer or shorter than its record, or missing), the same exchanges and
renames, and the same errors."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import commit_io

NATIVE = commit_io._NATIVE
TWINS = pytest.mark.parametrize("write_all, exchange_all", [
    (commit_io.write_all_python, commit_io.exchange_all_python),
    (getattr(NATIVE, "write_all", None), getattr(NATIVE, "exchange_all", None)),
], ids=["python", "native"])


def test_the_native_module_is_built() -> None:
    # `make setup` builds it (pyproject's ext-modules): the tests below compare it with its Python twin
    assert NATIVE is not None and commit_io.write_all is NATIVE.write_all


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mode & 0o777) for p in sorted(root.iterdir())}


def _group_commit_files(root: Path, write_all: Callable, exchange_all: Callable) -> dict[str, tuple[bytes, int]]:
    (root / "a.log").write_bytes(b"x" * 10)
    (root / "long.tmp").write_bytes(b"#" * 40)  # a record longer before: padded with spaces
    (root / "long.json").write_bytes(b"{}")
    (root / "short.tmp").write_bytes(b"#")  # shorter before: grows
    (root / "short.json").write_bytes(b"{}")
    many = [bytes([i % 256]) * (i % 7) for i in range(3000)]  # > IOV_MAX buffers, some empty
    fds = [os.open(root / name, os.O_RDWR | os.O_CREAT, 0o644) for name in ("a.log", "b.index", "c.index")]
    try:
        write_all(
            [(fds[0], [b"head", bytearray(b"-mid-"), memoryview(b"..tail..")[2:6]], 8),  # past the end: a hole
             (fds[1], many, 0),
             (fds[2], (b"",), 0),
             (fds[0], [b"again"], 0)],
            [(str(root / "long.tmp"), b'{"record":1}'), (str(root / "short.tmp"), b'{"record":2}'),
             (str(root / "new.tmp"), b'{"record":3}')],
        )
    finally:
        for fd in fds:
            os.close(fd)
    exchange_all([(str(root / "long.tmp"), str(root / "long.json")),  # swapped: the old record is the next tmp
                  (str(root / "new.tmp"), str(root / "new.json"))])  # no record yet: renamed
    return _files(root)


@TWINS
def test_the_same_writes_records_and_exchanges_make_the_same_files(
    tmp_path: Path, write_all: Callable, exchange_all: Callable
) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "under_test").mkdir()
    reference = _group_commit_files(tmp_path / "reference", commit_io.write_all_python, commit_io.exchange_all_python)
    assert _group_commit_files(tmp_path / "under_test", write_all, exchange_all) == reference
    assert reference["a.log"][0] == b"again" + b"x" * 3 + b"head-mid-tail"
    assert reference["long.json"] == (b'{"record":1}'.ljust(40), 0o644)
    assert reference["long.tmp"][0] == b"{}" and reference["short.tmp"][0] == b'{"record":2}'
    assert reference["new.json"] == (b'{"record":3}', 0o644) and "new.tmp" not in reference
    assert reference["c.index"][0] == b""


@TWINS
def test_a_failed_call_raises_the_system_error_and_stops_there(
    tmp_path: Path, write_all: Callable, exchange_all: Callable
) -> None:
    closed = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(closed)
    with pytest.raises(OSError) as bad_fd:
        write_all([(closed, [b"x"], 0)], [(str(tmp_path / "after.tmp"), b"{}")])
    assert bad_fd.value.errno == errno.EBADF
    assert not (tmp_path / "after.tmp").exists()  # nothing after the failure
    missing = str(tmp_path / "gone" / "r.tmp")
    with pytest.raises(OSError) as no_dir:
        write_all([], [(missing, b"{}")])
    assert (no_dir.value.errno, no_dir.value.filename) == (errno.ENOENT, missing)
    tmp, record = str(tmp_path / "no.tmp"), str(tmp_path / "no.json")
    with pytest.raises(OSError) as nothing:
        exchange_all([(tmp, record)])
    assert (nothing.value.errno, nothing.value.filename, nothing.value.filename2) == (errno.ENOENT, tmp, record)
