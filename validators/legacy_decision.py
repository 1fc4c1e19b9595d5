"""The decision for a legacy (magic 0/1) message set: validated as Kafka's legacy path does and up-converted
to a v2 batch (DESIGN §4.1, a deliberate difference: Kafka 4.x rejects magic < 2 at the request level).
"""

from __future__ import annotations

import struct
import zlib

from crc32c import crc32c

from validators import legacy_records, producer_state
from validators import record_batch as rb
from validators.append_result import (
    GATEWAY_LEADER_EPOCH,
    Accepted,
    AppendResult,
    PartitionState,
    RecordError,
    Rejected,
    RejectedBatch,
    invalid_record,
)
from validators.compression import CompressionType, CorruptCompressedDataError
from validators.errors import Errors
from validators.rebuild import _check_rebuilt_size
from validators.record_batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, CorruptRecordError, TimestampType
from validators.record_walks import _record_errors
from validators.records import InvalidRecordError
from validators.timestamps import (
    FUTURE_TIMESTAMP_WARN_MS,
    NO_TIMESTAMP,
    is_out_of_range,
    out_of_range_message,
)
from validators.topic_config import TopicConfig

_CRC_AT_17 = struct.Struct(">I")


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
    # §1.1 step 11 over every shallow entry, before LogValidator
    source = CompressionType.NONE
    for entry in shallow:
        magic = entry[16]
        if magic == 2 and struct.unpack_from(">q", entry, 0)[0] != 0:  # 11b (magic >= 2 only)
            base_offset = struct.unpack_from(">q", entry, 0)[0]
            return invalid_record(
                f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {base_offset}", lso
            )
        if len(entry) > config.max_message_bytes:  # 11c
            return Rejected(
                Errors.MESSAGE_TOO_LARGE,
                f"The record batch size in the append to {tp} is {len(entry)} bytes which exceeds the maximum "
                f"configured value of {config.max_message_bytes}).",
            )
        if magic == 2:
            stored = _CRC_AT_17.unpack_from(entry, 17)[0]
            valid = len(entry) >= RECORD_BATCH_OVERHEAD and stored == crc32c(memoryview(entry)[21:])
            codec_id = entry[22] & 0x07
        else:  # LegacyRecord.isValid: CRC32 over magic..end of the outer message
            stored = struct.unpack_from(">I", entry, LOG_OVERHEAD)[0]
            valid = zlib.crc32(memoryview(entry)[LOG_OVERHEAD + 4 :]) & 0xFFFFFFFF == stored
            codec_id = entry[LOG_OVERHEAD + 5] & 0x07
        if not valid:  # 11d
            return Rejected(Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {stored}) in topic partition {tp}.")
        if codec_id > 4:  # 11e
            return Rejected(Errors.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec_id}", log_start_offset=lso)
        if codec_id:
            source = CompressionType(codec_id)

    # LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches
    if source is not CompressionType.NONE and len(shallow) > 1:
        return invalid_record("Compressed outer record has more than one batch", lso)
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
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
        try:
            (entry,) = legacy_records.read_message_set(entry_bytes, verify_crc=False)
        except CorruptRecordError as e:
            return Rejected(Errors.CORRUPT_MESSAGE, e.message)
        except InvalidRecordError as e:
            return invalid_record(e.message, lso)
        except CorruptCompressedDataError as e:
            return Rejected(Errors.CORRUPT_MESSAGE, f"Failed to decompress record stream in topic partition {tp}: {e.message}")
        except ValueError as e:
            return Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)
        entries.append(entry)
        compressed = entry.compression is not CompressionType.NONE
        # per batch: batchIndex restarts at 0 and processRecordErrors runs after each batch (§1.2)
        errors: list[tuple[Errors, RecordError]] = []
        # (validateRecordCompression never fires: the deep iterator already threw "Inner messages must not
        # be compressed", which read_message_set raises as InvalidRecordError above)
        for i, r in enumerate(entry.records):
            if r.magic != entry.magic:  # record.hasMagic(batch.magic())
                errors.append((Errors.INVALID_RECORD, RecordError(
                    i, f"Record {_legacy_record_string(r)}'s magic does not match outer magic {entry.magic} in topic "
                       f"partition {tp}")))
                continue
            if compressed and not r.is_valid:  # inner CRC of a compressed legacy batch: CorruptRecordException
                return Rejected(
                    Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {r.crc}, computed crc = {r.computed_crc})"
                )
            if config.compacted and r.key is None:
                errors.append((Errors.INVALID_RECORD, RecordError(
                    i, f"Compacted topic cannot accept message without key in topic partition {tp}")))
                continue
            ts = r.timestamp
            if not lat_topic and ts != NO_TIMESTAMP:
                if is_out_of_range(ts, now_ms, before, after):
                    errors.append((Errors.INVALID_TIMESTAMP,
                                   RecordError(i, out_of_range_message(ts, r.offset, now_ms, before, after))))
                    continue
            elif entry.timestamp_type == TimestampType.LOG_APPEND_TIME:
                errors.append((Errors.INVALID_TIMESTAMP, RecordError(
                    i, f"Invalid timestamp type in message {_legacy_record_string(r)}. Producer should not set "
                       "timestamp type to LogAppendTime.")))
                continue
            if ts > max_ts:
                max_ts = ts
            if not lat_topic and ts - now_ms > FUTURE_TIMESTAMP_WARN_MS:
                future += 1
        if errors:
            return _record_errors(errors, now_ms, config, lso)

    # Path C (convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets): one v2 batch
    append_time = now_ms if now_ms >= state.last_append_time_ms else state.last_append_time_ms
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
        _check_rebuilt_size(stored, tp, config)
    except ValueError as e:  # MemoryRecordsBuilder: "Invalid negative timestamp <ts>" -> -1
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)
    except RejectedBatch as r:
        return r.result
    if len(stored) > config.segment_bytes:  # step 15
        return Rejected(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {len(stored)} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {config.segment_bytes}.",
        )
    count = len(records)
    first_offset = state.log_end_offset
    if lat_topic:
        max_ts = append_time
    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    return Accepted(
        records=stored,
        base_offset=first_offset,
        last_offset=first_offset + count - 1,
        max_timestamp=max_ts,
        log_append_time_ms=append_time if lat_topic else NO_TIMESTAMP,
        append_time_ms=append_time,
        record_count=count,
        state=PartitionState(state.log_start_offset, first_offset + count, append_time, producers),
        clock_held=append_time > now_ms,
        future_timestamp_count=future,
        producer_max_timestamp=max((e.timestamp for e in entries), default=NO_TIMESTAMP),
        input_magic=first_magic,
        rebuilt=True,
    )
