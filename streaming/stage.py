"""The stateful stage: one group per target (topic, partition), the gateway as partition leader.

`applyInPandasWithState` (PySpark's mapGroupsWithState) calls `run_group` with every ingress batch
of one target partition in a micro-batch. The group's batches are sorted by (ingress partition,
ingress offset) — Spark gives no order after the shuffle — and decided one by one by the pure
`validators.log_validator.validate_and_assign`, threading the partition state through.
The clock is `GroupState.getCurrentProcessingTimeMs()`: the micro-batch timestamp, recorded in the
offset log, so a replayed micro-batch decides the same offsets, append times and bytes.

A group's decisions leave in chunks of `OUTPUT_CHUNK_ROWS` as they are made, so the sink's task (the
same Spark task, another Python worker) appends the first ones while the stage decides the rest:
PySpark's serializer holds a group's output until it exceeds `spark.sql.execution.arrow.maxRecordsPerBatch`
rows, and a group emitted whole reached the sink only after the next group was decided.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from contract.decision_row import DECISION_FIELDS, ColumnKind, DecisionRow, decision_columns
from contract.ingress import HEADER_PARTITION, HEADER_TOPIC
from contract.record_errors import bound_record_errors
from sinks.batch_spool import spool_batches
from sinks.registry_watcher import RegistryWatcher
from streaming.logs import ThrottledWarning, configure_logging
from streaming.session import ARROW_MAX_RECORDS_PER_BATCH
from validators.append_result import Accepted, AppendResult, PartitionState, Rejected
from validators.errors import Errors
from validators.log_validator import validate_and_assign
from validators.producer_state import producers_from_json, producers_to_json
from validators.timestamps import FUTURE_TIMESTAMP_WARN_MS
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.stage")
# KIP-937: Kafka warns about accepted records far ahead of its clock. Per batch, a producer with a
# wrong clock would flood the log: one line per partition, then a summary per minute (the metric
# gateway_future_timestamps_total counts every record).
future_timestamps = ThrottledWarning(
    logging.getLogger("gateway.future_timestamps"), f"with a timestamp more than {FUTURE_TIMESTAMP_WARN_MS} ms ahead"
)

STATE_SCHEMA = StructType(
    [
        StructField("log_start_offset", LongType(), False),
        StructField("log_end_offset", LongType(), False),
        StructField("last_append_time_ms", LongType(), False),
        StructField("producers", StringType(), False),  # idempotent producer state, JSON (producer_state.py)
    ]
)

# One row per ingress message: the decision, plus what the sinks need.
_SPARK_TYPES: dict[ColumnKind, DataType] = {
    ColumnKind.INT32: IntegerType(), ColumnKind.INT64: LongType(), ColumnKind.STRING: StringType(),
    ColumnKind.BOOLEAN: BooleanType(), ColumnKind.BINARY: BinaryType(),
}
OUTPUT_SCHEMA = StructType([StructField(c.name, _SPARK_TYPES[c.kind], c.nullable) for c in decision_columns()])
# One row more than an Arrow batch: PySpark's `ApplyInPandasWithStateSerializer` writes its pending output
# once it holds more rows than that, so each chunk is written as soon as it is yielded.
OUTPUT_CHUNK_ROWS = ARROW_MAX_RECORDS_PER_BATCH + 1


@dataclass(frozen=True)
class IngressBatch:
    ingress_partition: int
    ingress_offset: int
    ingress_timestamp_ms: int
    batch: bytes
    request_id: str
    client_id: str | None
    acks: int
    partition_header: str | None
    replay_of: str | None = None


def decide(
    topic: str | None, partition: int | None, item: IngressBatch, registry: TopicRegistry,
    state: PartitionState, now_ms: int,
) -> AppendResult:
    """Header problems first (the gateway's own contract, DESIGN §4.1), then Kafka's decision.
    Any unexpected exception becomes UNKNOWN_SERVER_ERROR for this batch only: bad input must
    never stop the query."""
    if topic is None:
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, f"Missing required header {HEADER_TOPIC} (the target topic)")
    if partition is None:
        return Rejected(
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            f"Missing or malformed header {HEADER_PARTITION}: {item.partition_header!r} is not a decimal partition number",
        )
    try:
        return validate_and_assign(item.batch, topic, partition, registry.get(topic), state, now_ms)
    except Exception as e:  # noqa: BLE001 — isolate one hostile batch from the query
        log.exception("validator failed on %s-%s request %s", topic, partition, item.request_id)
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")


def decide_group(
    topic: str | None, partition: int | None, items: list[IngressBatch], registry: TopicRegistry,
    state: PartitionState, now_ms: int,
) -> tuple[list[DecisionRow], PartitionState]:
    """Decide a target partition's batches of one micro-batch in ingress order."""
    rows = []
    for item in sorted(items, key=ingress_position):
        result = decide(topic, partition, item, registry, state, now_ms)
        if isinstance(result, Accepted):
            state = result.state
            if result.future_timestamp_count:
                future_timestamps.warn(
                    f"{topic}-{partition}", result.future_timestamp_count,
                    f"{topic}-{partition}: accepted {result.future_timestamp_count} record(s) with a timestamp more "
                    f"than {FUTURE_TIMESTAMP_WARN_MS} ms ahead of the broker time {now_ms} (max timestamp "
                    f"{result.producer_max_timestamp}), KIP-937",
                )
        rows.append(_output_row(topic, partition, item, result, state, now_ms))
    return rows, state


def ingress_position(item: IngressBatch) -> tuple[int, int]:
    """The order of a partition's batches: Spark gives none after the shuffle (DESIGN §4.1, §5)."""
    return item.ingress_partition, item.ingress_offset


def _output_row(
    topic: str | None, partition: int | None, item: IngressBatch, result: AppendResult,
    state: PartitionState, now_ms: int,
) -> DecisionRow:
    head = (item.ingress_partition, item.ingress_offset, item.ingress_timestamp_ms, item.request_id, item.client_id,
            item.acks, topic, partition, item.partition_header, item.replay_of)
    if isinstance(result, Accepted):
        return DecisionRow(
            *head, error_code=0, error_name=None, error_message=None, record_errors="[]", record_error_count=0,
            base_offset=result.base_offset, last_offset=result.last_offset,
            log_append_time_ms=result.log_append_time_ms, append_time_ms=result.append_time_ms,
            max_timestamp=result.max_timestamp, producer_max_timestamp=result.producer_max_timestamp,
            log_start_offset=state.log_start_offset, record_count=result.record_count, clock_held=result.clock_held,
            duplicate=result.duplicate, future_timestamps=result.future_timestamp_count, window=None,
            batch_time_ms=now_ms, batch=result.records,
        )
    # bounded here, where they become a column: a batch of millions of bad records must not make a decision
    # row, a response or a dead letter larger than Arrow, the response topic or the dead-letter topic take
    errors = bound_record_errors(((e.batch_index, e.message) for e in result.record_errors), len(result.record_errors))
    return DecisionRow(
        *head, error_code=result.error.code, error_name=result.error.name,
        error_message=errors.error_message(result.message), record_errors=errors.json, record_error_count=errors.total,
        base_offset=-1, last_offset=-1, log_append_time_ms=-1, append_time_ms=-1, max_timestamp=-1,
        producer_max_timestamp=-1, log_start_offset=result.log_start_offset, record_count=0, clock_held=False,
        duplicate=False, future_timestamps=0,
        window=None if result.window is None else f"[{result.window[0]}, {result.window[1]}]",
        batch_time_ms=now_ms, batch=item.batch,
    )


def _ingress_batches(frame: pd.DataFrame) -> Iterator[IngressBatch]:
    """The frame's rows, read column by column (`tolist`: plain Python values, far cheaper than
    `itertuples` with a null check per cell)."""
    columns = [
        frame[name].tolist()
        for name in ("ingress_partition", "ingress_offset", "ingress_timestamp_ms", "batch", "request_id",
                     "client_id", "acks", "partition_header", "replay_of")
    ]
    for ingress_partition, ingress_offset, ts, batch, request_id, client_id, acks, header, replay_of in zip(
        *columns, strict=True
    ):
        yield IngressBatch(
            ingress_partition=int(ingress_partition), ingress_offset=int(ingress_offset),
            ingress_timestamp_ms=int(ts), batch=bytes(batch), request_id=str(request_id),
            client_id=_opt_str(client_id), acks=int(acks), partition_header=_opt_str(header),
            replay_of=_opt_str(replay_of),
        )


def _opt_str(value: Any) -> str | None:
    """None for Arrow nulls as pandas hands them over (None, NaN or pd.NA)."""
    return None if value is None or value is pd.NA or value != value else str(value)


def _state_from_spark(state: GroupState) -> PartitionState:
    if not state.exists:
        return PartitionState()
    log_start, log_end, last_append, producers = state.get
    return PartitionState(
        log_start_offset=log_start, log_end_offset=log_end, last_append_time_ms=last_append,
        producers=producers_from_json(producers),
    )


def _state_to_spark(state: PartitionState) -> tuple[int, int, int, str]:
    return (state.log_start_offset, state.log_end_offset, state.last_append_time_ms, producers_to_json(state.producers))


def stage_frame(rows: list[DecisionRow], tag: str) -> pd.DataFrame:
    """What the stage emits for a group: its decision rows, their bytes in a spool file for the sink's task
    (`sinks.batch_spool`: the same task copies them from there, so they do not cross Spark again)."""
    frame = pd.DataFrame(rows, columns=DECISION_FIELDS)
    if rows:
        spooled = spool_batches(frame["batch"].tolist(), tag)
        frame["batch"] = None
        frame["spool"] = spooled.path
        frame["spool_offset"] = spooled.offsets
        frame["spool_length"] = spooled.lengths
    return frame


def stage_function(
    registry: RegistryWatcher,
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    def run_group(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        configure_logging()  # a Python worker starts with logging unconfigured
        topic, partition = key
        partition = None if partition is None or pd.isna(partition) else int(partition)
        items = sorted((item for frame in frames for item in _ingress_batches(frame)), key=ingress_position)
        now_ms = state.getCurrentProcessingTimeMs()
        old_state = new_state = _state_from_spark(state)
        # The registry file is re-read when it changed: a reload applies from the next group decided
        # (in practice the next micro-batch); a bad reload keeps the previous registry.
        current = registry.current()
        for start in range(0, len(items), OUTPUT_CHUNK_ROWS):
            rows, new_state = decide_group(
                topic, partition, items[start : start + OUTPUT_CHUNK_ROWS], current, new_state, now_ms
            )
            yield stage_frame(rows, f"{topic}-{partition}")
        # Only partitions that appended get a state row: hostile topic names must not grow the state.
        # (Spark reads the state once the function's frames are exhausted.)
        if new_state != old_state:
            state.update(_state_to_spark(new_state))

    return run_group


def apply_stage(ingress: DataFrame, registry: RegistryWatcher) -> DataFrame:
    return ingress.groupBy("topic", "partition").applyInPandasWithState(
        stage_function(registry), OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
