"""The query's sink: `writeStream.foreachBatch`, keyed by the `batch_id` foreachBatch gives (docs/design.md).

For each micro-batch, `GatewaySink.write` runs one Spark job over the stage's decisions: a `mapInArrow` in
the decisions DataFrame's own partitions (the stateful operator's, already by target partition), whose
tasks append, commit, publish and count their target partitions' decisions (`sinks.partition_task.run_task`)
and hand back one small `TaskSummary` each; no batch byte reaches the driver. The batch id is the sink's
exactly-once key: a replayed micro-batch (same id, same decisions, since the stage is deterministic) is
skipped where it was committed and its responses are published again, identical (Spark's documented way to
make foreachBatch idempotent). The observers (metrics, status) get the merged `MicroBatchSummary` from the
query's progress event, on the listener bus, once Spark has committed the micro-batch (`streaming.query`
wires the listener).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from contract.decision_row import DecisionRow
from kafka_cluster.publisher import producer
from sinks.arrow_map import ArrowFunction, ArrowMap
from sinks.decisions import arrow_decision_chunks
from sinks.partition_task import SinkConfig, TaskSummary, run_task
from sinks.registry_watcher import RegistryWatcher

log = logging.getLogger("gateway.sink")

TASK_SUMMARY_SCHEMA = StructType([StructField("summary", StringType(), False)])
# The micro-batch's id, a literal column beside the decisions: the sink's function is then the same at every
# micro-batch, bound into Spark once (`sinks.arrow_map`).
BATCH_ID_COLUMN = "sink_batch_id"
NO_ROWS = -1  # the batch id of a task without rows (it appends nothing, so none is needed)


class SinkInterrupted(Exception):
    """A micro-batch's job interrupted by the query's stop (`StreamingQuery.stop` interrupts the stream thread
    while the sink's job runs; the micro-batch is not committed and is replayed at the next start). Its text is
    what Spark's `StreamExecution.isInterruptionException` takes for a stop in a foreachBatch error, and it is
    raised without the Java trace: Spark matches the error's text with a backtracking regular expression that
    overflows the stream thread's stack on a long traceback (a `StackOverflowError` at every Ctrl-C)."""

    def __init__(self, batch_id: int) -> None:
        super().__init__(f"micro-batch {batch_id} stopped with the query (py4j.protocol.Py4JJavaError: An error "
                         "occurred while calling collectToPython: java.lang.InterruptedException)")


def _interrupted(error: Py4JJavaError) -> bool:
    """Whether the Java exception behind `error`, or one of its causes, is an InterruptedException."""
    try:
        cause = error.java_exception
        for _ in range(16):  # a cause chain is short; a cycle ends here
            if cause is None:
                return False
            if cause.getClass().getName() == "java.lang.InterruptedException":
                return True
            cause = cause.getCause()
    except Exception:  # the JVM going away as it stops: not an interruption this can tell
        return False
    return False


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
    partitions: int = 0  # target partitions decided
    logs_opened: int = 0  # partition logs the sink opened afresh
    logs_kept: int = 0  # partition logs the sink's workers had kept open
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
            partitions=sum(t.partitions for t in summaries),
            logs_opened=sum(t.logs_opened for t in summaries),
            logs_kept=sum(t.logs_kept for t in summaries),
            metric_rows=[row for t in summaries for row in t.metric_rows],
        )


# Called on the driver after a micro-batch is committed, with its summary (metric deltas included), on
# the listener bus's thread: observers never touch the decisions DataFrame, so they start no Spark job.
MicroBatchObserver = Callable[[int, MicroBatchSummary], None]


@dataclass(frozen=True)
class SinkTask:
    """What every task of the sink's job needs, pickled once into the job's UDF and sent with each task (a few
    hundred bytes): the sink's settings, the watched topic registry, and the Python worker's first step
    (`worker_setup`: logging, allocator settings), given by the query so the sink imports nothing above it."""

    config: SinkConfig
    registry: RegistryWatcher
    worker_setup: Callable[[], None]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        self.worker_setup()
        # The worker's producer made before the first decision is read: a new worker's connection and idempotent
        # producer id come on librdkafka's threads while the stage decides, not after the task's commits.
        producer(self.config.cluster, self.config.max_message_bytes, self.config.publish_timeout_ms)
        batch_id, decisions = batch_id_and_decisions(batches)
        summary = run_task(self.config, batch_id, self.registry.current(), arrow_decision_chunks(decisions))
        yield pa.RecordBatch.from_pydict({"summary": [summary.to_json()]})


def micro_batch_job(function: ArrowFunction) -> Callable[[DataFrame, int], DataFrame]:
    """The sink's job over a micro-batch's decisions: `function` over each task's decision rows and the
    micro-batch's id beside them (`batch_id_and_decisions` takes them apart), bound into Spark at the first
    micro-batch and the same at every later one."""
    job = ArrowMap(function, TASK_SUMMARY_SCHEMA, (*DecisionRow._fields, BATCH_ID_COLUMN))
    # The id as a string literal: Spark's code generation writes an integer literal into the generated Java
    # source, so every micro-batch would compile (~15-130 ms on the driver) and load a class of its own, which
    # the JIT then compiles afresh; a string literal is passed to the class as a reference, so one class serves
    # every micro-batch (docs/performance.md, "Scale": "The sink's job compiles nothing").
    return lambda decisions, batch_id: job(decisions.withColumn(BATCH_ID_COLUMN, F.lit(str(batch_id))))


def batch_id_and_decisions(batches: Iterable[pa.RecordBatch]) -> tuple[int, Iterator[pa.RecordBatch]]:
    """The micro-batch id a task's rows carry (`BATCH_ID_COLUMN`; `NO_ROWS` when the task has none), and its
    batches without that column, in order."""
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return NO_ROWS, iter(())
    batch_id = int(first.column(BATCH_ID_COLUMN)[0].as_py())

    def decisions() -> Iterator[pa.RecordBatch]:
        for batch in itertools.chain((first,), batches):
            ids = batch.column(BATCH_ID_COLUMN)
            if len(ids) and int(ids[0].as_py()) != batch_id:  # one literal of the job's plan: never, unless Spark broke it
                raise ValueError(f"a task's rows carry micro-batch ids {batch_id} and {ids[0].as_py()}")
            yield batch.drop_columns([BATCH_ID_COLUMN])

    return batch_id, decisions()


def _no_setup() -> None:
    pass


class GatewaySink:
    """The query's foreachBatch sink: `write` stores and publishes a micro-batch's decisions; `on_progress` and
    `on_terminated` take the query's listener events and hand each committed micro-batch's summary to the
    observers."""

    def __init__(self, config: SinkConfig, registry: RegistryWatcher, observers: Sequence[MicroBatchObserver] = (),
                 worker_setup: Callable[[], None] = _no_setup, before_write: Callable[[], None] = _no_setup,
                 on_close: Callable[[], None] = _no_setup) -> None:
        self.config = config
        # on the driver before each micro-batch's job, when no task runs (the registry's sync,
        # `streaming/registry_sync.py`), and once when the query has terminated
        self.before_write, self.on_close = before_write, on_close
        self.job = micro_batch_job(SinkTask(config, registry, worker_setup))
        self.observers = list(observers)
        self.last_summary: MicroBatchSummary | None = None
        self.retention: Any = None  # the query's retention schedule (streaming.query sets it; tests wait on it)
        self._terminated = threading.Event()
        self._lock = threading.Lock()
        self._written: dict[int, list[TaskSummary]] = {}  # by batch id, until its progress report

    def write(self, decisions: DataFrame, batch_id: int) -> None:
        """foreachBatch's function: one Spark job, the tasks' summaries kept for the micro-batch's report."""
        self.before_write()
        try:
            rows = self.job(decisions, batch_id).collect()
        except Py4JJavaError as e:
            if _interrupted(e):
                log.info("micro-batch %d stopped with the query: not committed, it is replayed at the next start",
                         batch_id)
                raise SinkInterrupted(batch_id) from None
            raise
        self.written(batch_id, [TaskSummary.from_json(r.summary) for r in rows])

    def written(self, batch_id: int, summaries: Sequence[TaskSummary]) -> None:
        """Keep what micro-batch `batch_id` wrote until its progress report (a later attempt replaces it)."""
        with self._lock:
            self._written[batch_id] = list(summaries)

    def on_progress(self, progress: Mapping[str, Any]) -> None:
        """A progress report of this sink's query: merge the micro-batch's summaries, call the observers.
        A report of a micro-batch that wrote nothing calls nothing."""
        batch_id = int(progress["batchId"])
        with self._lock:
            summaries = self._written.pop(batch_id, None)
            for older in [b for b in self._written if b < batch_id]:  # a failed attempt's, replayed since
                del self._written[older]
        if not summaries or not any(t.partitions for t in summaries):
            return
        sink_seconds = (progress.get("durationMs") or {}).get("addBatch", 0) / 1000
        self.last_summary = s = MicroBatchSummary.merge(batch_id, summaries, sink_seconds)
        log.debug("micro-batch %s: %d appended (%d bytes), %d responses, %d dead letters, %d replayed partitions, "
                  "%.3f s (append %.3f s, publish %.3f s over %d partitions)", batch_id, s.appended_batches,
                  s.appended_bytes, s.responses, s.dead_letters, s.replayed_partitions, s.sink_seconds,
                  s.append_seconds, s.publish_seconds, s.partitions)
        for observe in self.observers:
            observe(batch_id, s)

    def on_terminated(self) -> None:
        """The query terminated and its listener is gone; its last progress report was handled before (one
        listener bus, in order)."""
        try:
            self.on_close()
        finally:
            self._terminated.set()

    def wait_terminated(self, timeout_s: float) -> bool:
        """Block until the termination reached this sink, so every progress report before it has too."""
        return self._terminated.wait(timeout_s)

