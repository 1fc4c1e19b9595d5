"""`gateway.lock`: the `flock` that serialises a partition's one writer task and the retention task.
Readers take no lock. The file stays after a clean stop on purpose: an flock belongs to the open
descriptor, so a left-over file locks nothing, and deleting it could race a writer that just opened it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "gateway.lock"


class PartitionLock:
    """Exclusive `flock` on `<dir>/gateway.lock`: one appender or retention pass at a time. Readers take
    no lock; they read only the committed prefix of each file."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PartitionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PartitionBusyError(BlockingIOError):
    """The partition lock is held (by an append or a retention pass) and the caller would not wait."""
