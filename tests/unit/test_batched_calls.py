"""The sink's batched system calls in C (`storage/_batched_calls.c`) against their Python reference
(`storage.batched_calls`): the same files from the same writes and records (buffers of every kind, more buffers
than one `pwritev` takes, a tmp file longer or shorter than its record, or missing), the same exchanges and
renames, the same kept logs taken up (locks held, records, markers, lengths), and the same errors."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import batched_calls

NATIVE = batched_calls._NATIVE
TWINS = pytest.mark.parametrize("write_all, exchange_all", [
    (batched_calls.write_all_python, batched_calls.exchange_all_python),
    (getattr(NATIVE, "write_all", None), getattr(NATIVE, "exchange_all", None)),
], ids=["python", "native"])
RESUME_TWINS = pytest.mark.parametrize("resume_all", [batched_calls.resume_all_python,
                                                      getattr(NATIVE, "resume_all", None)], ids=["python", "native"])


def test_the_native_module_is_built() -> None:
    # `make setup` builds it (pyproject's ext-modules): the tests below compare it with its Python twin
    assert NATIVE is not None and batched_calls.write_all is NATIVE.write_all


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
    reference = _group_commit_files(tmp_path / "reference", batched_calls.write_all_python, batched_calls.exchange_all_python)
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


@RESUME_TWINS
def test_kept_logs_are_taken_up_alike(tmp_path: Path, resume_all: Callable) -> None:
    from storage.partition_lock import FileLock

    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    (tmp_path / "a" / "record").write_bytes(b'{"r":1}' + b" " * 30)
    (tmp_path / "b" / "marker").write_bytes(b"")
    (tmp_path / "c" / "record").write_bytes(b"x" * 20000)  # longer than one read
    log = os.open(tmp_path / "a" / "x.log", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(log, b"z" * 123, 0)

    def probe(d: str, log_fd: int = -1) -> tuple[str, str, str, int]:
        return str(tmp_path / d / "lock"), str(tmp_path / d / "record"), str(tmp_path / d / "marker"), log_fd
    try:
        results = resume_all([probe("a", log), probe("b"), probe("c"), probe("gone")])
    finally:
        os.close(log)
    try:
        assert [(fd >= 0, *rest) for fd, *rest in results] == [
            (True, 0, b'{"r":1}' + b" " * 30, False, 123),
            (True, 0, None, True, -1),
            (True, 0, b"x" * 20000, False, -1),
            (False, errno.ENOENT, None, False, -1),
        ]
        assert not FileLock(tmp_path / "a" / "lock").acquire(blocking=False)  # held by the descriptor returned
    finally:
        for fd, *_rest in results:
            if fd >= 0:
                os.close(fd)
    again = FileLock(tmp_path / "a" / "lock")
    assert again.acquire(blocking=False)  # released with its descriptor
    again.release()


@RESUME_TWINS
def test_taking_up_a_kept_log_leaves_its_records_access_time(tmp_path: Path, resume_all: Callable) -> None:
    # relatime updates an access time older than the file's last change at the next read: a commit rewrites the
    # record, so a read without O_NOATIME would dirty its inode every micro-batch
    record = tmp_path / "record"
    record.write_bytes(b'{"r":1}')
    changed = record.stat().st_mtime_ns
    os.utime(record, ns=(changed - 10**12, changed))
    results = resume_all([(str(tmp_path / "lock"), str(record), str(tmp_path / "marker"), -1)])
    os.close(results[0][0])
    assert results[0][2] == b'{"r":1}'
    assert record.stat().st_atime_ns == changed - 10**12


@TWINS
def test_a_malformed_argument_raises_before_any_call(tmp_path: Path, write_all: Callable, exchange_all: Callable) -> None:
    with pytest.raises((TypeError, ValueError)):
        write_all([], [(str(tmp_path / "r.tmp"),)])
    with pytest.raises((TypeError, ValueError)):
        exchange_all([(str(tmp_path / "a"), str(tmp_path / "b"), "extra")])
    assert not list(tmp_path.iterdir())
