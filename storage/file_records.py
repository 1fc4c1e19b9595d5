"""Batches in a segment's `.log` file (Kafka's `FileRecords` / `FileLogInputStream`): where each batch
is and its header, read without loading the records; the batches of an in-memory buffer; and the
vectored write that puts appended batches in the file (`FileRecords.append`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from storage.errors import KafkaStorageError
from validators.codec.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatchHeader,
    TimestampType,
    parse_header,
)

RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest legal size field


HEADER_SIZE_UP_TO_MAGIC = 17  # FileLogInputStream: offset + size + leader epoch + magic


_SIZE = struct.Struct(">i")
_IOV_MAX = os.sysconf("SC_IOV_MAX")  # buffers one pwritev takes


class CorruptRecordError(KafkaStorageError):
    """Kafka's `CorruptRecordException` / `InvalidRecordException` met while scanning a segment."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch in a segment file: where it is and its header (`FileChannelRecordBatch`)."""

    position: int
    header: RecordBatchHeader

    @property
    def size(self) -> int:
        return self.header.size_in_bytes

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def next_position(self) -> int:
        return self.position + self.header.size_in_bytes


def iter_file_batches(fd: int, start: int, end: int, file_name: str = "") -> Iterator[BatchInfo]:
    """Batches of a segment file between byte positions [start, end) (`FileLogInputStream`):
    stops quietly at a trailing partial batch; a size field below 14 is a `CorruptRecordError`."""
    position = start
    while position + HEADER_SIZE_UP_TO_MAGIC < end:
        head = os.pread(fd, RECORD_BATCH_OVERHEAD, position)
        if len(head) < HEADER_SIZE_UP_TO_MAGIC:
            return
        size = _SIZE.unpack_from(head, 8)[0]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}) in file "
                f"{file_name}."
            )
        if position > end - LOG_OVERHEAD - size:
            return
        magic = head[16]
        if magic != 2 or len(head) < RECORD_BATCH_OVERHEAD or size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Unsupported batch at position {position} in {file_name}: magic {magic}, size {size + LOG_OVERHEAD} "
                "(the gateway stores record batch v2 only)"
            )
        yield BatchInfo(position, parse_header(head))
        position += size + LOG_OVERHEAD


def split_batches(records: bytes | memoryview) -> list[tuple[int, RecordBatchHeader]]:
    """(start, header) of each v2 batch in an in-memory buffer of back-to-back batches."""
    view = memoryview(records)
    out = []
    pos = 0
    while pos < len(view):
        header = parse_header(view[pos : pos + RECORD_BATCH_OVERHEAD])
        size = header.size_in_bytes
        if size < RECORD_BATCH_OVERHEAD or pos + size > len(view):
            raise CorruptRecordError(f"Batch at position {pos} declares {size} bytes; buffer has {len(view) - pos}")
        out.append((pos, header))
        pos += size
    return out


Buffer = bytes | bytearray | memoryview
Write = tuple[int, Sequence[Buffer], int]  # `write_at`'s arguments: a descriptor, buffers back to back, the position


def write_at(fd: int, buffers: Sequence[bytes], position: int) -> None:
    """Write `buffers` back to back at `position`: vectored (`pwritev`, at most IOV_MAX buffers a call), so
    the appended batches are not joined into one copy first. A regular file may take a write in parts: the
    rest of a buffer cut short is written on its own, then the next call starts at the buffer after it."""
    i, n = 0, len(buffers)
    while i < n:
        chunk = buffers[i:i + _IOV_MAX] if i or n > _IOV_MAX else buffers
        written = os.pwritev(fd, chunk, position)
        position += written
        for b in chunk:
            if written < len(b):
                break
            written -= len(b)
            i += 1
        if written:
            rest = memoryview(buffers[i])[written:]
            while rest:
                done = os.pwrite(fd, rest, position)
                position += done
                rest = rest[done:]
            i += 1
