"""The leader's checks around `LogValidator`, shared by the v2 and the legacy decision: Kafka's
`UnifiedLog.analyzeAndValidateRecords` per shallow entry (Kafka's produce path (`UnifiedLog.append`) step 11), the segment size
check (step 15), the gateway's monotonic append clock (docs/design.md: what the stage decides) and the accepted result.

Each check raises `RejectedBatch` carrying Kafka's error and exception text."""

from __future__ import annotations

import struct
import zlib

from crc32c import crc32c

from validators.append_result import Accepted, PartitionState, Rejected, RejectedBatch, invalid_record
from validators.codec.record_batch import LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD
from validators.errors import Errors
from validators.producer_state import ProducerTable

_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_CRC_AT = 17  # v2: DefaultRecordBatch.CRC_OFFSET; the CRC-32C covers attributes..end
_ATTRIBUTES_AT = 21 + 1  # v2 attributes (int16): low byte
_LEGACY_CRC_AT = LOG_OVERHEAD  # LegacyRecord: crc, then magic, attributes
_MAX_CODEC_ID = 4  # CompressionType.forId: 0-4 known


def analyze_entry(entry: bytes, size: int, magic: int, tp: str, max_message_bytes: int, lso: int) -> int:
    """§1.1 step 11 b-e for one shallow entry of `size` bytes at the start of `entry`; returns its codec id."""
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
        codec_id = entry[_ATTRIBUTES_AT] & 0x07
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


def check_fits_segment(size: int, tp: str, segment_bytes: int) -> None:
    """§1.1 step 15: the batch as it will be stored must fit in one segment."""
    if size > segment_bytes:
        raise RejectedBatch(Rejected(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {segment_bytes}.",
        ))


def append_clock(state: PartitionState, now_ms: int) -> int:
    """docs/design.md: what the stage decides: the append time never goes backwards per partition."""
    return now_ms if now_ms >= state.last_append_time_ms else state.last_append_time_ms


def appended(
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
