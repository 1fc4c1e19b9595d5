"""Prometheus metrics of the gateway (docs/operations.md: metrics), served by the driver.

Naming: prefix `gateway_`, base units (seconds, bytes), counters end in `_total`. Labels are bounded:
`topic` is a registry topic or "other" (a hostile producer must not be able to mint series), `error`
is a Kafka error name (a closed enum), `partition` appears only on per-partition gauges of registry
topics (bounded by the configured partition counts) and on the ingress lag (bounded by the ingress
topic's partitions).

Where the numbers come from:
- `sinks.metrics.observer.MetricsObserver`, a micro-batch observer of the sink (`sinks.micro_batch`): after a
  micro-batch is durable and published it merges the metric deltas the sink's tasks computed
  (`sinks.batch_metrics`; no Spark job of its own) into the counters, histograms and offset gauges;
- `GatewayMetrics.record_progress`, fed by `streaming.listener.GatewayListener` with each
  `StreamingQueryProgress` (rates, micro-batch duration, state store size, ingress lag);
- `StorageCollector`, a scrape-time scan of the segment root (segment files and bytes per topic), so
  the storage panels also see what retention deleted between micro-batches;
- `record_retention_deletion` / `record_log_start_offset`, called by the retention schedule (on the driver)
  that was given these metrics.

Everything lives in one dedicated `CollectorRegistry` per `GatewayMetrics`, never the global default
registry: tests get fresh counters, and the exporter shows only the gateway's own metrics.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)

from sinks.batch_metrics import (
    APPEND_LATENCY_BUCKETS_S,
    NO_ERROR,
    OTHER_TOPIC,
    OUTCOME_APPENDED,
    PREFIX,
    TIMESTAMP_SKEW_BUCKETS_S,
)
from sinks.metrics.collectors import AggregatedHistogram, StorageCollector, finite

if TYPE_CHECKING:  # pyspark only where Spark runs: the exporter and its tests need none
    from sinks.micro_batch import MicroBatchSummary
    from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.metrics")

# Why a segment was deleted: Kafka's three breaches (LogStartOffsetBreach, RetentionMsBreach,
# RetentionSizeBreach) and KIP-870's event-time retention.
RETENTION_REASONS = ("retention_ms", "retention_bytes", "retention_max_eventtime_ms", "log_start_offset")

MICRO_BATCH_DURATION_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# `durationMs` phases of a StreamingQueryProgress (a fixed set, so a bounded label).
PROGRESS_PHASES = ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch",
                   "commitOffsets")


@dataclass
class BatchAggregate:
    """One row of the observer's aggregation: the decisions of one (topic, partition, outcome, error)
    group of a micro-batch. `partition` is -1 where it is not a bounded label."""

    topic: str
    partition: int
    outcome: str
    error: str
    batches: int = 0
    records: int = 0
    appended_bytes: int = 0
    record_errors: int = 0
    future_timestamps: int = 0
    clock_holds: int = 0
    log_end_offset: int | None = None
    log_start_offset: int | None = None
    latency_count: int = 0
    latency_sum_s: float = 0.0
    latency_buckets: list[int] = field(default_factory=list)
    skew_count: int = 0
    skew_sum_s: float = 0.0
    skew_buckets: list[int] = field(default_factory=list)


# The sample naming the query the metrics are of: `gateway_query_info{query="...", version="..."} 1`
QUERY_INFO = f"{PREFIX}query_info"

# The `cause` label of gateway_query_restarts_total (bounded): what the failed query's error points at.
RESTART_CAUSES = ("kafka", "executor_lost", "storage_io", "other")


class GatewayMetrics:
    """Every gateway metric, in its own `CollectorRegistry`.

    `topics`: registry topic -> partition count; the only topic label values besides "other"."""

    def __init__(
        self, topics: Mapping[str, int], segments_root: Path | None = None,
        create_time_topics: Iterable[str] = (), registry: CollectorRegistry | None = None,
    ) -> None:
        self.topics = dict(topics)
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        t = ["topic"]
        self.batches = Counter(f"{PREFIX}batches_total", "Ingress batches decided, by target topic, outcome and "
                               "Kafka error name (NONE when appended).", ["topic", "outcome", "error"], registry=r)
        self.records = Counter(f"{PREFIX}records_total", "Records in decided batches, by outcome and error name "
                               "(rejected: the count a readable v2 header claims, else 0).",
                               ["topic", "outcome", "error"], registry=r)
        self.appended_bytes = Counter(f"{PREFIX}appended_bytes_total", "Bytes of batches appended to segment "
                                      "storage.", t, registry=r)
        self.record_errors = Counter(f"{PREFIX}record_errors_total", "Per-record errors of rejected batches "
                                     "(e.g. each out-of-window timestamp), by error name.", ["topic", "error"],
                                     registry=r)
        self.future_timestamps = Counter(f"{PREFIX}future_timestamps_total", "Accepted records with a CreateTime "
                                         "more than one hour ahead of the append clock (KIP-937).", t, registry=r)
        self.clock_holds = Counter(f"{PREFIX}clock_holds_total", "Appends whose append time was held at the "
                                   "partition's last append time because the micro-batch clock was behind.", t,
                                   registry=r)
        self.append_latency = AggregatedHistogram(
            f"{PREFIX}append_latency_seconds", "Ingress message timestamp to append time of appended batches.",
            t, APPEND_LATENCY_BUCKETS_S)
        # Negative buckets (producer clock ahead) mean no _sum/_count series: le="+Inf" is the count.
        self.timestamp_skew = AggregatedHistogram(
            f"{PREFIX}timestamp_skew_seconds", "Append time minus the batch's max CreateTime of appended "
            "batches (negative: producer clock ahead).", t, TIMESTAMP_SKEW_BUCKETS_S)
        r.register(self.append_latency)
        r.register(self.timestamp_skew)
        self.log_end_offset = Gauge(f"{PREFIX}log_end_offset", "Log end offset (last offset + 1) of a target "
                                    "partition.", ["topic", "partition"], registry=r)
        self.log_start_offset = Gauge(f"{PREFIX}log_start_offset", "Log start offset of a target partition.",
                                      ["topic", "partition"], registry=r)
        self.retention_deleted_segments = Counter(
            f"{PREFIX}retention_deleted_segments_total", "Segments deleted by retention, by reason.",
            ["topic", "reason"], registry=r)
        self.retention_deleted_bytes = Counter(
            f"{PREFIX}retention_deleted_bytes_total", "Bytes of segment files deleted by retention, by reason.",
            ["topic", "reason"], registry=r)
        self.responses = Counter(f"{PREFIX}responses_published_total", "Produce responses published to the "
                                 "response topic.", registry=r)
        self.dead_letters = Counter(f"{PREFIX}dead_letters_published_total", "Rejected batches published to the "
                                    "dead-letter topic.", registry=r)
        self.replayed_partitions = Counter(f"{PREFIX}replayed_partitions_total", "Partition appends skipped "
                                           "because a replayed micro-batch was already committed.", registry=r)
        self.partition_logs_opened = Counter(
            f"{PREFIX}partition_logs_opened_total", "Partition logs the sink opened for a micro-batch's appends: "
            "afresh (locked and recovered) or kept (kept open by the worker since its last micro-batch).", ["how"],
            registry=r)
        for how in ("afresh", "kept"):  # both series from the start, at 0
            self.partition_logs_opened.labels(how)
        self.micro_batches = Counter(f"{PREFIX}micro_batches_total", "Micro-batches completed by the sink "
                                     "(durable and published).", registry=r)
        self.observer_failures = Counter(f"{PREFIX}metrics_observer_failures_total", "Micro-batches whose "
                                         "metrics could not be computed (the micro-batch itself succeeded).",
                                         registry=r)
        self.last_micro_batch_id = Gauge(f"{PREFIX}last_micro_batch_id", "Id of the last micro-batch the sink "
                                         "completed.", registry=r)
        self.last_micro_batch_clock = Gauge(f"{PREFIX}last_micro_batch_clock_seconds", "Micro-batch clock (append "
                                            "time base) of the last completed micro-batch, Unix time.", registry=r)
        # Whose metrics these are: `gateway status` checks that the query is the one its config names
        self.query_info = Info(QUERY_INFO.removesuffix("_info"), "The streaming query these metrics are of, and the gateway's version.",
                               registry=r)
        # From the query listener
        self.query_active = Gauge(f"{PREFIX}query_active", "1 while the gateway's streaming query runs.",
                                  registry=r)
        # From the supervisor
        self.query_restarts = Counter(f"{PREFIX}query_restarts_total", "Restarts of the streaming query from its "
                                      "checkpoint after it failed, by the failure's kind of cause.", ["cause"],
                                      registry=r)
        for cause in RESTART_CAUSES:  # every series exists from the start (0), so increase() sees the first
            self.query_restarts.labels(cause)
        self.progress_batch_id = Gauge(f"{PREFIX}progress_batch_id", "Micro-batch id of the last query progress "
                                       "report.", registry=r)
        self.progress_timestamp = Gauge(f"{PREFIX}progress_timestamp_seconds", "When the last query progress "
                                        "report was made, Unix time.", registry=r)
        self.micro_batch_duration = Histogram(
            f"{PREFIX}micro_batch_duration_seconds", "Wall time of micro-batches (trigger execution).",
            registry=r, buckets=MICRO_BATCH_DURATION_BUCKETS_S)
        self.micro_batch_phase = Gauge(f"{PREFIX}micro_batch_phase_duration_seconds", "Time the last micro-batch "
                                       "spent per phase of the trigger.", ["phase"], registry=r)
        self.ingress_messages = Counter(f"{PREFIX}ingress_messages_total", "Ingress messages read by the query "
                                  "(one per produce batch).", registry=r)
        self.input_rate = Gauge(f"{PREFIX}input_messages_per_second", "Rate at which ingress messages arrived "
                                "(last progress report).", registry=r)
        self.processing_rate = Gauge(f"{PREFIX}processed_messages_per_second", "Rate at which the query processed "
                                     "ingress messages (last progress report).", registry=r)
        self.state_rows = Gauge(f"{PREFIX}state_rows", "Rows in the stateful stage's state store (one per "
                                "target partition that appended).", registry=r)
        self.state_memory = Gauge(f"{PREFIX}state_memory_bytes", "Memory used by the state store.", registry=r)
        self.ingress_lag = Gauge(f"{PREFIX}ingress_lag_messages", "Ingress messages available but not yet "
                                 "processed (latest offset - end offset of the last micro-batch), by ingress "
                                 "partition.", ["partition"], registry=r)
        self.storage: StorageCollector | None = None
        if segments_root is not None:
            self.storage = StorageCollector(segments_root, self.topics)
            r.register(self.storage)
        self._lock = threading.Lock()
        self._offsets: dict[tuple[str, str, str], int] = {}
        self._offset_series: dict[tuple[str, str, str], Any] = {}  # the gauges' series by the same key
        self._init_series(create_time_topics)

    def _init_series(self, create_time_topics: Iterable[str]) -> None:
        # Known label sets start at 0 so rate() and increase() see the first micro-batch, and so the
        # dashboard has series to show before any traffic.
        ct = set(create_time_topics)
        for topic in self.topics:
            self.batches.labels(topic, OUTCOME_APPENDED, NO_ERROR)
            self.records.labels(topic, OUTCOME_APPENDED, NO_ERROR)
            self.appended_bytes.labels(topic)
            self.future_timestamps.labels(topic)
            self.clock_holds.labels(topic)
            self.append_latency.init_series(topic)
            if topic in ct:
                self.timestamp_skew.init_series(topic)
            for reason in RETENTION_REASONS:
                self.retention_deleted_segments.labels(topic, reason)
                self.retention_deleted_bytes.labels(topic, reason)
        for phase in PROGRESS_PHASES:
            self.micro_batch_phase.labels(phase)

    @staticmethod
    def for_registry(registry: TopicRegistry, segments_root: Path | None = None,
                     collector_registry: CollectorRegistry | None = None) -> GatewayMetrics:
        topics, create_time = _registry_topics(registry)
        return GatewayMetrics(topics, segments_root, create_time, collector_registry)

    def set_registry(self, registry: TopicRegistry) -> None:
        """Follow a reloaded topic registry: new topics get their own label (and zero series) from now
        on. Series of topics that left the registry keep their last values until the restart."""
        topics, create_time = _registry_topics(registry)
        if topics == self.topics:
            return
        with self._lock:
            # Replaced, never mutated: the scrape thread may be iterating the old dict.
            self.topics = topics
            if self.storage is not None:
                self.storage.topics = topics
            self._init_series(create_time)
        log.info("metrics follow the reloaded topic registry: %d topics", len(topics))

    # ------------------------------------------------------------------------------ label folding

    def topic_label(self, topic: str | None) -> str:
        return topic if topic is not None and topic in self.topics else OTHER_TOPIC

    def partition_bounded(self, topic: str | None, partition: int | None) -> bool:
        return topic in self.topics and partition is not None and 0 <= partition < self.topics[topic]

    # ------------------------------------------------------------------------------ updates

    def record_micro_batch(self, batch_id: int, groups: Iterable[BatchAggregate],
                           summary: MicroBatchSummary | None = None, clock_ms: int | None = None) -> None:
        """Apply one micro-batch's aggregated decisions (and the sink's publish counts). The groups are per
        partition, the counters and histograms per topic: folded by their labels first, so a micro-batch over
        1 000 partitions updates each series once, not once a partition (~22 µs a partition, measured)."""
        counts: dict[tuple[str, str, str], list[int]] = {}  # (topic, outcome, error): batches, records
        per_topic: dict[str, list[int]] = {}  # appended bytes, future timestamps, clock holds
        record_errors: dict[tuple[str, str], int] = {}
        latency: dict[str, _Observations] = {}
        skew: dict[str, _Observations] = {}
        offsets: list[tuple[str, str, str, int]] = []
        for g in groups:
            topic = self.topic_label(g.topic)
            c = counts.get(key := (topic, g.outcome, g.error))
            if c is None:
                c = counts[key] = [0, 0]
            c[0] += g.batches
            c[1] += max(0, g.records)
            t = per_topic.get(topic)
            if t is None:
                t = per_topic[topic] = [0, 0, 0]
            t[0] += g.appended_bytes
            t[1] += g.future_timestamps
            t[2] += g.clock_holds
            if g.record_errors:
                record_errors[(topic, g.error)] = record_errors.get((topic, g.error), 0) + g.record_errors
            if g.latency_count:
                _fold(latency, topic, g.latency_buckets, g.latency_count, g.latency_sum_s)
            if g.skew_count:
                _fold(skew, topic, g.skew_buckets, g.skew_count, g.skew_sum_s)
            if self.partition_bounded(g.topic, g.partition):
                p = str(g.partition)
                # Offsets only move forward; a replayed micro-batch must not move a gauge back.
                if g.log_end_offset is not None:
                    offsets.append(("end", topic, p, g.log_end_offset))
                if g.log_start_offset is not None and g.log_start_offset >= 0:
                    offsets.append(("start", topic, p, g.log_start_offset))
        with self._lock:
            for (topic, outcome, error), (batches, records) in counts.items():
                self.batches.labels(topic, outcome, error).inc(batches)
                self.records.labels(topic, outcome, error).inc(records)
            for topic, (appended_bytes, future_timestamps, clock_holds) in per_topic.items():
                if appended_bytes:
                    self.appended_bytes.labels(topic).inc(appended_bytes)
                if future_timestamps:
                    self.future_timestamps.labels(topic).inc(future_timestamps)
                if clock_holds:
                    self.clock_holds.labels(topic).inc(clock_holds)
            for (topic, error), n in record_errors.items():
                self.record_errors.labels(topic, error).inc(n)
            for topic, (cumulative, count, total) in latency.items():
                self.append_latency.add([topic], cumulative, count, total)
            for topic, (cumulative, count, total) in skew.items():
                self.timestamp_skew.add([topic], cumulative, count, total)
            for kind, topic, p, value in offsets:
                self._advance(kind, topic, p, value)
            if summary is not None:
                self.responses.inc(summary.responses)
                self.dead_letters.inc(summary.dead_letters)
                self.replayed_partitions.inc(summary.replayed_partitions)
                self.partition_logs_opened.labels("afresh").inc(summary.logs_opened)
                self.partition_logs_opened.labels("kept").inc(summary.logs_kept)
            self.micro_batches.inc()
            self.last_micro_batch_id.set(batch_id)
            if clock_ms is not None and clock_ms > 0:
                self.last_micro_batch_clock.set(clock_ms / 1000.0)

    def _advance(self, kind: str, topic: str, partition: str, value: int) -> None:
        """A partition's offset gauge (`kind`: "end" or "start") moved to `value` unless it is already past it.
        Its series kept at hand: a label lookup costs more than the set."""
        key = (kind, topic, partition)
        if value >= self._offsets.get(key, -1):
            self._offsets[key] = value
            series = self._offset_series.get(key)
            if series is None:
                gauge = self.log_end_offset if kind == "end" else self.log_start_offset
                series = self._offset_series[key] = gauge.labels(topic, partition)
            series.set(value)

    def record_progress(self, progress: Mapping[str, Any], ingress_topic: str | None = None) -> dict[str, Any]:
        """Apply one `StreamingQueryProgress` (its JSON as a dict). Returns the figures it derived
        (for the listener's log line)."""
        batch_id = int(progress.get("batchId", -1))
        durations = progress.get("durationMs") or {}
        num_input = int(progress.get("numInputRows") or 0)
        state_ops = progress.get("stateOperators") or []
        state_rows = sum(int(op.get("numRowsTotal") or 0) for op in state_ops)
        state_memory = sum(int(op.get("memoryUsedBytes") or 0) for op in state_ops)
        lag = ingress_lag(progress.get("sources") or [], ingress_topic)
        with self._lock:
            self.progress_batch_id.set(batch_id)
            self.progress_timestamp.set(_progress_time_s(progress.get("timestamp")) or time.time())
            trigger = finite(durations.get("triggerExecution"))
            if trigger is not None:
                self.micro_batch_duration.observe(trigger / 1000.0)
            for phase in PROGRESS_PHASES:
                ms = finite(durations.get(phase))
                self.micro_batch_phase.labels(phase).set((ms or 0.0) / 1000.0)
            self.ingress_messages.inc(num_input)
            input_rate = finite(progress.get("inputRowsPerSecond"))
            processed_rate = finite(progress.get("processedRowsPerSecond"))
            self.input_rate.set(input_rate or 0.0)
            self.processing_rate.set(processed_rate or 0.0)
            if state_ops:
                self.state_rows.set(state_rows)
                self.state_memory.set(state_memory)
            for partition, behind in lag.items():
                self.ingress_lag.labels(str(partition)).set(behind)
        return {
            "batch_id": batch_id, "input_messages": num_input, "duration_ms": durations.get("triggerExecution"),
            "input_messages_per_s": input_rate, "processed_messages_per_s": processed_rate, "state_rows": state_rows,
            "state_memory_bytes": state_memory, "ingress_lag": sum(lag.values()),
        }

    def record_retention_deletion(self, topic: str, reason: str, segments: int = 1, size_bytes: int = 0) -> None:
        reason = reason if reason in RETENTION_REASONS else "other"
        topic = self.topic_label(topic)
        self.retention_deleted_segments.labels(topic, reason).inc(segments)
        if size_bytes:
            self.retention_deleted_bytes.labels(topic, reason).inc(size_bytes)

    def record_log_start_offset(self, topic: str, partition: int, log_start_offset: int) -> None:
        """Retention moved a partition's log start offset (the stage's rows never learn it)."""
        if self.partition_bounded(topic, partition):
            with self._lock:
                self._advance("start", self.topic_label(topic), str(partition), log_start_offset)

    def count_restart(self, cause: str) -> None:
        self.query_restarts.labels(cause if cause in RESTART_CAUSES else "other").inc()

    def describe_query(self, query_name: str, version: str) -> None:
        """`gateway_query_info{query, version}`: the query these metrics are of."""
        self.query_info.info({"query": query_name, "version": version})

    def set_query_active(self, active: bool) -> None:
        self.query_active.set(1 if active else 0)

    # ------------------------------------------------------------------------------ exposition

    def metric_names(self) -> set[str]:
        """Every sample name this registry can export (what a PromQL expression may reference)."""
        aggregated = {h.name: h.sample_names() for h in (self.append_latency, self.timestamp_skew)}
        names: set[str] = set()
        for family in self.registry.collect():
            if family.name in aggregated:
                names.update(aggregated[family.name])
            elif family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
            elif family.type == "info":
                names.add(family.name + "_info")
            else:
                names.add(family.name)
        return names


def _registry_topics(registry: TopicRegistry) -> tuple[dict[str, int], list[str]]:
    from validators.codec.record_batch import TimestampType

    topics = {name: int(cfg.partitions) for name, cfg in registry.topics.items()}
    create_time = [name for name, cfg in registry.topics.items() if cfg.message_timestamp_type == TimestampType.CREATE_TIME]
    return topics, create_time


def ingress_lag(sources: Sequence[Mapping[str, Any]], topic: str | None = None) -> dict[int, int]:
    """Per ingress partition: latest available offset - end offset of the last micro-batch.

    A Kafka source reports both as JSON strings `{"<topic>": {"<partition>": offset}}`."""
    lag: dict[int, int] = {}
    for source in sources:
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        if latest is None or end is None:
            continue
        for t, partitions in latest.items():
            if topic is not None and t != topic:
                continue
            for p, latest_offset in partitions.items():
                done = end.get(t, {}).get(p)
                behind = int(latest_offset) - int(done) if done is not None else int(latest_offset)
                lag[int(p)] = lag.get(int(p), 0) + max(0, behind)
    return lag


def _offsets(value: Any) -> dict[str, dict[str, int]] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict):
        return None
    return {t: dict(p) for t, p in value.items() if isinstance(p, dict)}


def _progress_time_s(timestamp: Any) -> float | None:
    """Spark's progress timestamp, ISO-8601 in UTC with a `Z` suffix."""
    if not isinstance(timestamp, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_Observations = tuple[list[int], int, float]  # a histogram's cumulative bucket counts, count, sum


def _fold(into: dict[str, _Observations], topic: str, cumulative: Sequence[int], count: int, total: float) -> None:
    """`cumulative`, `count` and `total` added to `topic`'s observations in `into`."""
    folded = into.get(topic)
    if folded is None:
        into[topic] = (list(cumulative), count, total)
        return
    buckets, n, s = folded
    for i, c in enumerate(cumulative):
        buckets[i] += c
    into[topic] = (buckets, n + count, s + total)
