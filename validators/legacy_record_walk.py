"""LogValidator's record walk over a legacy (magic 0/1) message set: each shallow entry's records read (the deep
iterator of a compressed wrapper) and `LogValidator.validateRecord` per record, then `processRecordErrors`, with
Kafka's texts (`AbstractLegacyRecordBatch.toString` around `LegacyRecord.toString`). `log_validator` then
up-converts the entries to one v2 batch (`convertAndAssignOffsetsNonCompressed`)."""

from __future__ import annotations

from validators.append_result import RecordError, Rejected, RejectedBatch, invalid_record
from validators.codec import legacy_records
from validators.codec.compression import CompressionType, CorruptCompressedDataError
from validators.codec.record_batch import NO_TIMESTAMP, CorruptRecordError, TimestampType
from validators.codec.records import InvalidRecordError
from validators.errors import Errors
from validators.record_walks import record_errors
from validators.timestamps import is_future, is_out_of_range, out_of_range_message
from validators.topic_config import TopicConfig


def read_entry(entry_bytes: bytes, tp: str, lso: int) -> legacy_records.LegacyEntry:
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


def check_legacy_records(
    entry: legacy_records.LegacyEntry, lat_topic: bool, tp: str, config: TopicConfig, now_ms: int, lso: int
) -> tuple[int, int]:
    """`LogValidator.validateRecord` for each record of one entry, then `processRecordErrors` (per batch: batchIndex
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
        raise RejectedBatch(record_errors(errors, now_ms, config, lso))
    return max_ts, future


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
