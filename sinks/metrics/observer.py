"""The micro-batch observer: folds each micro-batch's summary (the tasks' metric deltas) into the
gateway's metrics, logs each micro-batch's JSON line at DEBUG (and to `metrics_log_file` when given), and at
INFO one summary line per interval (`sinks.metrics.log_summary`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sinks.metrics.gateway_metrics import BatchAggregate, GatewayMetrics
from sinks.metrics.log_summary import DEFAULT_INTERVAL_MS, LogSummary, MicroBatchFigures
from sinks.metrics.metrics_log_file import MetricsLogFile

if TYPE_CHECKING:  # pyspark only where Spark runs: the exporter and its tests need none
    from sinks.micro_batch import MicroBatchSummary
    from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.metrics")


class MetricsObserver:
    """Micro-batch observer (`sinks.micro_batch.MicroBatchObserver`) that updates `GatewayMetrics`.

    The sink's tasks already folded their decisions into aggregate rows (`sinks.batch_metrics`); this
    merges them on the driver, with no Spark job of its own. A failure here is logged and counted,
    never raised: the micro-batch is already durable and published, and failing it would replay it
    and publish its responses twice."""

    def __init__(self, metrics: GatewayMetrics, registry: Callable[[], TopicRegistry] | None = None,
                 summary_interval_s: float = DEFAULT_INTERVAL_MS / 1000, log_file: MetricsLogFile | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.registry = registry  # e.g. RegistryWatcher.current: follow registry reloads
        self.log_file = log_file
        self.clock = clock
        self.summary = LogSummary(summary_interval_s, clock())

    def __call__(self, batch_id: int, summary: MicroBatchSummary) -> None:
        started = time.monotonic()
        try:
            if self.registry is not None:
                self.metrics.set_registry(self.registry())
            groups, clock_ms = merge_aggregates(
                summary.metric_rows, len(self.metrics.append_latency.buckets), len(self.metrics.timestamp_skew.buckets)
            )
            self.metrics.record_micro_batch(batch_id, groups, summary, clock_ms)
            figures = MicroBatchFigures.of(groups, summary)
            detail = micro_batch_log(batch_id, figures)
            detail["metrics_ms"] = round((time.monotonic() - started) * 1000)
            line = json.dumps(detail, sort_keys=True)
            log.debug("%s", line)
            if self.log_file is not None:
                self.log_file.write(line)
            if (summary_line := self.summary.add(figures, self.clock())) is not None:
                log.info("%s", summary_line)
        except Exception:  # noqa: BLE001 — metrics must never fail a durable micro-batch
            self.metrics.observer_failures.inc()
            log.exception("micro-batch %s: metrics update failed", batch_id)


def merge_aggregates(rows: Iterable[Mapping[str, Any]], latency_buckets: int, skew_buckets: int
                     ) -> tuple[list[BatchAggregate], int | None]:
    """Fold the aggregation's rows (one per group and bucket pair) into one `BatchAggregate` per
    (topic, partition, outcome, error) with cumulative bucket counts; plus the micro-batch clock."""
    groups: dict[tuple[str, int, str, str], BatchAggregate] = {}
    clock: int | None = None
    for row in rows:
        r = row.asDict() if hasattr(row, "asDict") else row  # read only: no copy (a row per partition)
        key = (r["t"], int(r["p"]), r["o"], r["e"])
        g = groups.get(key)
        if g is None:
            g = groups[key] = BatchAggregate(*key, latency_buckets=[0] * latency_buckets,
                                             skew_buckets=[0] * skew_buckets)
        n = int(r["batches"])
        g.batches += n
        g.records += int(r["records"] or 0)
        g.appended_bytes += int(r["appended_bytes"] or 0)
        g.record_errors += int(r["record_errors"] or 0)
        g.future_timestamps += int(r["future_timestamps"] or 0)
        g.clock_holds += int(r["clock_holds"] or 0)
        for attr in ("log_end_offset", "log_start_offset"):
            if r[attr] is not None:
                current = getattr(g, attr)
                setattr(g, attr, int(r[attr]) if current is None else max(current, int(r[attr])))
        if r["clock_ms"] is not None:
            clock = int(r["clock_ms"]) if clock is None else max(clock, int(r["clock_ms"]))
        li, si = int(r["li"]), int(r["si"])
        if li >= 0:  # cumulative: an observation in bucket i is also <= every later bound
            g.latency_count += n
            g.latency_sum_s += float(r["latency_sum"] or 0.0)
            for i in range(li, latency_buckets):
                g.latency_buckets[i] += n
        if si >= 0:
            g.skew_count += n
            g.skew_sum_s += float(r["skew_sum"] or 0.0)
            for i in range(si, skew_buckets):
                g.skew_buckets[i] += n
    return list(groups.values()), clock


def micro_batch_log(batch_id: int, figures: MicroBatchFigures) -> dict[str, Any]:
    """The observer's structured line of one micro-batch: one JSON object, keyed by its id."""
    return {"event": "micro_batch", "batch_id": batch_id, "batches": dict(figures.batches),
            "rejected_by_error": dict(figures.rejected_by_error), "records_appended": figures.records_appended,
            "bytes_appended": figures.bytes_appended, "responses": figures.responses,
            "dead_letters": figures.dead_letters, "replayed_partitions": figures.replayed_partitions}
