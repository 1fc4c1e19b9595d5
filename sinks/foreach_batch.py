"""The `foreachBatch` sink: one Spark job per micro-batch (DESIGN §4, §5, §6).

The stateful stage does the sink's work for each target partition in its own task and Python worker,
right after deciding it (`streaming.stage`, `sinks.partition_task`): append, fsync and commit, then the
responses and dead letters, then metric deltas. What it emits is one `TaskSummary` row per target
partition; `foreachBatch` runs the micro-batch's one job by collecting them, and the observers (metrics,
status) read the merged `MicroBatchSummary` on the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from sinks.partition_task import SinkConfig, TaskSummary

log = logging.getLogger("gateway.sink")

TASK_SUMMARY_SCHEMA = StructType([StructField("summary", StringType(), False)])


@dataclass(frozen=True)
class MicroBatchSummary:
    batch_id: int
    appended_batches: int
    appended_bytes: int
    replayed_partitions: int
    responses: int
    dead_letters: int
    sink_seconds: float = 0.0  # the whole Spark job: stage, append, publish
    append_seconds: float = 0.0  # summed over target partitions (in parallel when in several tasks)
    publish_seconds: float = 0.0  # summed over target partitions
    partitions: int = 0  # target partitions decided (one summary each)
    metric_rows: list[dict[str, Any]] = field(default_factory=list)  # for sinks.metrics.merge_aggregates

    @staticmethod
    def merge(batch_id: int, summaries: Sequence[TaskSummary], sink_seconds: float) -> MicroBatchSummary:
        return MicroBatchSummary(
            batch_id=batch_id,
            appended_batches=sum(t.appended_batches for t in summaries),
            appended_bytes=sum(t.appended_bytes for t in summaries),
            replayed_partitions=sum(t.replayed_partitions for t in summaries),
            responses=sum(t.responses for t in summaries),
            dead_letters=sum(t.dead_letters for t in summaries),
            sink_seconds=sink_seconds,
            append_seconds=sum(t.append_seconds for t in summaries),
            publish_seconds=sum(t.publish_seconds for t in summaries),
            partitions=len(summaries),
            metric_rows=[row for t in summaries for row in t.metric_rows],
        )


# Called on the driver after a micro-batch is durable and published, with its summary (metric
# deltas included): observers never touch the decisions DataFrame, so they start no Spark job.
MicroBatchObserver = Callable[[int, MicroBatchSummary], None]


# MicroBatchExecution.BATCH_ID_KEY: the local property Spark sets on every job of a micro-batch, replays included
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def micro_batch_id() -> int:
    """In a task of the streaming query: the id of the micro-batch it belongs to (the sink's exactly-once key)."""
    context = TaskContext.get()
    value = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
    if value is None:
        raise RuntimeError(f"not in a task of a streaming micro-batch (no local property {BATCH_ID_PROPERTY})")
    return int(value)


class GatewaySink:
    def __init__(self, config: SinkConfig, observers: Sequence[MicroBatchObserver] = ()) -> None:
        self.config = config  # for the stage's sink work (`streaming.stage.apply_stage`)
        self.observers = list(observers)
        self.last_summary: MicroBatchSummary | None = None
        self.retention: Any = None  # the query's retention schedule (streaming.query sets it; tests wait on it)

    def __call__(self, summaries: DataFrame, batch_id: int) -> None:
        """`foreachBatch` over the stage's summaries: runs the micro-batch's one job and merges them."""
        started = time.perf_counter()
        # the stage's exactly-once key is this batch id, whichever thread runs the job (Spark sets it on its own)
        summaries.sparkSession.sparkContext.setLocalProperty(BATCH_ID_PROPERTY, str(batch_id))
        rows = summaries.collect()
        self.last_summary = MicroBatchSummary.merge(
            batch_id, [TaskSummary.from_json(r.summary) for r in rows], time.perf_counter() - started
        )
        s = self.last_summary
        log.debug("micro-batch %s: %d appended (%d bytes), %d responses, %d dead letters, %d replayed partitions, "
                 "%.3f s (append %.3f s, publish %.3f s over %d partitions)", batch_id, s.appended_batches,
                 s.appended_bytes, s.responses, s.dead_letters, s.replayed_partitions, s.sink_seconds,
                 s.append_seconds, s.publish_seconds, s.partitions)
        for observe in self.observers:
            observe(batch_id, s)
