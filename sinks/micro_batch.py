"""The micro-batch's sink: one Spark job per micro-batch, and no Python on the driver while it runs (DESIGN §4, §5, §6).

The stateful stage does the sink's work for each target partition in its own task and Python worker,
right after deciding it (`streaming.stage`, `sinks.partition_task`): append, fsync and commit, then the
responses and dead letters, then metric deltas. What it emits is one `TaskSummary` row per target
partition. The query writes these rows to Spark's `noop` sink, whose job runs the stage and writes
nothing, and gathers them with `Dataset.observe` into the micro-batch's observed metrics, which travel
back with the tasks' results. So no Python on the driver runs while the micro-batch does: a
`foreachBatch` is a py4j call into the driver's Python for every micro-batch, where it queues for the GIL
beside the front door. The observers (metrics, status) get the merged `MicroBatchSummary` from the query's
progress event, on the listener bus, once the micro-batch is committed (`streaming.query` wires the listener).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sinks.partition_task import SinkConfig, TaskSummary

log = logging.getLogger("gateway.sink")

TASK_SUMMARY_SCHEMA = StructType([StructField("summary", StringType(), False)])
# The observed metric that carries the micro-batch's TaskSummary rows to the driver, and its one field.
SUMMARIES_METRIC = "gateway_task_summaries"
SUMMARIES_FIELD = "summaries"
# Spark's built-in sink that runs the plan and writes nothing (`NoopTable`).
NOOP_SINK = "noop"


@dataclass(frozen=True)
class MicroBatchSummary:
    batch_id: int
    appended_batches: int
    appended_bytes: int
    replayed_partitions: int
    responses: int
    dead_letters: int
    sink_seconds: float = 0.0  # the whole Spark job: stage, append, publish (Spark's `addBatch`)
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


# Called on the driver after a micro-batch is committed, with its summary (metric deltas included), on
# the listener bus's thread: observers never touch the decisions DataFrame, so they start no Spark job.
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
    """The query's sink: `observe` shapes the stage's summaries into the written stream; `on_progress` and
    `on_terminated` take the query's listener events and hand each micro-batch's summary to the observers."""

    def __init__(self, config: SinkConfig, observers: Sequence[MicroBatchObserver] = ()) -> None:
        self.config = config  # for the stage's sink work (`streaming.stage.apply_stage`)
        self.observers = list(observers)
        self.last_summary: MicroBatchSummary | None = None
        self.retention: Any = None  # the query's retention schedule (streaming.query sets it; tests wait on it)
        self._terminated = threading.Event()

    @staticmethod
    def observe(summaries: DataFrame) -> DataFrame:
        """The stage's summaries with their rows gathered as the micro-batch's observed metric."""
        return summaries.observe(SUMMARIES_METRIC, F.collect_list("summary").alias(SUMMARIES_FIELD))

    def on_progress(self, progress: Mapping[str, Any]) -> None:
        """A progress report of this sink's query: merge the micro-batch's summaries, call the observers.
        A report without them (no data, or a micro-batch with no rows) calls nothing."""
        observed = (progress.get("observedMetrics") or {}).get(SUMMARIES_METRIC)
        if not observed or not observed.get(SUMMARIES_FIELD):
            return
        batch_id = int(progress["batchId"])
        sink_seconds = (progress.get("durationMs") or {}).get("addBatch", 0) / 1000
        self.last_summary = s = MicroBatchSummary.merge(
            batch_id, [TaskSummary.from_json(text) for text in observed[SUMMARIES_FIELD]], sink_seconds)
        log.debug("micro-batch %s: %d appended (%d bytes), %d responses, %d dead letters, %d replayed partitions, "
                  "%.3f s (append %.3f s, publish %.3f s over %d partitions)", batch_id, s.appended_batches,
                  s.appended_bytes, s.responses, s.dead_letters, s.replayed_partitions, s.sink_seconds,
                  s.append_seconds, s.publish_seconds, s.partitions)
        for observe in self.observers:
            observe(batch_id, s)

    def on_terminated(self) -> None:
        """The query terminated and its listener is gone; its last progress report was handled before (one
        listener bus, in order)."""
        self._terminated.set()

    def wait_terminated(self, timeout_s: float) -> bool:
        """Block until the termination reached this sink, so every progress report before it has too."""
        return self._terminated.wait(timeout_s)

