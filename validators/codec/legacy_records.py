"""Legacy message sets (magic 0 and 1) and their up-conversion to one v2 batch.

Kafka's `clients/.../record/LegacyRecord.java`, `AbstractLegacyRecordBatch.java`
(`DeepRecordsIterator`, `DataLogInputStream`), `MemoryRecordsBuilder.java` (legacy writer and the
leader's rebuild path, `LogValidator.buildRecordsAndAssignOffsets`).

Log entry = `offset int64 | messageSize int32 | message`; message =
`crc uint32 (CRC32/zlib over magic..end) | magic int8 | attributes int8 | [timestamp int64, v1] |
keyLength int32 | key | valueLength int32 | value` (length -1 = null).
Attributes: bits 0-2 codec, bit 3 timestamp type (v1 only). A compressed entry is a wrapper with a
null key whose value is the compressed inner message set: v0 inner offsets are absolute; v1 inner
offsets are relative 0..n-1 and the wrapper carries the absolute offset of the last inner message
(a wrapper offset of 0 - some librdkafka versions - means base 0).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from validators.codec.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, CompressionType, compress, decompress
from validators.codec.record_batch import (
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    RECORD_OVERHEAD_V0,
    CorruptRecordError,
    TimestampType,
    build_record_batch,
    iter_batches,
)
from validators.codec.records import InvalidRecordError

__all__ = [
    "RECORD_OVERHEAD_V1",
    "LegacyEntry",
    "LegacyRecord",
    "UpConversion",
    "build_message_set",
    "read_message_set",
    "upconvert_to_v2",
]

RECORD_OVERHEAD_V1 = 22  # LegacyRecord.RECORD_OVERHEAD_V1
HEADER_SIZE_V0 = 6
HEADER_SIZE_V1 = 14
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_STRUCTURE = "Found invalid record structure"


class _LegacyMessage:
    """What a legacy message and a shallow entry share: the codec bits and the CRC-32 check."""

    __slots__ = ()
    attributes: int
    crc: int
    computed_crc: int

    @property
    def compression(self) -> CompressionType:
        return CompressionType.for_id(self.attributes & _CODEC_MASK)

    @property
    def is_valid(self) -> bool:
        """LegacyRecord.isValid: the stored CRC-32 matches (the size >= 14 check is the reader's)."""
        return self.crc == self.computed_crc


@dataclass(frozen=True, slots=True)
class LegacyRecord(_LegacyMessage):
    """One logical record of a legacy message set, as Kafka's iterator reports it.

    `timestamp`: v0 -> -1; v1 -> the message's own field, except inner messages of a LogAppendTime
    wrapper, which report the wrapper's timestamp. `timestamp_type`: NoTimestampType for v0, the
    wrapper's type for inner v1 messages, else the message's attribute bit 3."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    crc: int  # stored CRC32
    computed_crc: int


@dataclass(frozen=True, slots=True)
class LegacyEntry(_LegacyMessage):
    """One log entry (Kafka's shallow `AbstractLegacyRecordBatch`): an uncompressed message, or a
    compressed wrapper with its inner records in `records`."""

    offset: int
    size_in_bytes: int  # messageSize + 12
    magic: int
    attributes: int
    timestamp: int  # the message's own timestamp field (-1 for v0)
    timestamp_type: TimestampType
    crc: int
    computed_crc: int
    key: bytes | None
    value: bytes | None  # for a wrapper: the compressed inner message set
    records: tuple[LegacyRecord, ...]

    @property
    def last_offset(self) -> int:
        return self.offset


def _corrupt_crc(stored: int, computed: int) -> CorruptRecordError:
    # LegacyRecord.ensureValid
    return CorruptRecordError(f"Record is corrupt (stored crc = {stored}, computed crc = {computed})")


def _size_delimited(message: bytes, pos: int) -> tuple[bytes | None, int]:
    """Utils.sizeDelimited: int32 size (< 0 = null) then that many bytes inside the message."""
    if len(message) - pos < 4:
        raise InvalidRecordError(_STRUCTURE)
    size = struct.unpack_from(">i", message, pos)[0]
    pos += 4
    if size < 0:
        return None, pos
    if len(message) - pos < size:
        raise InvalidRecordError(_STRUCTURE)
    return message[pos : pos + size], pos + size


@dataclass(frozen=True, slots=True)
class _Message:
    magic: int
    attributes: int
    timestamp: int
    own_type: TimestampType
    crc: int
    computed_crc: int
    key: bytes | None
    value: bytes | None


def _parse_message(message: bytes) -> _Message:
    """A LegacyRecord body (everything after offset and size). Magic 0 uses the v0 layout, any
    other magic the v1 layout, as LegacyRecord's accessors do."""
    if len(message) < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record is corrupt (crc could not be retrieved as the record is too small, size = {len(message)})"
        )
    stored = struct.unpack_from(">I", message, 0)[0]
    computed = zlib.crc32(memoryview(message)[4:]) & 0xFFFFFFFF
    magic = struct.unpack_from(">b", message, 4)[0]
    attributes = message[5]
    if magic == MAGIC_VALUE_V0:
        timestamp = NO_TIMESTAMP
        own_type = TimestampType.NO_TIMESTAMP_TYPE
        pos = HEADER_SIZE_V0
    else:
        if len(message) < RECORD_OVERHEAD_V1:
            raise InvalidRecordError(_STRUCTURE)
        timestamp = struct.unpack_from(">q", message, 6)[0]
        own_type = (
            TimestampType.LOG_APPEND_TIME if attributes & _TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME
        )
        pos = HEADER_SIZE_V1
    key, pos = _size_delimited(message, pos)
    value, pos = _size_delimited(message, pos)
    # Bytes after the value are covered by the CRC but never read (LegacyRecord has no end check).
    return _Message(magic, attributes, timestamp, own_type, stored, computed, key, value)


def _inner_entries(value: bytes) -> list[tuple[int, bytes]]:
    """DataLogInputStream over a decompressed inner message set: (offset, message) pairs; a trailing
    fragment is silently dropped, a size field below 14 is corrupt."""
    entries: list[tuple[int, bytes]] = []
    pos = 0
    end = len(value)
    while end - pos >= LOG_OVERHEAD:
        offset, size = struct.unpack_from(">qi", value, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
            )
        if end - pos - LOG_OVERHEAD < size:
            break
        entries.append((offset, value[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]))
        pos += LOG_OVERHEAD + size
    return entries


def _read_entry(batch: bytes, *, verify_crc: bool, max_output: int) -> LegacyEntry:
    offset = struct.unpack_from(">q", batch, 0)[0]
    outer = _parse_message(batch[LOG_OVERHEAD:])
    if verify_crc and outer.crc != outer.computed_crc:
        raise _corrupt_crc(outer.crc, outer.computed_crc)
    codec = CompressionType.for_id(outer.attributes & _CODEC_MASK)
    if codec is CompressionType.NONE:
        records: tuple[LegacyRecord, ...] = (
            LegacyRecord(
                offset,
                outer.magic,
                outer.attributes,
                outer.timestamp,
                outer.own_type,
                outer.key,
                outer.value,
                outer.crc,
                outer.computed_crc,
            ),
        )
    else:
        records = _deep_records(offset, outer, codec, verify_crc=verify_crc, max_output=max_output)
    return LegacyEntry(
        offset,
        len(batch),
        outer.magic,
        outer.attributes,
        outer.timestamp,
        outer.own_type,
        outer.crc,
        outer.computed_crc,
        outer.key,
        outer.value,
        records,
    )


def _deep_records(
    wrapper_offset: int, wrapper: _Message, codec: CompressionType, *, verify_crc: bool, max_output: int
) -> tuple[LegacyRecord, ...]:
    """AbstractLegacyRecordBatch.DeepRecordsIterator, plus the inner CRC check LogValidator does
    (`record.ensureValid()` for magic <= 1 compressed batches)."""
    if codec is CompressionType.ZSTD:
        raise InvalidRecordError(
            f"Invalid wrapper compressionType found in legacy deep record iterator {wrapper.magic}"
        )
    if wrapper.value is None:
        raise InvalidRecordError(
            f"Found invalid compressed record set with null value (magic = {wrapper.magic})"
        )
    inner = _inner_entries(decompress(codec, wrapper.value, max_output=max_output, magic=wrapper.magic))
    if not inner:
        raise InvalidRecordError("Found invalid compressed record set with no inner records")
    if wrapper.magic == MAGIC_VALUE_V1:
        if wrapper_offset == 0:
            base = (
                0  # "The outer offset may be 0 if this is produce data from certain versions of librdkafka."
            )
        else:
            last_inner = inner[-1][0]
            if wrapper_offset < last_inner:
                raise InvalidRecordError(
                    "Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper_offset}' is less than the last inner message offset '{last_inner}' and it is not zero."
                )
            base = wrapper_offset - last_inner
    else:
        base = None
    records = []
    for inner_offset, body in inner:
        msg = _parse_message(body)
        if msg.attributes & _CODEC_MASK:
            raise InvalidRecordError("Inner messages must not be compressed")
        if verify_crc and msg.crc != msg.computed_crc:
            raise _corrupt_crc(msg.crc, msg.computed_crc)
        timestamp = msg.timestamp
        ts_type = msg.own_type
        if msg.magic == MAGIC_VALUE_V1:
            # LegacyRecord(buffer, wrapperTimestamp, wrapperTimestampType)
            ts_type = wrapper.own_type
            if wrapper.own_type is TimestampType.LOG_APPEND_TIME:
                timestamp = wrapper.timestamp
        records.append(
            LegacyRecord(
                inner_offset if base is None else base + inner_offset,
                msg.magic,
                msg.attributes,
                timestamp,
                ts_type,
                msg.key,
                msg.value,
                msg.crc,
                msg.computed_crc,
            )
        )
    return tuple(records)


def read_message_set(
    data: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[LegacyEntry, ...]:
    """Read a legacy message set (back-to-back magic 0/1 entries, framed like any batch).

    With `verify_crc` every outer and inner message's CRC32 is checked and a mismatch raises
    CorruptRecordError("Record is corrupt (stored crc = X, computed crc = Y)"). Other failures:
    CorruptRecordError for framing, InvalidRecordError for structure (Kafka's texts),
    CorruptCompressedDataError for a broken wrapper payload, ValueError for codec ids 5-7 or a v2
    batch inside the set."""
    entries = []
    for batch in iter_batches(data):
        magic = struct.unpack_from(">b", batch, 16)[0]
        if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
            raise ValueError(f"Batch magic {magic} in a legacy message set")
        entries.append(_read_entry(batch, verify_crc=verify_crc, max_output=max_output))
    return tuple(entries)


# --------------------------------------------------------------------------------------------
# writing (MemoryRecordsBuilder for magic 0/1)


def _message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bB", magic, attributes & 0xFF))
    if magic != MAGIC_VALUE_V0:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(field))
            body += field
    return struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + bytes(body)


def _entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def build_message_set(
    records: Sequence[tuple[int, bytes | None, bytes | None]],
    *,
    magic: int,
    compression: CompressionType | int = CompressionType.NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    wrapper_offset: int | None = None,
) -> bytes:
    """Write `(timestamp, key, value)` records as a magic 0/1 message set like MemoryRecordsBuilder.

    Uncompressed: one entry per record at offsets base_offset+i. Compressed: one wrapper (null key)
    whose value is the compressed inner set; inner offsets are absolute for v0 and relative 0..n-1
    for v1; the wrapper offset is the absolute last offset (override with `wrapper_offset`, e.g. 0
    as some librdkafka versions send). v1 wrapper timestamp = max inner timestamp (CreateTime) or
    `log_append_time` (LogAppendTime, bit 3 on wrapper and inner messages). v0 ignores timestamps."""
    if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        raise ValueError(f"Invalid magic value {magic}")
    codec = CompressionType.for_id(int(compression))
    type_bit = (
        _TIMESTAMP_TYPE_MASK
        if magic == MAGIC_VALUE_V1 and timestamp_type is TimestampType.LOG_APPEND_TIME
        else 0
    )
    if type_bit and log_append_time is None:
        raise ValueError("log_append_time is required for a LogAppendTime message set")
    inner = []
    max_timestamp = NO_TIMESTAMP
    for i, (timestamp, key, value) in enumerate(records):
        if magic == MAGIC_VALUE_V0:
            timestamp = NO_TIMESTAMP
        if type_bit:  # MemoryRecordsBuilder: LogAppendTime stamps every message with the append time
            timestamp = log_append_time  # type: ignore[assignment]
        max_timestamp = max(max_timestamp, timestamp)
        relative = magic == MAGIC_VALUE_V1 and codec is not CompressionType.NONE
        inner.append(
            _entry(i if relative else base_offset + i, _message(magic, type_bit, timestamp, key, value))
        )
    if codec is CompressionType.NONE:
        return b"".join(inner)
    if codec is CompressionType.ZSTD:
        raise ValueError("zstd is not supported by magic v0/v1 message sets")
    wrapper_timestamp = log_append_time if type_bit else max_timestamp
    payload = compress(codec, b"".join(inner), magic=magic)
    last = base_offset + len(records) - 1 if wrapper_offset is None else wrapper_offset
    return _entry(last, _message(magic, int(codec) | type_bit, wrapper_timestamp, None, payload))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# up-conversion (LogValidator: convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets)


@dataclass(frozen=True, slots=True)
class UpConversion:
    """A legacy message set read for up-conversion to magic 2 (`LogValidator.convertAndAssignOffsetsNonCompressed`).

    `records` carry the timestamps the validator checks (v0: -1; v1: preserved, LogAppendTime
    wrappers reporting the wrapper time); `source_compression` is Kafka's sourceCompression (the
    last non-none codec of the entries), which `compression.type=producer` keeps."""

    entries: tuple[LegacyEntry, ...]
    records: tuple[LegacyRecord, ...]
    source_magic: int
    source_compression: CompressionType

    def to_v2_batch(
        self,
        *,
        base_offset: int = 0,
        compression: CompressionType | int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> bytes:
        """The one v2 batch the leader writes (MemoryRecordsBuilder, magic 2): offsets base_offset..,
        record timestamps copied (baseTimestamp = first record's), no producer id, codec =
        `compression` or the source codec. CreateTime: maxTimestamp = max record timestamp (from -1);
        LogAppendTime: attribute bit 3 and maxTimestamp = `log_append_time`. A record timestamp < 0
        other than -1 raises ValueError("Invalid negative timestamp <ts>") as the builder does."""
        if timestamp_type is TimestampType.LOG_APPEND_TIME and log_append_time is None:
            raise ValueError("log_append_time is required for LogAppendTime")
        codec = self.source_compression if compression is None else CompressionType.for_id(int(compression))
        return build_record_batch(
            [(r.timestamp, r.key, r.value) for r in self.records],
            base_offset=base_offset,
            compression=codec,
            timestamp_type=timestamp_type,
            max_timestamp=log_append_time if timestamp_type is TimestampType.LOG_APPEND_TIME else None,
            partition_leader_epoch=partition_leader_epoch,
            reject_negative_timestamps=True,
        )


def upconvert_to_v2(
    data: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> UpConversion:
    """Read a legacy message set for up-conversion; `.to_v2_batch(...)` emits the v2 batch.

    Raises what `read_message_set` raises, and InvalidRecordError("Record batch has no batches at
    all") for an empty set (LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches)."""
    entries = read_message_set(data, verify_crc=verify_crc, max_output=max_output)
    if not entries:
        raise InvalidRecordError("Record batch has no batches at all")
    source = CompressionType.NONE
    for entry in entries:
        if entry.compression is not CompressionType.NONE:
            source = entry.compression
    records = tuple(r for entry in entries for r in entry.records)
    return UpConversion(entries, records, entries[0].magic, source)
