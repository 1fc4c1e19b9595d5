"""The sink's system calls for many partitions, in one call each: a group commit's (`storage.group_commit`):
every partition's appended bytes and index entries, then every commit record's tmp file (`write_all`), and after
the sync every record put in place (`exchange_all`); and the kept logs a task takes up (`OpenLogs.resume_many`):
each one's lock taken and its commit record, recovery marker and `.log` length read (`resume_all`).

The C twin (`_batched_calls.c`, built by `pip install -e .`) makes them with the interpreter's lock released once
for all of them. Released at each system call, as Python's `os` functions do, the lock went back and forth
between the sink's commit thread and its task thread, which appends the next partitions' rows meanwhile: a
futex wake and a context switch per call, ~15 % of the sink's CPU over 1 000 partitions (docs/performance.md,
"Scale"). This module's functions are its reference, and the fallback where it is not built.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from storage.commit_record import TmpRecord, put_in_place, write_tmp_record
from storage.file_records import Write, write_at
from storage.partition_lock import lock_exclusive
from validators.native_modules import load_extension

ResumeProbe = tuple[str, str, str, int]  # a kept log's lock file, commit record, recovery marker, `.log` descriptor
# the lock's descriptor (-1: not held), the errno of the first step that failed (0: none), the record's bytes
# (None: no record), whether the marker exists, the `.log`'s length (-1: no descriptor)
Resumed = tuple[int, int, bytes | None, bool, int]


def write_all_python(writes: Sequence[Write], records: Sequence[TmpRecord]) -> None:
    """Every write (`file_records.write_at`), then every record's tmp file (`commit_record.write_tmp_record`),
    in order; the first failure raises and nothing after it is done."""
    for fd, buffers, position in writes:
        write_at(fd, buffers, position)
    for path, record in records:
        write_tmp_record(path, record)


def exchange_all_python(pairs: Sequence[tuple[str, str]]) -> None:
    """Each (tmp, record) put in place (`commit_record.put_in_place`), in order."""
    for tmp, record in pairs:
        put_in_place(tmp, record)


def resume_all_python(probes: Sequence[ResumeProbe]) -> list[Resumed]:
    """For each kept log, in order: its lock file opened (made when missing) and locked exclusively, waiting
    (`partition_lock.lock_exclusive`); then its record read, its marker looked for and its `.log`'s length taken.
    A step that fails ends that log's steps with its errno; a lock taken before it stays held."""
    return [_resume_one(*probe) for probe in probes]


def _resume_one(lock: str, record: str, marker: str, log_fd: int) -> Resumed:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        return -1, e.errno or 0, None, False, -1
    try:
        lock_exclusive(fd, blocking=True)
    except OSError as e:
        os.close(fd)
        return -1, e.errno or 0, None, False, -1
    data: bytes | None = None
    marked = False
    try:
        try:
            data = _read_without_atime(record)
        except FileNotFoundError:
            pass
        try:
            os.stat(marker)
            marked = True
        except FileNotFoundError:
            pass
        size = os.fstat(log_fd).st_size if log_fd >= 0 else -1
    except OSError as e:
        return fd, e.errno or 0, data, marked, -1
    return fd, 0, data, marked, size


def _read_without_atime(path: str) -> bytes:
    """The file's bytes, read without updating its access time where the file is ours (O_NOATIME): a record is
    rewritten at every commit, so `relatime` would otherwise dirty its inode at every read, and the next group
    commit's `syncfs` would write it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))  # Linux's
    except PermissionError:  # not the file's owner
        fd = os.open(path, os.O_RDONLY)
    with open(fd, "rb", buffering=0) as f:
        return f.readall()


_NATIVE = load_extension("storage._batched_calls", "a group commit's system calls are made one by one from Python")
write_all = _NATIVE.write_all if _NATIVE is not None else write_all_python
exchange_all = _NATIVE.exchange_all if _NATIVE is not None else exchange_all_python
resume_all = _NATIVE.resume_all if _NATIVE is not None else resume_all_python
