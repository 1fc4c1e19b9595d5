"""The decision for a legacy (magic 0/1) message set: validated as Kafka's legacy path does and up-converted
to a v2 batch (docs/design.md: ingress topic, a deliberate difference: Kafka 4.x rejects magic < 2 at the request level).
"""

from __future__ import annotations

from validators import producer_state
from validators.append_checks import analyze_entry, append_clock, appended, check_fits_segment
from validators.append_result import (
    GATEWAY_LEADER_EPOCH,
    AppendResult,
    PartitionState,
    RecordError,
    Rejected,
    RejectedBatch,
    invalid_record,
)
from validators.codec import legacy_records
from validators.codec import record_batch as rb
from validators.codec.compression import CompressionType, CorruptCompressedDataError
from validators.codec.record_batch import NO_TIMESTAMP, CorruptRecordError, TimestampType
from validators.codec.records import InvalidRecordError
from validators.errors import Errors
from validators.rebuild import _check_rebuilt_size
from validators.record_walks import _record_errors
from validators.timestamps import is_future, is_out_of_range, out_of_range_message
from validators.topic_config import TopicConfig


def _legacy_record_string(r: legacy_records.LegacyRecord) -> str:
    """`AbstractLegacyRecordBatch.toString` around `LegacyRecord.toString`."""
    key = 0 if r.key is None else len(r.key)
    value = 0 if r.value is None else len(r.value)
    codec = CompressionType.for_id(r.attributes & 0x07).kafka_name if r.attributes & 0x07 <= 4 else "unknown"
    if r.magic > 0:
        inner = (f"Record(magic={r.magic}, attributes={r.attributes}, compression={codec}, crc={r.crc}, "
                 f"{r.timestamp_type.kafka_name}={r.timestamp}, key={key} bytes, value={value} bytes)")
    else:
        inner = (f"Record(magic={r.magic}, attributes={r.attributes}, compression={codec}, crc={r.crc}, "
                 f"key={key} bytes, value={value} bytes)")
    return f"LegacyRecordBatch(offset={r.offset}, {inner})"


def _decide_legacy(data: bytes, tp: str, config: TopicConfig, state: PartitionState, now_ms: int) -> AppendResult:
    lso = state.log_start_offset
    try:
        shallow = list(rb.iter_batches(data))
    except CorruptRecordError as e:
        return Rejected(Errors.CORRUPT_MESSAGE, e.message)
    source = CompressionType.NONE
    for entry_bytes in shallow:  # §1.1 step 11 over every shallow entry, before LogValidator
        codec_id = analyze_entry(entry_bytes, len(entry_bytes), entry_bytes[16], tp, config.max_message_bytes, lso)
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
        entry = _read_entry(entry_bytes, tp, lso)
        entries.append(entry)
        entry_max, entry_future = _check_legacy_records(entry, lat_topic, tp, config, now_ms, lso)
        max_ts = max(max_ts, entry_max)
        future += entry_future

    # Path C (convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets): one v2 batch
    append_time = append_clock(state, now_ms)
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
    check_fits_segment(len(stored), tp, config.segment_bytes)
    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    return appended(
        stored, len(records), append_time if lat_topic else max_ts, lat_topic, append_time, now_ms, state, producers,
        future_count=future, producer_max_timestamp=max((e.timestamp for e in entries), default=NO_TIMESTAMP),
        input_magic=first_magic, rebuilt=True,
    )


def _read_entry(entry_bytes: bytes, tp: str, lso: int) -> legacy_records.LegacyEntry:
    """One shallow entry's records (the deep iterator of a compressed wrapper); Kafka's error if unreadable."""
    try:
        (entry,) = legacy_records.read_message_set(entry_bytes, verify_crc=False)
    except CorruptRecordError as e:
        raise RejectedBatch(Rejected(Errors.CORRUPT_MESSAGE, e.message)) from None
    except InvalidRecordError as e:
        raise RejectedBatch(invalid_record(e.message, lso)) from None
    except CorruptCompressedDataError as e:
        raise RejectedBatch(Rejected(
            Errors.CORRUPT_MESSAGE, f"Failed to decompress record stream in topic partition {tp}: {e.message}"
        )) from None
    except ValueError as e:
        raise RejectedBatch(Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)) from None
    return entry


def _check_legacy_records(
    entry: legacy_records.LegacyEntry, lat_topic: bool, tp: str, config: TopicConfig, now_ms: int, lso: int
) -> tuple[int, int]:
    """§1.2 `validateRecord` for each record of one entry, then `processRecordErrors` (per batch: batchIndex
    restarts at 0). Returns the entry's max timestamp and KIP-937 future count."""
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    compressed = entry.compression is not CompressionType.NONE
    errors: list[tuple[Errors, RecordError]] = []
    max_ts = NO_TIMESTAMP
    future = 0
    # (validateRecordCompression never fires: the deep iterator already threw "Inner messages must not
    # be compressed", which read_message_set raises as InvalidRecordError)
    for i, r in enumerate(entry.records):
        message: str | None = None
        code = Errors.INVALID_RECORD
        ts = r.timestamp
        if r.magic != entry.magic:  # record.hasMagic(batch.magic())
            message = (f"Record {_legacy_record_string(r)}'s magic does not match outer magic {entry.magic} in topic "
                       f"partition {tp}")
        elif compressed and not r.is_valid:  # inner CRC of a compressed legacy batch: CorruptRecordException
            raise RejectedBatch(Rejected(
                Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {r.crc}, computed crc = {r.computed_crc})"
            ))
        elif config.compacted and r.key is None:
            message = f"Compacted topic cannot accept message without key in topic partition {tp}"
        elif not lat_topic and ts != NO_TIMESTAMP:
            if is_out_of_range(ts, now_ms, before, after):
                code, message = Errors.INVALID_TIMESTAMP, out_of_range_message(ts, r.offset, now_ms, before, after)
        elif entry.timestamp_type == TimestampType.LOG_APPEND_TIME:
            code = Errors.INVALID_TIMESTAMP
            message = (f"Invalid timestamp type in message {_legacy_record_string(r)}. Producer should not set "
                       "timestamp type to LogAppendTime.")
        if message is not None:
            errors.append((code, RecordError(i, message)))
            continue
        if ts > max_ts:
            max_ts = ts
        if not lat_topic and is_future(ts, now_ms):
            future += 1
    if errors:
        raise RejectedBatch(_record_errors(errors, now_ms, config, lso))
    return max_ts, future
