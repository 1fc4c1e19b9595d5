"""`writeback.start_writeback`: loaded on Linux, and it changes no byte of the file it is asked about."""

from __future__ import annotations

import os
from pathlib import Path

from storage import writeback


def test_linux_has_the_call() -> None:
    assert os.uname().sysname != "Linux" or writeback._SYNC_FILE_RANGE is not None


def test_writeback_of_a_range_leaves_the_bytes_as_written(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    data = os.urandom(3 << 20)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        writeback.start_writeback(fd, 1 << 20, 2 << 20)
        writeback.start_writeback(fd, 0, 0)  # nothing to write: no call
        os.fdatasync(fd)
    finally:
        os.close(fd)
    assert path.read_bytes() == data
