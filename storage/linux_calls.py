"""Linux system calls the storage needs and Python's `os` lacks, through the C library: `syncfs(2)` (a group
commit's barrier) and `renameat2(2)` with `RENAME_EXCHANGE` (the commit record swapped with its spare).
Where the C library lacks one, `HAS_SYNCFS` is False or `exchange` reports that it did nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_syncfs = getattr(_libc, "syncfs", None)
_renameat2 = getattr(_libc, "renameat2", None)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
HAS_SYNCFS = _syncfs is not None


def sync_filesystem(path: Path) -> None:
    """`syncfs(2)` of the filesystem holding `path`: every dirty page and metadata change on it durable. Its
    error (a failed writeback on that filesystem since `path` was opened) raises OSError."""
    if _syncfs is None:
        raise OSError("syncfs is not available on this system")
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def exchange(a: str, b: str) -> bool:
    """Swap two existing names atomically; False when the system or the filesystem cannot (or `b` is
    missing): the caller falls back to a rename. Other errors raise OSError."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, a.encode(), _AT_FDCWD, b.encode(), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOENT, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"exchanging {a} with {b}: {os.strerror(err)}")
