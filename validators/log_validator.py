"""The append decision: Kafka's `LogValidator` + the leader checks around it, as one pure function
of (batch bytes, topic config, partition state, clock) — reference §1.1 steps 4-17, DESIGN §4.2.

Nothing here reads a clock or does I/O: `now_ms` is the micro-batch clock passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from validators import record_batch as rb
from validators.errors import Errors
from validators.record_batch import TimestampType
from validators.topic_config import TopicConfig, topic_name_error

# The gateway is the only leader of its partitions and never changes epoch.
GATEWAY_LEADER_EPOCH = 0


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a partition leader remembers between appends."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    last_append_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class RecordError:
    batch_index: int
    message: str


@dataclass(frozen=True, slots=True)
class Accepted:
    records: bytes  # the batch as stored
    base_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int  # what the produce response carries: -1 for CreateTime topics
    append_time_ms: int  # the gateway's monotonic append time, kept for every topic
    record_count: int
    state: PartitionState
    clock_held: bool = False  # append time was clamped to the last one (clock behind)


@dataclass(frozen=True, slots=True)
class Rejected:
    error: Errors
    message: str
    record_errors: tuple[RecordError, ...] = ()
    log_start_offset: int = -1


AppendResult = Accepted | Rejected


def _tp(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def validate_and_assign(
    batch: bytes,
    topic: str,
    partition: int | None,
    config: TopicConfig | None,
    state: PartitionState,
    now_ms: int,
) -> AppendResult:
    name_error = topic_name_error(topic)
    if name_error is not None:
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, name_error)
    if config is None or partition is None or not 0 <= partition < config.partitions:
        return Rejected(Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION.default_message or "")
    tp = _tp(topic, partition)
    if len(batch) < rb.RECORD_BATCH_OVERHEAD:
        return Rejected(Errors.CORRUPT_MESSAGE, f"Record batch is corrupt (the size {len(batch)} is smaller than the minimum allowed overhead 61)")
    header = rb.parse_header(batch)
    if header.magic != 2:
        return Rejected(Errors.INVALID_RECORD, "Produce requests with version 13 are only allowed to contain record batches with magic version 2")
    if header.base_offset != 0:
        return Rejected(
            Errors.INVALID_RECORD,
            f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {header.base_offset}",
            log_start_offset=state.log_start_offset,
        )
    if header.size_in_bytes > config.max_message_bytes:
        return Rejected(
            Errors.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {tp} is {header.size_in_bytes} bytes which exceeds the "
            f"maximum configured value of {config.max_message_bytes}).",
        )
    if header.size_in_bytes != len(batch) or not rb.is_valid(batch):
        return Rejected(Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {header.crc}) in topic partition {tp}.")
    if header.compression_id != 0:
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, "compressed batches are not supported yet")
    count = header.records_count
    if header.last_offset_delta + 1 <= 0 or count <= 0 or header.last_offset_delta + 1 != count:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records {count} "
            f"in topic partition {tp}",
            log_start_offset=state.log_start_offset,
        )
    # DESIGN §4.2: append time never goes backwards for a partition (deliberate difference from Kafka).
    append_time = max(now_ms, state.last_append_time_ms)
    base_offset = state.log_end_offset
    if config.message_timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_ts, response_lat = append_time, append_time
    else:
        max_ts, response_lat = header.max_timestamp, -1
    stored = rb.assign_offsets_and_timestamp(
        batch, base_offset, config.message_timestamp_type, max_ts, GATEWAY_LEADER_EPOCH
    )
    new_state = replace(state, log_end_offset=base_offset + count, last_append_time_ms=append_time)
    return Accepted(
        records=stored,
        base_offset=base_offset,
        last_offset=base_offset + count - 1,
        max_timestamp=max_ts,
        log_append_time_ms=response_lat,
        append_time_ms=append_time,
        record_count=count,
        state=new_state,
        clock_held=append_time > now_ms,
    )
