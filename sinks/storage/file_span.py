"""Bytes written at a file position, from memory or straight from another file.

A `FileSpan` names bytes that already sit in another open file (the batch spool, `sinks.batch_spool`):
`write_at` copies them with `sendfile`, inside the kernel, so an appended batch is never read into Python
and copied out again. Adjacent spans of one file are copied in one call; in-memory buffers go out with
one vectored `pwritev`. Where `sendfile` cannot copy between the two files, the bytes are read and
written instead.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

_IOV_MAX = os.sysconf("SC_IOV_MAX")  # buffers one pwritev takes
# sendfile refuses file pairs it cannot splice between (and off Linux, a file as its destination)
_NO_SENDFILE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK, errno.EXDEV})


@dataclass(frozen=True, slots=True)
class FileSpan:
    """`length` bytes at `offset` of the open file `fd`; `head` holds its first bytes (at least a batch
    header), for parsing without reading the file."""

    fd: int
    offset: int
    length: int
    head: bytes

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return _pread_exactly(self.fd, self.length, self.offset)


Piece = bytes | FileSpan


def write_at(fd: int, pieces: list[Piece], position: int) -> None:
    """Write `pieces` back to back at `position`: runs of buffers with `pwritev` (at most IOV_MAX a call, not
    joined into one copy first), runs of adjacent spans of one file with one kernel copy."""
    start = 0
    while start < len(pieces):
        end = start
        if type(pieces[start]) is FileSpan:
            span = pieces[start]
            length = span.length
            end += 1
            while (end < len(pieces) and type(pieces[end]) is FileSpan and pieces[end].fd == span.fd
                   and pieces[end].offset == span.offset + length):
                length += pieces[end].length
                end += 1
            copy_file_bytes(span.fd, span.offset, length, fd, position)
        else:
            while end < len(pieces) and type(pieces[end]) is not FileSpan:
                end += 1
            length = _pwrite_all(fd, pieces[start:end], position)  # type: ignore[arg-type]
        position += length
        start = end


def copy_file_bytes(source: int, offset: int, length: int, target: int, position: int) -> None:
    """`length` bytes of `source` at `offset` into `target` at `position`, in the kernel where it can."""
    copied = 0
    try:
        os.lseek(target, position, os.SEEK_SET)
        while copied < length:
            sent = os.sendfile(target, source, offset + copied, length - copied)
            if sent == 0:
                raise EOFError(f"the source file ends {length - copied} bytes short of its span at offset {offset}")
            copied += sent
    except OSError as e:
        if e.errno not in _NO_SENDFILE or copied:
            raise
        _pwrite_all(target, [_pread_exactly(source, length, offset)], position)


def _pwrite_all(fd: int, buffers: list[bytes], position: int) -> int:
    """pwritev until every buffer is written (a regular file may take a write in parts); returns the bytes."""
    views = [memoryview(b) for b in buffers]
    total = sum(len(v) for v in views)
    while views:
        written = os.pwritev(fd, views[:_IOV_MAX], position)
        position += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]
    return total


def _pread_exactly(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise EOFError(f"the source file ends {length - len(data)} bytes short of its span at offset {offset}")
    return data
