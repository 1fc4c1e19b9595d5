"""`gateway.lock`: the lock that serialises a partition's one writer task and the retention task, on
one host or across the hosts of a Spark cluster. Readers take no lock.

The lock is an exclusive open-file-description lock (Linux `F_OFD_SETLK`) on the whole file: it belongs
to the open descriptor like `flock` — two descriptors conflict even inside one process (the driver's
retention thread and its log close) — and, unlike `flock`, it is a byte-range lock, which NFS carries to
the server (NFSv4 locks / NLM; EFS supports them), so it holds between hosts sharing the segments root.
`flock` on NFS is only emulated as a POSIX lock whose owner is the process, so two descriptors of one
process would not exclude each other. Where OFD locks do not exist (not Linux) `flock` is used.
The file stays after a clean stop on purpose: a lock belongs to the open descriptor, so a left-over
file locks nothing, and deleting it could race a writer that just opened it.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

LOCK_FILE = "gateway.lock"

# struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), native alignment, padded to 32
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)


def lock_exclusive(fd: int, blocking: bool) -> None:
    """Exclusive lock on the whole file; BlockingIOError when not `blocking` and it is held elsewhere."""
    if _OFD_SETLK is None or _OFD_SETLKW is None:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    try:
        fcntl.fcntl(fd, _OFD_SETLKW if blocking else _OFD_SETLK, request)
    except OSError as e:
        if e.errno in (11, 13):  # EAGAIN / EACCES: held by another open file description
            raise BlockingIOError(e.errno, "partition lock held") from None
        raise


def _unlock(fd: int) -> None:
    if _OFD_SETLK is None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    fcntl.fcntl(fd, _OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 0, 0))


class FileLock:
    """An exclusive lock on one file (module docstring), released by `release()` or when its process ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, blocking: bool = True) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            lock_exclusive(fd, blocking)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def adopt(self, fd: int) -> None:
        """`fd`, this file opened and locked exclusively by someone else's call (`batched_calls.resume_all`), held
        as if `acquire` had taken it."""
        assert self._fd is None, "a lock adopted while held"
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PartitionLock(FileLock):
    """Exclusive lock on `<dir>/gateway.lock`: one appender or retention pass at a time. Readers take no
    lock; they read only the committed prefix of each file."""

    def __init__(self, directory: Path) -> None:
        super().__init__(Path(directory) / LOCK_FILE)


class PartitionBusyError(BlockingIOError):
    """The partition lock is held (by an append or a retention pass) and the caller would not wait."""
