"""The gateway's INFO line about its micro-batches (docs/operations.md: logs): at most one per interval (10 s by
default, `log_summary_interval_ms`), adding up the micro-batches since the last one — batches by outcome, records
appended, rejections by Kafka error name, and the ingress-to-append latency (`gateway_append_latency_seconds`).
Each micro-batch's own figures are a DEBUG line and, when asked for, a line of `metrics_log_file`.

Pure: the caller feeds each micro-batch's figures with the time, and logs the line `add` returns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sinks.batch_metrics import (
    APPEND_LATENCY_BUCKETS_S,
    OUTCOME_APPENDED,
    OUTCOME_DUPLICATE,
    OUTCOME_REJECTED,
)

if TYPE_CHECKING:  # the driver's types; nothing here needs prometheus_client or Spark
    from sinks.metrics.gateway_metrics import BatchAggregate
    from sinks.micro_batch import MicroBatchSummary

DEFAULT_INTERVAL_MS = 10_000


@dataclass(frozen=True)
class MicroBatchFigures:
    """One micro-batch's decisions as the logs show them: ingress batches by outcome (appended, duplicate,
    rejected) and rejections by error name; the sink's publications; the latency histogram of its appends
    (`latency_buckets[i]`: appends whose ingress-to-append time was <= APPEND_LATENCY_BUCKETS_S[i])."""

    batches: Mapping[str, int] = field(default_factory=dict)
    rejected_by_error: Mapping[str, int] = field(default_factory=dict)
    records_appended: int = 0
    bytes_appended: int = 0
    responses: int = 0
    dead_letters: int = 0
    replayed_partitions: int = 0
    latency_count: int = 0
    latency_sum_s: float = 0.0
    latency_buckets: tuple[int, ...] = (0,) * len(APPEND_LATENCY_BUCKETS_S)

    @staticmethod
    def of(groups: Iterable[BatchAggregate], summary: MicroBatchSummary | None = None) -> MicroBatchFigures:
        """The figures of a micro-batch's aggregated decisions (`observer.merge_aggregates`) and its sink summary."""
        batches: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        records = size = latency_count = 0
        latency_sum = 0.0
        buckets = [0] * len(APPEND_LATENCY_BUCKETS_S)
        for g in groups:
            batches[g.outcome] += g.batches
            if g.outcome == OUTCOME_REJECTED:
                errors[g.error] += g.batches
            if g.outcome == OUTCOME_APPENDED:
                records += g.records
            size += g.appended_bytes
            if g.latency_count:
                latency_count += g.latency_count
                latency_sum += g.latency_sum_s
                buckets = [a + b for a, b in zip(buckets, g.latency_buckets, strict=True)]
        return MicroBatchFigures(
            dict(batches), dict(errors), records, size,
            summary.responses if summary else 0, summary.dead_letters if summary else 0,
            summary.replayed_partitions if summary else 0, latency_count, latency_sum, tuple(buckets))


def quantile_bound(q: float, cumulative: Sequence[int], count: int, bounds: Sequence[float] = APPEND_LATENCY_BUCKETS_S
                   ) -> str:
    """The histogram's bound for quantile `q`: "<= b" for the first bucket holding it, "> b" beyond the last."""
    for bound, below in zip(bounds, cumulative, strict=True):
        if below >= q * count:
            return f"<= {bound:g} s"
    return f"> {bounds[-1]:g} s"


class LogSummary:
    """Micro-batch figures added up until `interval_s` has passed since the last line (or since `now` at the
    start); `add` then returns the line and starts the next interval, else None."""

    def __init__(self, interval_s: float, now: float) -> None:
        self.interval_s = interval_s
        self._start(now)

    def _start(self, now: float) -> None:
        """An interval from `now`, empty."""
        self._started = now
        self._micro_batches = 0
        self._batches: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._records = 0
        self._latency_count = 0
        self._latency_sum = 0.0
        self._latency_buckets = [0] * len(APPEND_LATENCY_BUCKETS_S)

    def add(self, figures: MicroBatchFigures, now: float) -> str | None:
        self._micro_batches += 1
        self._batches.update(figures.batches)
        self._errors.update(figures.rejected_by_error)
        self._records += figures.records_appended
        self._latency_count += figures.latency_count
        self._latency_sum += figures.latency_sum_s
        self._latency_buckets = [a + b for a, b in zip(self._latency_buckets, figures.latency_buckets, strict=True)]
        if now - self._started < self.interval_s:
            return None
        line = self.line(now - self._started)
        self._start(now)
        return line

    def line(self, seconds: float) -> str:
        rejected = self._batches[OUTCOME_REJECTED]
        errors = ", ".join(f"{e}={n}" for e, n in sorted(self._errors.items()))
        n = self._latency_count
        latency = (f"p50 {quantile_bound(0.5, self._latency_buckets, n)}, p99 "
                   f"{quantile_bound(0.99, self._latency_buckets, n)}, mean {self._latency_sum / n:.2f} s") if n else "-"
        return (f"last {seconds:.1f} s: {self._micro_batches} micro-batch(es); batches {self._batches[OUTCOME_APPENDED]} "
                f"appended ({self._records} records), {self._batches[OUTCOME_DUPLICATE]} duplicate, {rejected} rejected"
                f"{f' ({errors})' if errors else ''}; ingress to append {latency}")
