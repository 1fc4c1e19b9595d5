"""RecordBatch v2 header: layout, CRC-32C and the in-place header rewrite a leader does.

Layout (Kafka's `DefaultRecordBatch` header): baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
magic int8 | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32.
The CRC covers bytes [21, end): attributes through the last record byte.

Batch level (below the header code): `iter_batches` (ByteBufferLogInputStream framing),
`records_area` (decompressed records bytes), `decode_record_batch` (every record as a Kafka reader
reports it) and `build_record_batch` (MemoryRecordsBuilder + DefaultRecordBatch.writeHeader).
Records live in records.py, codecs in compression.py, magic 0/1 in legacy_records.py.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

from validators.codec.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, CompressionType, compress, decompress
from validators.codec.records import Record, decode_records, encode_records

LOG_OVERHEAD = 12  # baseOffset + batchLength: the prefix not counted in batchLength
RECORD_BATCH_OVERHEAD = 61
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43  # DefaultRecordBatch.PRODUCER_ID_OFFSET: producer id (int64), then its epoch (int16)
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


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
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

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
    return RecordBatchHeader(*BATCH_HEADER.unpack_from(data, 0))


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
    """The leader's in-place rewrite (LogValidator path A/B, `LogValidator.assignOffsetsNonCompressed`):
    baseOffset and partitionLeaderEpoch (outside the CRC), then the timestamp-type bit and
    maxTimestamp with the CRC recomputed only when they change (`setMaxTimestamp` is a no-op
    otherwise). Record bytes — and so each record's CreateTime delta — are never touched."""
    # Only the 61-byte header changes: rewrite a copy of it and join it to the untouched records,
    # so a 1 MB batch is copied once (the copy, not the checks, dominated large batches).
    header = bytearray(memoryview(data)[:RECORD_BATCH_OVERHEAD])
    records = memoryview(data)[RECORD_BATCH_OVERHEAD:]
    struct.pack_into(">q", header, 0, base_offset)
    struct.pack_into(">i", header, 12, partition_leader_epoch)
    attributes = struct.unpack_from(">h", header, ATTRIBUTES_OFFSET)[0]
    current_type = (
        TimestampType.LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME
    )
    current_max = struct.unpack_from(">q", header, MAX_TIMESTAMP_OFFSET)[0]
    if current_type != timestamp_type or current_max != max_timestamp:
        # `setMaxTimestamp` rebuilds the attributes with `computeAttributes(codec, type,
        # transactional, control, deleteHorizon)`: every other bit (7-15) is cleared.
        attributes &= COMPRESSION_CODEC_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK | DELETE_HORIZON_FLAG_MASK
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        struct.pack_into(">h", header, ATTRIBUTES_OFFSET, attributes)
        struct.pack_into(">q", header, MAX_TIMESTAMP_OFFSET, max_timestamp)
        crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))  # CRC-32C continues
        struct.pack_into(">I", header, CRC_OFFSET, crc)
    return b"".join((header, records))


# ============================================================================================
# Batch-level codec: build, split, decompress and decode whole v2 batches.
# (Appended to the header module; the names above keep their behaviour.)

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest legal size field of any batch
HEADER_SIZE_UP_TO_MAGIC = 17  # Records.HEADER_SIZE_UP_TO_MAGIC
_INT_MAX = (1 << 31) - 1
_LONG_MASK = (1 << 64) - 1


class CorruptRecordError(ValueError):
    """Kafka's `CorruptRecordException` for framing and checksum failures (CORRUPT_MESSAGE, 2):
    "Record size %d is less than the minimum record overhead (14)", "Invalid magic found in record:
    <m>", "Record is corrupt (stored crc = X, computed crc = Y)", "Record batch is corrupt (...)"."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def wrap_long(value: int) -> int:
    """Java long arithmetic: wrap an integer into [-2^63, 2^63)."""
    value &= _LONG_MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: wraps past Integer.MAX_VALUE to 0."""
    if sequence > _INT_MAX - increment:
        return increment - (_INT_MAX - sequence) - 1
    return sequence + increment


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[bytes]:
    """Split back-to-back batches (any magic) by their size field, as
    `ByteBufferLogInputStream.nextBatch` does.

    Raises CorruptRecordError("Record size %d is less than the minimum record overhead (14)") and
    CorruptRecordError("Invalid magic found in record: <m>") (magic read as a signed byte, valid
    0..2). A trailing fragment shorter than its declared size is silently not yielded."""
    buf = bytes(data)
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
            )
        if end - pos < HEADER_SIZE_UP_TO_MAGIC:
            return
        magic = struct.unpack_from(">b", buf, pos + MAGIC_OFFSET)[0]
        if magic < 0 or magic > CURRENT_MAGIC_VALUE:
            raise CorruptRecordError(f"Invalid magic found in record: {magic}")
        batch_size = size + LOG_OVERHEAD
        if end - pos < batch_size:
            return
        yield buf[pos : pos + batch_size]
        pos += batch_size


def _v2_header(batch: bytes) -> RecordBatchHeader:
    if len(batch) < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(
            f"Record batch is corrupt (the size {len(batch)} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})"
        )
    magic = struct.unpack_from(">b", batch, MAGIC_OFFSET)[0]
    if magic != CURRENT_MAGIC_VALUE:
        raise ValueError(f"Not a v2 record batch: magic {magic}")
    if len(batch) < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch is corrupt (the size {len(batch)} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})"
        )
    header = parse_header(batch)
    size = header.size_in_bytes
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})"
        )
    if size > len(batch):
        raise CorruptRecordError(
            f"Record batch is truncated: size field says {size} bytes, {len(batch)} present"
        )
    return header


def records_area(
    batch: bytes | bytearray | memoryview, max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes:
    """The records bytes of one v2 batch, decompressed with the batch's codec (bounded by
    `max_output`). Bytes beyond the batch's size field are not part of it.

    Raises ValueError("Unknown compression type id: <id>") for codec 5-7, CorruptCompressedDataError
    (incl. DecompressionLimitExceededError) for a broken stream, CorruptRecordError for a batch
    shorter than its header/size field, ValueError for a magic other than 2."""
    buf = bytes(batch)
    header = _v2_header(buf)
    area = buf[RECORD_BATCH_OVERHEAD : header.size_in_bytes]
    codec = CompressionType.for_id(header.compression_id)
    if codec is CompressionType.NONE:
        return area
    return decompress(codec, area, max_output=max_output)


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A record as a Kafka consumer sees it, plus the producer's CreateTime kept in the bytes."""

    offset: int  # baseOffset + offsetDelta
    timestamp: int  # what Kafka reports: LogAppendTime batches give maxTimestamp to every record
    timestamp_type: TimestampType
    create_time: int  # baseTimestamp + timestampDelta (Java long arithmetic), whatever the type
    sequence: int  # baseSequence + offsetDelta (wrapping), or -1
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    offset_delta: int
    timestamp_delta: int
    attributes: int


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    header: RecordBatchHeader
    compression: CompressionType
    is_valid: bool  # stored CRC-32C matches (DefaultRecordBatch.isValid)
    computed_crc: int
    records: tuple[DecodedRecord, ...]

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type


def decode_record_batch(
    batch: bytes | bytearray | memoryview, max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> DecodedBatch:
    """Decode one v2 batch with every record, as `DefaultRecordBatch.iterator()` reports it.

    The CRC is reported (`is_valid`), not enforced. A batch with recordsCount 0 yields no records and
    its records bytes are not read (Kafka's empty iterator). Raises what `records_area` raises, and
    InvalidRecordError (records.py) for a malformed records area."""
    buf = bytes(batch)
    header = _v2_header(buf)
    buf = buf[: header.size_in_bytes]
    codec = CompressionType.for_id(header.compression_id)
    computed = compute_crc(buf)
    count = header.records_count
    if count == 0:
        raws: list[Record] = []
    else:
        if count < 0:
            decode_records(b"", count)  # raises Kafka's "Found invalid record count" text
        area = buf[RECORD_BATCH_OVERHEAD:]
        if codec is not CompressionType.NONE:
            area = decompress(codec, area, max_output=max_output)
        raws = decode_records(area, count)
    ts_type = header.timestamp_type
    log_append = ts_type is TimestampType.LOG_APPEND_TIME
    decoded = []
    for r in raws:
        create_time = wrap_long(header.base_timestamp + r.timestamp_delta)
        decoded.append(
            DecodedRecord(
                offset=header.base_offset + r.offset_delta,
                timestamp=header.max_timestamp if log_append else create_time,
                timestamp_type=ts_type,
                create_time=create_time,
                sequence=increment_sequence(header.base_sequence, r.offset_delta)
                if header.base_sequence >= 0
                else NO_SEQUENCE,
                key=r.key,
                value=r.value,
                headers=r.headers,
                offset_delta=r.offset_delta,
                timestamp_delta=r.timestamp_delta,
                attributes=r.attributes,
            )
        )
    return DecodedBatch(header, codec, computed == header.crc, computed, tuple(decoded))


RecordInput = (
    Record
    | tuple[int, bytes | None, bytes | None]
    | tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


def build_record_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes_extra: int = 0,
    last_offset_delta: int | None = None,
    records_count: int | None = None,
    compression_level: int | None = None,
    magic: int = CURRENT_MAGIC_VALUE,
    reject_negative_timestamps: bool = False,
) -> bytes:
    """Write one v2 batch the way `MemoryRecordsBuilder` + `DefaultRecordBatch.writeHeader` do.

    `records` items are either
      * `(timestamp, key, value)` or `(timestamp, key, value, headers)`: the i-th gets offsetDelta i
        and timestampDelta = timestamp - baseTimestamp (Java long arithmetic), as a producer writes;
      * `Record` (records.py): written verbatim with its own deltas (to craft odd batches).
    `base_timestamp` defaults to the first tuple's timestamp (Kafka: the first record's timestamp);
    it is required when the first item is a `Record`; -1 for an empty batch.
    `max_timestamp` defaults to the largest record timestamp, starting from -1 as MemoryRecordsBuilder
    does (so records at or below -1 never raise it); pass the append time for LogAppendTime.
    `last_offset_delta` defaults to the last record's offsetDelta (0 for an empty batch),
    `records_count` to the number of records; both can be overridden to craft inconsistent headers.
    `attributes_extra` is OR-ed into the attributes (e.g. 0x40 delete horizon); `magic` is written
    as given (the layout stays v2). Records are compressed as one stream with `compression`
    (Kafka never falls back to uncompressed). With `reject_negative_timestamps`, a record timestamp
    < 0 other than -1 raises ValueError("Invalid negative timestamp <ts>") like
    `MemoryRecordsBuilder.appendWithOffset` (the leader's rebuild path)."""
    codec = CompressionType.for_id(int(compression))
    if base_timestamp is None:
        if not records:
            base_timestamp = NO_TIMESTAMP
        elif isinstance(records[0], Record):
            raise ValueError("base_timestamp is required when records are given as Record")
        else:
            base_timestamp = records[0][0]
    raws: list[Record] = []
    computed_max = NO_TIMESTAMP
    for index, item in enumerate(records):
        if isinstance(item, Record):
            raw = item
            timestamp = wrap_long(base_timestamp + item.timestamp_delta)
        else:
            timestamp = item[0]
            headers = tuple(item[3]) if len(item) > 3 else ()  # type: ignore[misc]
            raw = Record(index, wrap_long(timestamp - base_timestamp), item[1], item[2], headers)
        if reject_negative_timestamps and timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        if timestamp > computed_max:
            computed_max = timestamp
        raws.append(raw)
    area = encode_records(raws)
    if codec is not CompressionType.NONE:
        area = compress(codec, area, level=compression_level)
    attributes = int(codec) | attributes_extra
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if last_offset_delta is None:
        last_offset_delta = raws[-1].offset_delta if raws else 0
    out = bytearray(RECORD_BATCH_OVERHEAD)
    BATCH_HEADER.pack_into(
        out,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(area),
        partition_leader_epoch,
        magic,
        0,
        struct.unpack(">h", struct.pack(">H", attributes & 0xFFFF))[0],
        last_offset_delta,
        base_timestamp,
        computed_max if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(raws) if records_count is None else records_count,
    )
    out += area
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
