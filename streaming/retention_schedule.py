"""Retention on a schedule: Kafka's `kafka-log-retention` task on the driver (docs/design.md: segment storage).

Kafka's `LogManager` (`UnifiedLog.deleteRetentionMsBreachedSegments`) loads and recovers every log at startup, then runs `cleanupLogs`
every `log.retention.check.interval.ms` (default 300000) after `log.initial.task.delay.ms` (30000); each
pass deletes the segments that breach `retention.bytes`, `retention.ms` and, in the gateway,
KIP-870's `retention.max.eventtime.ms`. `RetentionSchedule` is that task for the segment storage:

- a daemon thread on the driver. First a startup pass rebuilds the active segments' indexes that a
  machine crash left damaged (`log_manager.repair_indexes`: commits do not fsync indexes, and readers
  trust them); then, every `interval_ms`, one `run_once(now)` = `retention.enforce_retention_all` with the
  host's wall clock (Kafka's `time.milliseconds()`: retention is the one place the gateway reads it);
- safe against the concurrent append: every pass takes each partition's lock without waiting, so a
  retention pass never holds up an append for longer than its own work on that partition. A partition whose
  micro-batch is being appended is tried again within the same pass, every `BUSY_RETRY_WAIT_MS`, for up to
  `busy_retry_ms` (an append holds the lock for one micro-batch at most; Kafka's retention waits for the log's
  lock), and only one busy all that time is left (counted as busy) for the next pass. Without the retries a
  partition appended in nearly every micro-batch, the one that grows fastest, would rarely get retention;
- deletions are logged by partition and reason, counted here (`deleted_segments`, `deleted_bytes`, by
  (topic, reason)) and in the exporter's `gateway_retention_deleted_{segments,bytes}_total`
  (`GatewayMetrics.record_retention_deletion` of the metrics it is given);
- it never outlives the query: `stop()` (idempotent) ends the thread between partitions and joins it; a
  `StreamingQueryListener` stops it when the query terminates for any reason, and each pass first checks
  that the query is still active. `run_once` can be called directly (tests, tools), without the thread.

The log start offset a pass moves is visible to producers: `sinks.partition_task.outgoing_messages` answers with the
storage's log start offset when it is larger than the stage's (the stage's state cannot see retention).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from sinks.metrics.gateway_metrics import GatewayMetrics
from storage.file_names import partition_dir
from storage.log_manager import repair_indexes
from storage.retention import RetentionReport, enforce_retention, enforce_retention_all
from streaming.listener_bridge import BridgedListener
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.retention")

LOG_RETENTION_CHECK_INTERVAL_MS = 300000  # log.retention.check.interval.ms default (`UnifiedLog.deleteRetentionMsBreachedSegments`)
LOG_INITIAL_TASK_DELAY_MS = 30000  # log.initial.task.delay.ms default
# A pass's retries of the partitions an append held (module docstring): for up to this long, at most half the
# interval, a round every BUSY_RETRY_WAIT_MS (each try is a lock file's open, non-blocking lock and close)
BUSY_RETRY_MS = 30000
BUSY_RETRY_WAIT_MS = 50

RegistrySource = TopicRegistry | Callable[[], TopicRegistry]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def metric_reason(reason: str) -> str:
    """`retention.ms` -> `retention_ms`: the exporter's label values (`sinks.metrics.gateway_metrics.RETENTION_REASONS`)."""
    return reason.replace(".", "_")


@dataclass(frozen=True)
class RetentionPass:
    """What one pass did."""

    now_ms: int
    reports: tuple[RetentionReport, ...]
    busy: tuple[tuple[str, int], ...]  # partitions skipped because an append held their lock all the retries
    duration_s: float
    retried: int = 0  # partitions an append held at first, done by a retry of the same pass

    @property
    def deleted_segments(self) -> int:
        return sum(len(r.deleted) for r in self.reports)

    def deleted_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for report in self.reports:
            for reason, n in report.deleted_by_reason().items():
                out[reason] = out.get(reason, 0) + n
        return out


@dataclass
class _Counts:
    passes: int = 0
    failed_passes: int = 0
    busy_skips: int = 0
    indexes_rebuilt: int = 0
    deleted_segments: dict[tuple[str, str], int] = field(default_factory=dict)  # (topic, reason) -> segments
    deleted_bytes: dict[tuple[str, str], int] = field(default_factory=dict)  # (topic, reason) -> .log bytes


class RetentionSchedule:
    """The scheduled retention task of one gateway (module docstring)."""

    def __init__(
        self,
        segments_root: Path,
        registry: RegistrySource,
        interval_ms: int = LOG_RETENTION_CHECK_INTERVAL_MS,
        initial_delay_ms: int | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        name: str = "gateway-retention",
        metrics: GatewayMetrics | None = None,
        busy_retry_ms: int = BUSY_RETRY_MS,
    ) -> None:
        """`metrics`: the exporter's metrics that count deletions and log start offsets (None: not counted).
        `busy_retry_ms`: how long a pass retries the partitions an append holds (module docstring)."""
        if interval_ms < 1:  # Kafka: log.retention.check.interval.ms is at least 1
            raise ValueError(f"Invalid value {interval_ms} for configuration log.retention.check.interval.ms: "
                             "Value must be at least 1")
        self.segments_root = Path(segments_root)
        self._registry = registry
        self.interval_ms = interval_ms
        self.initial_delay_ms = min(LOG_INITIAL_TASK_DELAY_MS, interval_ms) if initial_delay_ms is None else initial_delay_ms
        self.clock = clock
        self.name = name
        self.metrics = metrics
        self.busy_retry_ms = min(busy_retry_ms, interval_ms // 2)
        self.last_pass: RetentionPass | None = None
        self.last_error: str | None = None
        self._counts = _Counts()
        self._stop = threading.Event()
        self._changed = threading.Condition()  # notified after every pass (and when the thread ends)
        self._thread: threading.Thread | None = None
        self._query: StreamingQuery | None = None
        self._spark: SparkSession | None = None
        self._listener: _StopOnTermination | None = None
        self._pass_lock = threading.Lock()  # one pass at a time (the thread and a direct run_once)

    # ------------------------------------------------------------------------------------ counters

    @property
    def passes(self) -> int:
        return self._counts.passes

    @property
    def failed_passes(self) -> int:
        return self._counts.failed_passes

    @property
    def busy_skips(self) -> int:
        return self._counts.busy_skips

    @property
    def indexes_rebuilt(self) -> int:
        return self._counts.indexes_rebuilt

    @property
    def deleted_segments(self) -> dict[tuple[str, str], int]:
        """Segments deleted so far, by (topic, reason) — reasons as `storage.retention` names them."""
        with self._changed:
            return dict(self._counts.deleted_segments)

    @property
    def deleted_bytes(self) -> dict[tuple[str, str], int]:
        with self._changed:
            return dict(self._counts.deleted_bytes)

    def registry(self) -> TopicRegistry:
        return self._registry() if callable(self._registry) else self._registry

    # ------------------------------------------------------------------------------------ one pass

    def run_once(self, now_ms: int | None = None) -> RetentionPass:
        """One retention pass over every partition of the registry's topics at `now_ms` (default: the
        clock). Partitions locked by an append are tried again for up to `busy_retry_ms`, then reported as
        busy."""
        with self._pass_lock:
            now = self.clock() if now_ms is None else now_ms
            started = time.monotonic()
            registry = self.registry()
            reports = enforce_retention_all(self.segments_root, registry, now)
            done = {(r.topic, r.partition) for r in reports}
            busy = [(name, p) for name in sorted(registry.topics) for p in range(registry.topics[name].partitions)
                    if (name, p) not in done and partition_dir(self.segments_root, name, p).is_dir()]
            first_busy = len(busy)
            deadline = started + self.busy_retry_ms / 1000
            while busy and time.monotonic() < deadline and not self._stop.wait(BUSY_RETRY_WAIT_MS / 1000):
                busy = self._retry(busy, registry, now, reports)
            result = RetentionPass(now, tuple(reports), tuple(busy), time.monotonic() - started,
                                   first_busy - len(busy))
            self._record(result)
            return result

    def _retry(self, busy: list[tuple[str, int]], registry: TopicRegistry, now: int,
               reports: list[RetentionReport]) -> list[tuple[str, int]]:
        """One round of retries over the partitions still busy (their reports added to `reports`): those still
        busy, or gone from the registry."""
        still: list[tuple[str, int]] = []
        for name, partition in busy:
            config = registry.get(name)
            report = None if config is None else enforce_retention(self.segments_root, name, partition, config, now,
                                                                  blocking=False)
            if report is not None:
                reports.append(report)
            elif config is not None and partition_dir(self.segments_root, name, partition).is_dir():
                still.append((name, partition))
        return still

    def _record(self, result: RetentionPass) -> None:
        for report in result.reports:
            if not report.deleted:
                continue
            by_reason = ", ".join(f"{n} by {reason}" for reason, n in sorted(report.deleted_by_reason().items()))
            log.info("%s-%d: retention deleted %d segment(s) (%s); log start offset now %d",
                     report.topic, report.partition, len(report.deleted), by_reason, report.log_start_offset)
            if self.metrics is not None:
                for d in report.deleted:
                    self.metrics.record_retention_deletion(report.topic, metric_reason(d.reason), 1, d.size)
                self.metrics.record_log_start_offset(report.topic, report.partition, report.log_start_offset)
        if result.busy:
            log.info("retention pass: %d partition(s) busy appending for %.0f s, left for the next pass: %s",
                     len(result.busy), self.busy_retry_ms / 1000, ", ".join(f"{t}-{p}" for t, p in result.busy))
        with self._changed:
            counts = self._counts
            counts.passes += 1
            counts.busy_skips += len(result.busy)
            for report in result.reports:
                for d in report.deleted:
                    key = (report.topic, d.reason)
                    counts.deleted_segments[key] = counts.deleted_segments.get(key, 0) + 1
                    counts.deleted_bytes[key] = counts.deleted_bytes.get(key, 0) + d.size
            self.last_pass = result
            self._changed.notify_all()

    def startup_repair(self) -> int:
        """The startup pass: rebuild damaged active-segment indexes of every partition (module docstring).
        Returns how many partitions needed it."""
        registry = self.registry()
        rebuilt = 0
        for name in sorted(registry.topics):
            config = registry.topics[name]
            for p in range(config.partitions):
                if self._stop.is_set():
                    return rebuilt
                rebuilt += bool(repair_indexes(self.segments_root, name, p, config, blocking=False))
        with self._changed:
            self._counts.indexes_rebuilt += rebuilt
        if rebuilt:
            log.warning("startup: rebuilt the indexes of %d partition(s) from their logs", rebuilt)
        return rebuilt

    # ------------------------------------------------------------------------------------ the thread

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, query: StreamingQuery | None = None, spark: SparkSession | None = None) -> RetentionSchedule:
        """Start the thread. With `query` (and its `spark` session) the schedule stops itself when the query
        terminates: a listener sees the termination, and a query that is already over stops it at once."""
        if self._thread is not None:
            raise RuntimeError("the retention schedule was already started")
        if query is not None:
            self._query = query
            if spark is not None:
                self._spark = spark
                self._listener = _StopOnTermination(self, str(query.id))
                spark.streams.addListener(self._listener)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if query is not None and not self._query_active():  # terminated before the listener was registered
            self.stop(wait=False)
        log.info("retention every %d ms (first pass in %d ms) over %s", self.interval_ms, self.initial_delay_ms,
                 self.segments_root)
        return self

    def stop(self, wait: bool = True, timeout_s: float = 60.0) -> None:
        """Stop the thread after the partition it is working on; idempotent. `wait` joins it (never from
        the thread itself)."""
        self._stop.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("the retention thread did not stop within %.0f s", timeout_s)

    def wait_for_passes(self, passes: int, timeout_s: float) -> bool:
        """Block until at least `passes` passes have completed (or the thread has ended); True if they have."""
        with self._changed:
            self._changed.wait_for(lambda: self._counts.passes >= passes or not self.running, timeout_s)
            return self._counts.passes >= passes

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread to end (after `stop`, or the query's termination); True if it has."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.running

    def _query_active(self) -> bool:
        if self._query is None:
            return True
        try:
            return bool(self._query.isActive)
        except Exception:  # noqa: BLE001 - the session is gone: so is the query
            return False

    def _run(self) -> None:
        try:
            try:
                self.startup_repair()
            except Exception as e:  # noqa: BLE001 - logged; retention still runs
                self.last_error = f"index repair: {e}"
                log.exception("startup index repair failed")
            delay_ms = self.initial_delay_ms
            while not self._stop.wait(delay_ms / 1000):
                delay_ms = self.interval_ms
                if not self._query_active():
                    break
                try:
                    self.run_once()
                    self.last_error = None
                except Exception as e:  # noqa: BLE001 - one failed pass must not end retention
                    self.last_error = str(e)
                    log.exception("retention pass failed; next one in %d ms", self.interval_ms)
                    with self._changed:
                        self._counts.failed_passes += 1
                        self._changed.notify_all()
        finally:
            self._stop.set()
            self._remove_listener()
            with self._changed:
                self._changed.notify_all()
            log.info("retention schedule stopped after %d pass(es)", self._counts.passes)

    def _remove_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and self._spark is not None:
            try:
                self._spark.streams.removeListener(listener)
            except Exception:  # noqa: BLE001 - the session may be stopping; the listener is inert anyway
                log.debug("could not remove the retention listener", exc_info=True)


class _StopOnTermination(BridgedListener):
    """Stops a schedule when its query terminates (for any reason: stop, failure, available-now end)."""

    progress_events = False  # the JVM's progress events never cross to Python for it

    def __init__(self, schedule: RetentionSchedule, query_id: str) -> None:
        self.schedule = schedule
        self.query_id = query_id

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        pass

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        if str(event.id) == self.query_id:
            self.schedule.stop(wait=False)  # the listener bus must not wait for a pass to finish


__all__ = [
    "BUSY_RETRY_MS",
    "LOG_INITIAL_TASK_DELAY_MS",
    "LOG_RETENTION_CHECK_INTERVAL_MS",
    "RetentionPass",
    "RetentionSchedule",
    "metric_reason",
    "wall_clock_ms",
]
