"""The append decision: Kafka's `LogValidator` + the leader checks around it, as one pure function
of (batch bytes, topic config, partition state, clock) — Kafka's produce path (`UnifiedLog.append`) steps 4-17,
docs/design.md: what the stage decides.

Nothing here reads a clock, logs or does I/O: `now_ms` is the micro-batch clock passed in; accepted
records more than one hour in the future are counted (`future_timestamp_count`, KIP-937) for the stage
to report. The decision reads top to bottom in the order it runs: the entry (`validate_and_assign`; the stage
enters through `partition_lane.decide_in_lane`), the leader's checks before LogValidator with step 5's framing,
then Kafka's `LogValidator.validateMessagesAndAssignOffsets` for v2 (`_stored_v2`: analyzeAndValidateRecords,
validateBatch, the record walk, the in-place assignment of paths A/B or buildRecordsAndAssignOffsets, path C)
and for magic 0/1 (`_decide_legacy`: convertAndAssignOffsetsNonCompressed), then the producer-state step and
the accepted result. It calls out only to leaves that never call back: the record walks with validateRecord
and processRecordErrors (`record_walks` for v2, `legacy_record_walk` for magic 0/1), `producer_state`,
`timestamps`, `append_result` (what is returned) and the codec.

Order of checks (Kafka's; the first failing one decides):

    step 1        transactional batch without a transactional.id           53 (see below)
    step 8        illegal topic name (Topic.validate) / internal topic      17
    step 4        topic not in the registry, partition out of range          3
    step 5        framing (ByteBufferLogInputStream, validateRecords)        2 / 87
    step 11b-e    baseOffset != 0 (87), size > max.message.bytes (10),
                  CRC / size < 61 (2), codec id 5-7 (-1)
    step 12       LogValidator: validateBatch (87), record iteration
                  structure (87), per-record key / timestamp errors (87 / 32)
    step 13       rebuilt batch > max.message.bytes                          10
    step 15       batch > segment.bytes                                      18
    step 17       idempotent producer: duplicate (ack), epoch (47), sequence (45)

Gateway decisions (documented differences; everything else follows Kafka):

* Clock (docs/design.md: what the stage decides): `append_time = max(now_ms, state.last_append_time_ms)`; LogAppendTime topics
  stamp `append_time` (Kafka stamps its raw wall clock); window checks use `now_ms`.
* One batch per ingress message (docs/design.md: ingress topic): a second complete v2 batch is Kafka's Produce v13
  `validateRecords` error "Produce requests with version 13 are only allowed to contain exactly one
  record batch per partition" (87); a trailing fragment shorter than a batch is dropped as Kafka's
  `trimInvalidBytes` does, unless its size field or magic is corrupt (2).
* Legacy magic 0/1 input is up-converted (docs/design.md: ingress topic) as LogValidator does for `toMagic = 2`: v0
  records get timestamp -1, v1 keep theirs, the source codec is kept. Kafka 4.x rejects magic < 2 on Produce v3+.
* Transactional batches are decided as Kafka decides them when the ingress carries the transactional id the
  front door authorized (`gw.transactional.id`); without one they get Kafka's answer to a produce request with
  transactional records and a null transactional.id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).
* Rebuilds (path C, `buildRecordsAndAssignOffsets`) happen where Kafka rebuilds: a topic `compression.type` other
  than `producer` and the batch's codec, and legacy input; records re-encoded like `MemoryRecordsBuilder` (compressed
  bytes may differ from Java's codec libraries, the records not). compression.type=producer, v2, is always in place.
  Non-contiguous inner offsets in a compressed batch: UNKNOWN_SERVER_ERROR, as Kafka 4.2 answers (seen on a broker).
* Record walk depth (`gateway.record.validation`) and corrupt compressed streams: `record_walks`.
* Idempotent producers (producer_state.py): a duplicate is acknowledged with the original offsets and
  `log_append_time_ms` = the cached batch timestamp — Kafka's quirk is kept: on CreateTime topics that
  is the original batch's max CreateTime, not -1. Expiry uses the gateway's append time.
* KIP-937 future timestamps: `future_timestamp_count` counts accepted records of CreateTime topics more
  than one hour ahead of `now_ms` (LogAppendTime records all read the append time: 0).
* Error messages: `Rejected.message` is always the exception text Kafka would log; Kafka's
  ProduceResponse carries it as ErrorMessage only for per-record errors (`response_error_message`).
"""

from __future__ import annotations

import struct
import zlib
from enum import Enum
from typing import NamedTuple

from crc32c import crc32c

from contract.transaction_version import TransactionVersion
from validators import producer_state
from validators.append_result import (
    GATEWAY_LEADER_EPOCH,
    Accepted,
    AppendResult,
    PartitionState,
    Rejected,
    RejectedBatch,
    invalid_record,
)
from validators.codec import legacy_records, native_walk
from validators.codec import record_batch as rb
from validators.codec import records as rec
from validators.codec.compression import CompressionType, CorruptCompressedDataError, decompress
from validators.codec.control_batch import ControlRecordType, parse_end_txn_marker
from validators.codec.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    CorruptRecordError,
    TimestampType,
)
from validators.errors import Errors
from validators.legacy_record_walk import check_legacy_records, read_entry
from validators.producer_state import BatchMetadata, ProducerStateError, ProducerTable
from validators.record_walks import V2Header, check_records
from validators.timestamps import (
    to_long,
)
from validators.topic_config import INTERNAL_TOPICS, RecordValidation, TopicConfig, topic_name_error

_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # a v2 batch's attributes are an int16: the flags are in its low byte
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_CRC_AT = 17  # v2: DefaultRecordBatch.CRC_OFFSET; the CRC-32C covers attributes..end
_LEGACY_CRC_AT = LOG_OVERHEAD  # LegacyRecord: crc, then magic, attributes
_MAX_CODEC_ID = 4  # CompressionType.forId: 0-4 known


class AppendOrigin(Enum):
    """Who appends (Kafka's `AppendOrigin`): a client's produce, one with an authorized transactional id, or the
    transaction coordinator's marker."""

    CLIENT = "client"
    CLIENT_TRANSACTIONAL = "client-transactional"
    COORDINATOR = "coordinator"


def _tp(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def validate_and_assign(
    batch: bytes, topic: str, partition: int | None, config: TopicConfig | None, state: PartitionState, now_ms: int,
    origin: AppendOrigin = AppendOrigin.CLIENT, transaction_version: TransactionVersion = TransactionVersion.TV_0,
) -> AppendResult:
    """Decide one produce batch for `topic`-`partition` at the micro-batch clock `now_ms`.

    Accepted: the bytes to store (offsets from `state.log_end_offset`), the new state, and what the
    produce response carries. Rejected: Kafka's error, message and record errors; state unchanged. `origin`:
    CLIENT_TRANSACTIONAL for a produce whose transactional id the front door authorized, COORDINATOR for a
    transaction marker of a `transaction_version` transaction from the front door's transaction coordinator."""
    if type(batch) is not bytes:
        batch = bytes(batch)
    framed = frame_batch(batch)  # step 5's framing, reported where each path's order of checks puts it
    try:
        if origin is AppendOrigin.COORDINATOR:
            return _decide_marker(batch, framed, topic, partition, config, state, now_ms, transaction_version)
        return _decide(batch, framed, topic, partition, config, state, now_ms,
                       origin is AppendOrigin.CLIENT_TRANSACTIONAL)
    except RejectedBatch as r:
        return r.result


def native_applies(config: TopicConfig) -> bool:
    """The native path A decides only what the full walk keeps in place (no target codec to rebuild into)."""
    return config.record_validation is RecordValidation.FULL and config.target_compression_id in (None, 0)


# The leader's checks before LogValidator: steps 1, 8, 4 and 5, in Kafka's order.

# The produce request version whose texts the gateway speaks (Kafka 4.1+ clients send v13).
PRODUCE_VERSION = 13
_HEADER_UP_TO_MAGIC = 17  # offset + size + leader epoch + magic
_SIZE_AT_8 = struct.Struct(">i")
_MAGIC = struct.Struct(">b")


def next_batch_size(data: bytes, pos: int) -> tuple[int, int] | Rejected | None:
    """Step 5, `ByteBufferLogInputStream.nextBatchSize` + `nextBatch`: (size, magic), a CORRUPT_MESSAGE, or
    None when no complete batch starts at `pos`."""
    remaining = len(data) - pos
    if remaining < LOG_OVERHEAD:
        return None
    size = _SIZE_AT_8.unpack_from(data, pos + 8)[0]
    if size < RECORD_OVERHEAD_V0:
        return Rejected(
            Errors.CORRUPT_MESSAGE,
            f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
        )
    if remaining < _HEADER_UP_TO_MAGIC:
        return None
    magic = _MAGIC.unpack_from(data, pos + 16)[0]
    if magic < 0 or magic > 2:
        return Rejected(Errors.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    if remaining < size + LOG_OVERHEAD:
        return None
    return size + LOG_OVERHEAD, magic


def frame_batch(data: bytes) -> tuple[int, int] | Rejected:
    """Step 5, Produce v13's `validateRecords`: exactly one complete v2 batch per partition (a legacy message set may
    hold several entries: `_decide_legacy` frames them). (size, magic) or Kafka's error."""
    first = next_batch_size(data, 0)
    if first is None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} must have at least one record batch per partition",
        )
    if isinstance(first, Rejected) or first[1] < 2:
        return first
    second = next_batch_size(data, first[0])
    if isinstance(second, Rejected):
        return second
    if second is not None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} are only allowed to contain exactly one record "
            "batch per partition",
        )
    return first


def _decide(
    data: bytes, framed: tuple[int, int] | Rejected, topic: str, partition: int | None, config: TopicConfig | None,
    state: PartitionState, now_ms: int, transactional_id: bool = False,
) -> AppendResult:
    """`framed`: (batch_size, magic) or the framing error, reported in Kafka's order below."""
    # step 1 (KafkaApis): transactional records need an authorized transactional.id
    if isinstance(framed, tuple) and framed[1] == 2 and data[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK and not transactional_id:
        return Rejected(
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.default_message or "",
        )
    name_error = topic_name_error(topic)
    if name_error is not None:
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, name_error)
    if topic in INTERNAL_TOPICS:  # step 8: ReplicaManager.appendToLocalLog
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    if config is None or partition is None or not 0 <= partition < config.partitions:  # step 4
        return Rejected(Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION.default_message or "")
    tp = _tp(topic, partition)
    if isinstance(framed, Rejected):  # step 5
        return framed
    batch_size, magic = framed
    if magic == 2:
        return _decide_v2(data, batch_size, tp, config, state, now_ms)
    return _decide_legacy(data, tp, config, state, now_ms)


def _decide_marker(
    data: bytes, framed: tuple[int, int] | Rejected, topic: str, partition: int | None, config: TopicConfig | None,
    state: PartitionState, now_ms: int, transaction_version: TransactionVersion,
) -> AppendResult:
    """A transaction marker from the coordinator (`ReplicaManager.appendRecords` with origin COORDINATOR, as
    for WriteTxnMarkers): one end-transaction control batch, given offsets and stamped like any batch, that
    ends the producer's open transaction here (`producer_state.append_end_txn_marker`, with the transaction's
    version). The coordinator built it with its own clock, so the KIP-937 windows are not applied to it."""
    if config is None or partition is None or not 0 <= partition < config.partitions:
        return Rejected(Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION.default_message or "")
    tp = _tp(topic, partition)
    if isinstance(framed, Rejected):
        return framed
    batch_size = framed[0]
    try:
        marker = parse_end_txn_marker(data[:batch_size])
    except ValueError as e:
        return invalid_record(f"Invalid transaction marker for {tp}: {e}", state.log_start_offset)
    (_, _, _, _, _, _, _, _, max_timestamp, producer_id, producer_epoch, _, _) = BATCH_HEADER.unpack_from(data, 0)
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    append_time = _append_clock(state, now_ms)
    max_ts = append_time if lat_topic else max_timestamp
    stored = rb.assign_offsets_and_timestamp(data[:batch_size], state.log_end_offset, config.message_timestamp_type,
                                             max_ts, GATEWAY_LEADER_EPOCH)
    producers = producer_state.expire(state.producers, now_ms, config.producer_id_expiration_ms)
    try:
        producers, completed = producer_state.append_end_txn_marker(
            producers, producers.get(producer_id), producer_id, producer_epoch,
            marker.control_type is ControlRecordType.ABORT, marker.coordinator_epoch, state.log_end_offset,
            append_time, tp, transaction_version=transaction_version)
    except ProducerStateError as e:
        return Rejected(e.error, e.message, log_start_offset=state.log_start_offset)
    accepted = _appended(stored, 1, max_ts, lat_topic, append_time, now_ms, state, producers, future_count=0,
                        producer_max_timestamp=max_timestamp, rebuilt=False)
    return accepted._replace(completed_txn=completed)


# A v2 batch: step 11 (analyzeAndValidateRecords), step 12 (LogValidator.validateMessagesAndAssignOffsets:
# validateBatch, the record walk with validateRecord, processRecordErrors, in-place assignment or
# buildRecordsAndAssignOffsets), steps 13 and 15.


def _decide_v2(
    data: bytes, batch_size: int, tp: str, config: TopicConfig, state: PartitionState, now_ms: int
) -> AppendResult:
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    append_time = _append_clock(state, now_ms)
    native = native_walk.NATIVE_WALK
    fast = None
    if native is not None and batch_size == len(data) and native_applies(config):
        # the clean uncompressed batch in one native pass; None: not clean, decided below with Kafka's texts
        fast = native.decide_in_place(
            data, state.log_end_offset, GATEWAY_LEADER_EPOCH, config.max_message_bytes, config.segment_bytes,
            lat_topic, append_time, now_ms, config.message_timestamp_before_max_ms,
            config.message_timestamp_after_max_ms, config.compacted, crc32c,
        )
    v2 = _stored_v2(data, batch_size, tp, config, state, now_ms, lat_topic, append_time) if fast is None else StoredV2(*fast)
    return producer_step(v2, tp, config, state, now_ms, lat_topic, append_time)


class StoredV2(NamedTuple):
    """A v2 batch past steps 11-15 and LogValidator: what is stored and what step 17 needs; the first nine
    fields in the order `_record_walk.decide_in_place` returns them."""

    stored: bytes
    max_timestamp: int  # the stored maxTimestamp
    future_count: int  # KIP-937: accepted records > 1 h ahead
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    count: int
    producer_max_timestamp: int  # the header's maxTimestamp as the producer sent it
    rebuilt: bool = False  # path C


def _stored_v2(
    data: bytes, batch_size: int, tp: str, config: TopicConfig, state: PartitionState, now_ms: int, lat_topic: bool,
    append_time: int,
) -> StoredV2:
    """Steps 11-15 and LogValidator for any v2 batch: the stored bytes and what the producer-state step needs.
    Raises RejectedBatch."""
    lso = state.log_start_offset
    codec_id = _analyze_entry(data, batch_size, 2, tp, config.max_message_bytes, lso)
    (_, _, _, _, _, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
     base_sequence, count) = BATCH_HEADER.unpack_from(data, 0)
    _validate_batch(attributes, last_offset_delta, count, producer_id, base_sequence, tp, lso)

    target_id = config.target_compression_id
    in_place = target_id is None or target_id == codec_id  # codec equality decides (not the level)
    header = V2Header(base_timestamp, max_timestamp, attributes, count, batch_size)
    area = _decompress(data, batch_size, codec_id, lso) if codec_id else None  # once, for the walk and a rebuild
    checked = check_records(data, area, header, in_place, lat_topic, tp, config, now_ms, lso)

    max_ts = append_time if lat_topic else checked.max_timestamp
    if in_place:
        stored = rb.assign_offsets_and_timestamp(
            data if batch_size == len(data) else data[:batch_size],
            state.log_end_offset,
            config.message_timestamp_type,
            max_ts,
            GATEWAY_LEADER_EPOCH,
        )
    else:
        stored = _rebuild_v2(data, area, header, codec_id, target_id, tp, config, state, append_time, lso,
                             producer_id, producer_epoch, base_sequence)
    _check_fits_segment(len(stored), tp, config.segment_bytes)
    return StoredV2(stored, max_ts, checked.future_count, producer_id, producer_epoch, base_sequence,
                    last_offset_delta, count, max_timestamp, rebuilt=not in_place)


def _analyze_entry(entry: bytes, size: int, magic: int, tp: str, max_message_bytes: int, lso: int) -> int:
    """Step 11 b-e for one shallow entry of `size` bytes at the start of `entry`; returns its codec id."""
    if magic == 2:
        base_offset = _BASE_OFFSET.unpack_from(entry, 0)[0]
        if base_offset != 0:  # 11b (magic >= 2 only)
            raise RejectedBatch(invalid_record(
                f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {base_offset}", lso
            ))
    if size > max_message_bytes:  # 11c (sic: stray ")")
        raise RejectedBatch(Rejected(
            Errors.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {tp} is {size} bytes which exceeds the maximum "
            f"configured value of {max_message_bytes}).",
        ))
    if magic == 2:
        stored = _CRC.unpack_from(entry, _CRC_AT)[0]
        valid = size >= RECORD_BATCH_OVERHEAD and stored == crc32c(memoryview(entry)[_CRC_AT + 4 : size])
        codec_id = entry[_ATTRIBUTES_LOW_BYTE] & 0x07
    else:  # LegacyRecord.isValid: CRC-32 over magic..end of the outer message
        stored = _CRC.unpack_from(entry, _LEGACY_CRC_AT)[0]
        valid = zlib.crc32(memoryview(entry)[_LEGACY_CRC_AT + 4 : size]) & 0xFFFFFFFF == stored
        codec_id = entry[_LEGACY_CRC_AT + 5] & 0x07
    if not valid:  # 11d
        raise RejectedBatch(
            Rejected(Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {stored}) in topic partition {tp}.")
        )
    if codec_id > _MAX_CODEC_ID:  # 11e: forId throws IllegalArgumentException -> UNKNOWN_SERVER_ERROR
        raise RejectedBatch(
            Rejected(Errors.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec_id}", log_start_offset=lso)
        )
    return codec_id


def _validate_batch(
    attributes: int, last_offset_delta: int, count: int, producer_id: int, base_sequence: int, tp: str, lso: int
) -> None:
    """`LogValidator.validateBatch` (origin CLIENT, magic 2; the baseOffset is 0 here)."""
    count_from_offsets = last_offset_delta + 1
    message = None
    if count_from_offsets <= 0:
        message = f"Batch has an invalid offset range: [0, {last_offset_delta}] in topic partition {tp}"
    elif count <= 0:
        message = f"Invalid reported count for record batch: {count} in topic partition {tp}"
    elif count_from_offsets != count:
        message = (f"Inconsistent batch offset range [0, {last_offset_delta}] and count of records {count} in topic "
                   f"partition {tp}")
    elif attributes & CONTROL_FLAG_MASK:
        message = f"Clients are not allowed to write control records in topic partition {tp}"
    elif producer_id >= 0 and base_sequence < 0:
        message = (f"Invalid sequence number {base_sequence} in record batch with producerId {producer_id} in topic "
                   f"partition {tp}")
    if message is not None:
        raise RejectedBatch(invalid_record(message, lso))


def _decompress(data: bytes, batch_size: int, codec_id: int, lso: int) -> bytes:
    """The records of a compressed batch (its header checked by step 11), decompressed once, at most
    `DEFAULT_MAX_DECOMPRESSED_BYTES`."""
    try:
        return decompress(codec_id, data[RECORD_BATCH_OVERHEAD:batch_size])
    except CorruptCompressedDataError as e:
        # the codec stream's IOException surfaces as KafkaException("Failed to decompress record
        # stream"), not an ApiException: UNKNOWN_SERVER_ERROR (seen on a Kafka 4.2 broker)
        raise RejectedBatch(Rejected(
            Errors.UNKNOWN_SERVER_ERROR, f"Failed to decompress record stream: {e}", log_start_offset=lso,
        )) from None


def _rebuild_v2(
    data: bytes, area: bytes | None, h: V2Header, codec_id: int, target_id: int | None, tp: str, config: TopicConfig,
    state: PartitionState, append_time: int, lso: int, producer_id: int, producer_epoch: int, base_sequence: int,
) -> bytes:
    """MemoryRecordsBuilder over the validated records: fresh offsets from the log end offset, the
    records' own timestamps, the topic's timestamp type and target codec, producer fields copied. `area`: the
    decompressed records the walk read (None: uncompressed, read in place)."""
    decoded = rec.decode_records(data[RECORD_BATCH_OVERHEAD : h.batch_size] if area is None else area, h.count)
    batch_lat = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    items = [
        (h.max_timestamp if batch_lat else to_long(h.base_timestamp + r.timestamp_delta), r.key, r.value, r.headers)
        for r in decoded
    ]
    try:
        rebuilt = rb.build_record_batch(
            items,
            base_offset=state.log_end_offset,
            compression=codec_id if target_id is None else target_id,
            timestamp_type=config.message_timestamp_type,
            max_timestamp=append_time if lat_topic else None,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=False,
            partition_leader_epoch=GATEWAY_LEADER_EPOCH,
            reject_negative_timestamps=True,
        )
    except ValueError as e:  # "Invalid negative timestamp <ts>": IllegalArgumentException -> -1
        raise RejectedBatch(Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)) from None
    _check_rebuilt_size(rebuilt, tp, config)
    return rebuilt


def _check_rebuilt_size(rebuilt: bytes, tp: str, config: TopicConfig) -> None:
    """Step 13: a rebuilt batch is re-checked against max.message.bytes (sic: "append topartition")."""
    if len(rebuilt) > config.max_message_bytes:
        raise RejectedBatch(
            Rejected(
                Errors.MESSAGE_TOO_LARGE,
                f"Message batch size is {len(rebuilt)} bytes in append topartition {tp} which exceeds the "
                f"maximum configured size of {config.max_message_bytes}.",
            )
        )


def _check_fits_segment(size: int, tp: str, segment_bytes: int) -> None:
    """Step 15: the batch as it will be stored must fit in one segment."""
    if size > segment_bytes:
        raise RejectedBatch(Rejected(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {segment_bytes}.",
        ))


# A legacy (magic 0/1) message set: step 11 per shallow entry, then LogValidator's up-conversion to v2.


def _decide_legacy(data: bytes, tp: str, config: TopicConfig, state: PartitionState, now_ms: int) -> AppendResult:
    lso = state.log_start_offset
    try:
        shallow = list(rb.iter_batches(data))
    except CorruptRecordError as e:
        return Rejected(Errors.CORRUPT_MESSAGE, e.message)
    source = CompressionType.NONE
    for entry_bytes in shallow:  # step 11 over every shallow entry, before LogValidator
        codec_id = _analyze_entry(entry_bytes, len(entry_bytes), entry_bytes[16], tp, config.max_message_bytes, lso)
        if codec_id:
            source = CompressionType(codec_id)
    # LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches
    if source is not CompressionType.NONE and len(shallow) > 1:
        return invalid_record("Compressed outer record has more than one batch", lso)

    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    first_magic = shallow[0][16]
    entries: list[legacy_records.LegacyEntry] = []
    max_ts = NO_TIMESTAMP
    future = 0
    for entry_bytes in shallow:
        # validateBatch: same magic as the first batch (toMagic 2 > legacy: no producer-id checks apply)
        if entry_bytes[16] != first_magic:
            return invalid_record(
                f"Batch magic {entry_bytes[16]} is not the same as the first batch's magic byte {first_magic} in "
                f"topic partition {tp}",
                lso,
            )
        entry = read_entry(entry_bytes, tp, lso)
        entries.append(entry)
        entry_max, entry_future = check_legacy_records(entry, lat_topic, tp, config, now_ms, lso)
        max_ts = max(max_ts, entry_max)
        future += entry_future

    # Path C (convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets): one v2 batch
    append_time = _append_clock(state, now_ms)
    records = tuple(r for e in entries for r in e.records)
    conversion = legacy_records.UpConversion(tuple(entries), records, first_magic, source)
    target_id = config.target_compression_id
    try:
        stored = conversion.to_v2_batch(
            base_offset=state.log_end_offset,
            compression=source if target_id is None else target_id,
            timestamp_type=config.message_timestamp_type,
            log_append_time=append_time if lat_topic else None,
            partition_leader_epoch=GATEWAY_LEADER_EPOCH,
        )
    except ValueError as e:  # MemoryRecordsBuilder: "Invalid negative timestamp <ts>" -> -1
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)
    _check_rebuilt_size(stored, tp, config)
    _check_fits_segment(len(stored), tp, config.segment_bytes)
    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    return _appended(
        stored, len(records), append_time if lat_topic else max_ts, lat_topic, append_time, now_ms, state, producers,
        future_count=future, producer_max_timestamp=max((e.timestamp for e in entries), default=NO_TIMESTAMP),
        input_magic=first_magic, rebuilt=True,
    )


# Step 17 and the accepted result, for every path.


def producer_step(
    v2: StoredV2, tp: str, config: TopicConfig, state: PartitionState, now_ms: int, lat_topic: bool, append_time: int
) -> AppendResult:
    """Step 17 (UnifiedLog.analyzeAndValidateProducerState) and the accepted result."""
    max_ts, count, producer_id = v2.max_timestamp, v2.count, v2.producer_id
    producer_epoch, base_sequence, max_timestamp = v2.producer_epoch, v2.base_sequence, v2.producer_max_timestamp
    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    if producer_id >= 0:
        entry = producer_state.find(producers, producer_id, now_ms, config.producer_id_expiration_ms)
        last_seq = producer_state.increment_sequence(base_sequence, v2.last_offset_delta)
        duplicate = entry.find_duplicate(producer_epoch, base_sequence, last_seq) if entry is not None else None
        if duplicate is not None:
            return Accepted(
                records=b"",
                base_offset=duplicate.first_offset,
                last_offset=duplicate.last_offset,
                max_timestamp=duplicate.timestamp,
                log_append_time_ms=duplicate.timestamp,
                append_time_ms=append_time,
                record_count=count,
                state=state,
                clock_held=append_time > now_ms,
                duplicate=True,
                producer_max_timestamp=max_timestamp,
            )
        first_offset = state.log_end_offset
        transactional = bool(v2.stored[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK)
        try:
            producer_state.check_append(entry, producer_id, producer_epoch, base_sequence, first_offset, tp,
                                        transactional)
        except ProducerStateError as e:
            return Rejected(e.error, e.message, log_start_offset=state.log_start_offset)
        producers = producer_state.append_batch(
            producers, entry, producer_id, producer_epoch,
            BatchMetadata(base_sequence, last_seq, first_offset, first_offset + count - 1, max_ts), append_time,
            transactional,
        )
    return _appended(v2.stored, count, max_ts, lat_topic, append_time, now_ms, state, producers,
                    future_count=v2.future_count, producer_max_timestamp=max_timestamp, rebuilt=v2.rebuilt)


def _append_clock(state: PartitionState, now_ms: int) -> int:
    """docs/design.md: what the stage decides: the append time never goes backwards per partition."""
    return now_ms if now_ms >= state.last_append_time_ms else state.last_append_time_ms


def _appended(
    stored: bytes, count: int, max_timestamp: int, lat_topic: bool, append_time: int, now_ms: int,
    state: PartitionState, producers: ProducerTable, *, future_count: int,
    producer_max_timestamp: int, input_magic: int = 2, rebuilt: bool,
) -> Accepted:
    """The accepted result: offsets from the log end offset, the state advanced past the batch."""
    first_offset = state.log_end_offset
    # positional, in Accepted's order (records, base_offset, last_offset, max_timestamp, log_append_time_ms,
    # append_time_ms, record_count, state, clock_held, future_timestamp_count, duplicate,
    # producer_max_timestamp, input_magic, rebuilt): keyword binding cost ~1 µs a batch
    return Accepted(
        stored, first_offset, first_offset + count - 1, max_timestamp, append_time if lat_topic else NO_TIMESTAMP,
        append_time, count, PartitionState(state.log_start_offset, first_offset + count, append_time, producers),
        append_time > now_ms, future_count, False, producer_max_timestamp, input_magic, rebuilt,
    )
