"""A group commit's system calls in one call each (`storage.group_commit`): every partition's appended bytes and
index entries, then every commit record's tmp file (`write_all`); after the sync, every record put in place
(`exchange_all`).

The C twin (`_commit_io.c`, built by `pip install -e .`) makes them with the interpreter's lock released once
for all of them. Released at each system call, as Python's `os` functions do, the lock went back and forth
between the sink's commit thread and its task thread, which appends the next partitions' rows meanwhile: a
futex wake and a context switch per call, ~15 % of the sink's CPU over 1 000 partitions (docs/performance.md,
"Scale"). This module's functions are its reference, and the fallback where it is not built.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.commit_record import TmpRecord, put_in_place, write_tmp_record
from storage.file_records import Write, write_at
from validators.native_modules import load_extension


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


_NATIVE = load_extension("storage._commit_io", "a group commit's system calls are made one by one from Python")
write_all = _NATIVE.write_all if _NATIVE is not None else write_all_python
exchange_all = _NATIVE.exchange_all if _NATIVE is not None else exchange_all_python
