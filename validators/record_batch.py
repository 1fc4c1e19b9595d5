"""RecordBatch v2 header: layout, CRC-32C and the in-place header rewrite a leader does.

Layout (reference §4.1): baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
magic int8 | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32.
The CRC covers bytes [21, end): attributes through the last record byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

LOG_OVERHEAD = 12  # baseOffset + batchLength: the prefix not counted in batchLength
RECORD_BATCH_OVERHEAD = 61
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")


class TimestampType(IntEnum):
    """Kafka's `TimestampType` (attribute bit 3 for v2 and v1)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[self.value]


@dataclass(frozen=True, slots=True)
class RecordBatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def parse_header(data: bytes | memoryview) -> RecordBatchHeader:
    """Decode the 61-byte header; raises ValueError when fewer bytes are given."""
    if len(data) < RECORD_BATCH_OVERHEAD:
        raise ValueError(f"Record batch header needs {RECORD_BATCH_OVERHEAD} bytes, got {len(data)}")
    return RecordBatchHeader(*_HEADER.unpack_from(data, 0))


def compute_crc(data: bytes | memoryview) -> int:
    """CRC-32C of [attributes, end of batch) — what Kafka stores at bytes 17..20."""
    return crc32c(memoryview(data)[ATTRIBUTES_OFFSET:])


def stored_crc(data: bytes | memoryview) -> int:
    return struct.unpack_from(">I", data, CRC_OFFSET)[0]


def is_valid(data: bytes | memoryview) -> bool:
    """Kafka's `DefaultRecordBatch.isValid()`: at least 61 bytes and the stored CRC matches."""
    return len(data) >= RECORD_BATCH_OVERHEAD and stored_crc(data) == compute_crc(data)


def assign_offsets_and_timestamp(
    data: bytes,
    base_offset: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The leader's in-place rewrite (LogValidator path A/B, reference §1.2.1):
    baseOffset and partitionLeaderEpoch (outside the CRC), then the timestamp-type bit and
    maxTimestamp with the CRC recomputed only when they change (`setMaxTimestamp` is a no-op
    otherwise). Record bytes — and so each record's CreateTime delta — are never touched."""
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, partition_leader_epoch)
    attributes = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0]
    current_type = TimestampType.LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME
    current_max = struct.unpack_from(">q", out, MAX_TIMESTAMP_OFFSET)[0]
    if current_type != timestamp_type or current_max != max_timestamp:
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        else:
            attributes &= ~TIMESTAMP_TYPE_MASK
        struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes)
        struct.pack_into(">q", out, MAX_TIMESTAMP_OFFSET, max_timestamp)
        struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
