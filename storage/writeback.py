"""Start writing appended log bytes to disk while the micro-batch goes on (Linux `sync_file_range` with
`SYNC_FILE_RANGE_WRITE`).

A commit fsyncs the segment (docs/design.md: the query); the fsync waits for every dirty page the kernel has not yet
written, and the kernel starts on its own only after `dirty_expire_centisecs` (30 s). Asking for the
writeback of each range as soon as it is in the page cache lets the disk work while the stage decides and
appends the rest, so the commit's fsync waits only for the tail. It guarantees nothing (durability stays
the fsync's) and changes no byte. Where the call is missing (not Linux, no libc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writeback of the range's dirty pages, do not wait for it


def _load() -> Callable[[int, int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_SYNC_FILE_RANGE = _load() if os.uname().sysname == "Linux" else None


def start_writeback(fd: int, position: int, length: int) -> None:
    """Ask the kernel to start writing `length` bytes of `fd` from `position`; an error is ignored (the
    commit's fsync is what makes the bytes durable, and it reports any I/O error)."""
    if _SYNC_FILE_RANGE is not None and length > 0:
        _SYNC_FILE_RANGE(fd, position, length, SYNC_FILE_RANGE_WRITE)
