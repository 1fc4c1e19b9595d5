"""End-transaction markers: the control batch a transaction coordinator has each partition leader append.

Kafka's classes: `ControlRecordType` (the control record key), `EndTransactionMarker` with its value
message `EndTxnMarker` (`common/message/EndTxnMarker.json`: version 0 only, not flexible, so no tagged
fields byte), and `MemoryRecords.withEndTransactionMarker(initialOffset, timestamp, partitionLeaderEpoch,
producerId, producerEpoch, marker)`, which writes with a `MemoryRecordsBuilder` (magic 2, no compression,
CreateTime, baseSequence -1, isTransactional and isControlBatch set) and `appendEndTxnMarker`:

    key   = version int16 (0) | type int16 (ABORT 0, COMMIT 1)       -- 4 bytes
    value = version int16 (0) | coordinatorEpoch int32               -- 6 bytes

in one record at offsetDelta 0, timestampDelta 0, record attributes 0, no headers: a 78-byte batch
(61-byte header + 17-byte record). baseTimestamp = maxTimestamp = the timestamp given; lastOffsetDelta 0.

Reading follows `EndTransactionMarker.deserialize` (`ControlRecordType.parseTypeId`, `deserializeValue`):
a key or value version above 0 is read as version 0 and bytes after the fields are ignored (forward
compatibility); a negative version, a short key or value, or a type other than ABORT/COMMIT is rejected.
The batch around it must be what a leader can hold: one v2 batch, CRC-32C valid, control and
transactional flags set, a producer id, exactly one record. Every failure is a ValueError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from validators.codec.compression import CorruptCompressedDataError
from validators.codec.record_batch import (
    CURRENT_MAGIC_VALUE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    DecodedBatch,
    RecordBatchHeader,
    build_record_batch,
    compute_crc,
    decode_record_batch,
    parse_header,
)
from validators.codec.records import InvalidRecordError

__all__ = [
    "CONTROL_RECORD_KEY_SIZE",
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VALUE_SIZE",
    "END_TXN_MARKER_VALUE_VERSION",
    "ControlRecordType",
    "EndTransactionMarker",
    "build_end_txn_marker",
    "encode_control_key",
    "encode_end_txn_value",
    "parse_control_key",
    "parse_end_txn_marker",
    "parse_end_txn_value",
    "read_end_txn_marker",
]

CONTROL_RECORD_KEY_VERSION = 0  # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION
CONTROL_RECORD_KEY_SIZE = 4  # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_SIZE
END_TXN_MARKER_VALUE_VERSION = 0  # EndTxnMarker's only version (MessageUtil.toVersionPrefixedByteBuffer)
END_TXN_MARKER_VALUE_SIZE = 6  # EndTransactionMarker.CURRENT_END_TXN_MARKER_VALUE_SIZE

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class ControlRecordType(IntEnum):
    """Kafka's `ControlRecordType` ids. Only ABORT and COMMIT end a transaction; the KRaft types are
    listed so a reader can say which control record it met instead of "unknown". Kafka's UNKNOWN (-1)
    is not a type on disk but its name for any other id, which the parser rejects by number."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_END_TXN_TYPES = (ControlRecordType.ABORT, ControlRecordType.COMMIT)


@dataclass(frozen=True)
class EndTransactionMarker:
    """Kafka's `EndTransactionMarker`: COMMIT or ABORT and the coordinator epoch that wrote it (the
    leader fences markers from an older coordinator with it)."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        try:
            control_type = ControlRecordType(self.control_type)
        except ValueError:
            raise ValueError(f"Unknown control record type {self.control_type!r}") from None
        # EndTransactionMarker.ensureTransactionMarkerControlType
        if control_type not in _END_TXN_TYPES:
            raise ValueError(
                f"Invalid control record type for end transaction marker: {control_type.name} ({control_type.value})"
            )
        _check_range("coordinator_epoch", self.coordinator_epoch, _INT32)
        object.__setattr__(self, "control_type", control_type)  # a plain 0/1 becomes the enum member


def _check_range(name: str, value: int, bounds: tuple[int, int]) -> None:
    # Kafka's Java types bound these; a Python int outside them would otherwise surface as struct.error
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{name} {value} is outside [{bounds[0]}, {bounds[1]}]")


def encode_control_key(control_type: ControlRecordType) -> bytes:
    """`ControlRecordType.recordKey()` written: version int16 0, type int16."""
    return _KEY.pack(CONTROL_RECORD_KEY_VERSION, ControlRecordType(control_type))


def encode_end_txn_value(coordinator_epoch: int) -> bytes:
    """`EndTransactionMarker.serializeValue()`: version int16 0, then EndTxnMarker v0 (coordinatorEpoch
    int32; v0 is not flexible, so no tagged-fields byte follows)."""
    _check_range("coordinator_epoch", coordinator_epoch, _INT32)
    return _VALUE.pack(END_TXN_MARKER_VALUE_VERSION, coordinator_epoch)


def build_end_txn_marker(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The batch `MemoryRecords.withEndTransactionMarker(base_offset, timestamp, partition_leader_epoch,
    producer_id, producer_epoch, marker)` returns, byte for byte.

    Raises ValueError with Kafka's texts where Kafka throws IllegalArgumentException, in Kafka's order:
    "End transaction marker requires a valid producerId" (producer_id -1, `appendEndTxnMarker`),
    "Invalid negative timestamp <ts>" (below -1, `appendWithOffset`), "Invalid negative producer epoch"
    (exactly -1, `validateProducerState` at close; other negative epochs pass, as in Kafka), and a
    ValueError for a value outside its Java type."""
    _check_range("producer_id", producer_id, _INT64)
    _check_range("producer_epoch", producer_epoch, _INT16)
    _check_range("base_offset", base_offset, _INT64)
    _check_range("timestamp", timestamp, _INT64)
    _check_range("partition_leader_epoch", partition_leader_epoch, _INT32)
    if producer_id == NO_PRODUCER_ID:
        raise ValueError("End transaction marker requires a valid producerId")
    if timestamp < 0 and timestamp != NO_TIMESTAMP:
        raise ValueError(f"Invalid negative timestamp {timestamp}")
    if producer_epoch == NO_PRODUCER_EPOCH:
        raise ValueError("Invalid negative producer epoch")
    record = (timestamp, encode_control_key(marker.control_type), encode_end_txn_value(marker.coordinator_epoch))
    # build_record_batch's defaults are the builder's here: no compression, CreateTime, baseSequence -1,
    # maxTimestamp = max(-1, timestamp) and no record headers.
    return build_record_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_key(key: bytes | None) -> ControlRecordType:
    """`ControlRecordType.parse(key)`, rejecting ids Kafka would map to UNKNOWN."""
    if key is None:
        raise ValueError("Control record has a null key")
    if len(key) < CONTROL_RECORD_KEY_SIZE:
        raise ValueError(
            "Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_RECORD_KEY_SIZE} bytes, but found only {len(key)}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise ValueError(f"Invalid version found for control record: {version}. May indicate data corruption")
    # version > 0 is read as version 0 (Kafka logs it at debug); trailing key bytes are ignored
    try:
        return ControlRecordType(type_id)
    except ValueError:
        raise ValueError(f"Unknown control record type id {type_id}") from None


def parse_end_txn_value(control_type: ControlRecordType, value: bytes | None) -> EndTransactionMarker:
    """`EndTransactionMarker.deserializeValue(type, value)`."""
    if control_type not in _END_TXN_TYPES:
        raise ValueError(
            f"Invalid control record type for end transaction marker: {control_type.name} ({control_type.value})"
        )
    if value is None:
        raise ValueError("End transaction marker has a null value")
    if len(value) < END_TXN_MARKER_VALUE_SIZE:
        # Kafka 4 reads with a ByteBuffer and fails with BufferUnderflowException; same bytes rejected
        raise ValueError(
            "Invalid value size found for end transaction marker. Must have at least "
            f"{END_TXN_MARKER_VALUE_SIZE} bytes, but found only {len(value)}"
        )
    version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    if version < 0:
        raise ValueError(
            f"Invalid version found for end transaction marker: {version}. May indicate data corruption"
        )
    return EndTransactionMarker(control_type, coordinator_epoch)


def _check_marker_header(header: RecordBatchHeader) -> None:
    # the header's own rules before any record is read: a data batch is reported as such, not as a bad record
    if not header.is_control_batch:
        raise ValueError(f"Not a control batch (attributes 0x{header.attributes & 0xFFFF:04x})")
    if not header.is_transactional:
        raise ValueError("End transaction marker depends on batch transactional flag being enabled")
    if header.producer_id == NO_PRODUCER_ID:
        raise ValueError("End transaction marker requires a valid producerId")
    if header.records_count != 1:
        raise ValueError(
            f"End transaction marker batch must hold exactly one control record, found {header.records_count}"
        )


def read_end_txn_marker(batch: DecodedBatch) -> EndTransactionMarker:
    """The marker of a batch `decode_record_batch` already decoded (its CRC and framing are the caller's)."""
    _check_marker_header(batch.header)
    if len(batch.records) != 1:  # only a hand-made DecodedBatch can disagree with its header
        raise ValueError(f"End transaction marker batch must hold exactly one control record, found {len(batch.records)}")
    record = batch.records[0]
    return parse_end_txn_value(parse_control_key(record.key), record.value)


def parse_end_txn_marker(batch: bytes | bytearray | memoryview) -> EndTransactionMarker:
    """The marker in `batch`, which must be exactly one v2 end-transaction control batch.

    Checks, in order: framing (61-byte header, magic 2, size field = the bytes given), CRC-32C, control
    and transactional flags, producer id, record count 1, then the records area and the record's key and
    value as `read_end_txn_marker`. Any failure is a ValueError naming it."""
    data = bytes(batch)
    if len(data) < RECORD_BATCH_OVERHEAD:
        raise ValueError(
            f"End transaction marker batch needs at least {RECORD_BATCH_OVERHEAD} bytes, got {len(data)}"
        )
    header = parse_header(data)
    if header.magic != CURRENT_MAGIC_VALUE:
        raise ValueError(f"Not a v2 record batch: magic {header.magic}")
    if header.size_in_bytes != len(data):
        # a leader appends one marker batch: no truncation, nothing after it
        raise ValueError(
            f"Batch size field says {header.size_in_bytes} bytes, {len(data)} given (one whole batch expected)"
        )
    computed = compute_crc(data)
    if computed != header.crc:
        raise ValueError(f"Record batch is corrupt (stored crc = {header.crc}, computed crc = {computed})")
    _check_marker_header(header)
    try:
        decoded = decode_record_batch(data)
    except (ValueError, InvalidRecordError, CorruptCompressedDataError) as e:
        # InvalidRecordError and CorruptCompressedDataError are not ValueErrors: normalise them
        raise ValueError(f"End transaction marker batch has a malformed records area: {e}") from e
    return read_end_txn_marker(decoded)
