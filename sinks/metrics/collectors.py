"""Custom Prometheus collectors: a histogram from aggregated bucket counts (the tasks' metric deltas)
and the segment storage on disk (segments and bytes per topic, read at scrape time).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from sinks.batch_metrics import (
    OTHER_TOPIC,
    PREFIX,
)
from storage.file_names import parse_partition_dir


def finite(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class AggregatedHistogram(Collector):
    """A Prometheus histogram fed with bucket counts that Spark already aggregated.

    `prometheus_client.Histogram` only takes one observation at a time; the observer gets per-bucket
    counts from a single Spark aggregation instead of shipping every value to the driver."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(float(b) for b in buckets)
        if list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError(f"{name}: buckets must be strictly increasing")
        self._lock = threading.Lock()
        # labels -> (cumulative counts per bucket incl. +Inf, sum)
        self._series: dict[tuple[str, ...], tuple[list[int], float]] = {}

    def init_series(self, *labels: str) -> None:
        """Export a zero series for `labels` before anything is observed (rates start from 0)."""
        with self._lock:
            self._series.setdefault(tuple(labels), ([0] * (len(self.buckets) + 1), 0.0))

    def add(self, labels: Sequence[str], cumulative: Sequence[int], count: int, total: float) -> None:
        """Add observations: `cumulative[i]` of them were <= buckets[i]; `count` in all, summing to `total`."""
        if len(cumulative) != len(self.buckets):
            raise ValueError(f"{self.name}: {len(cumulative)} bucket counts for {len(self.buckets)} buckets")
        if count <= 0:
            return
        with self._lock:
            counts, s = self._series.setdefault(tuple(labels), ([0] * (len(self.buckets) + 1), 0.0))
            for i, c in enumerate(cumulative):
                counts[i] += int(c)
            counts[-1] += int(count)
            self._series[tuple(labels)] = (counts, s + float(total))

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        with self._lock:
            series = {k: (list(v[0]), v[1]) for k, v in self._series.items()}
        bounds = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
        for labels, (counts, total) in sorted(series.items()):
            family.add_metric(list(labels), list(zip(bounds, counts, strict=True)), total)
        yield family

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=list(self.labelnames))

    def sample_names(self) -> set[str]:
        # OpenMetrics (and prometheus_client) expose no _sum, hence no _count, for a histogram with
        # negative buckets: its sum could go down. The +Inf bucket is the count.
        if self.buckets[0] < 0:
            return {self.name + "_bucket"}
        return {self.name + s for s in ("_bucket", "_count", "_sum")}


class StorageCollector(Collector):
    """Segment files and their bytes per topic, scanned at scrape time from `<root>/<topic>-<partition>/*.log`."""

    def __init__(self, segments_root: Path, topics: Mapping[str, int]) -> None:
        self.segments_root = Path(segments_root)
        self.topics = dict(topics)

    def scan(self) -> dict[str, tuple[int, int]]:
        """topic label -> (segments, bytes of their .log files)."""
        totals = {t: (0, 0) for t in self.topics}
        try:
            directories = [d for d in self.segments_root.iterdir() if d.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return totals
        for d in directories:
            parsed = parse_partition_dir(d.name)
            if parsed is None:
                continue  # not a partition directory
            topic, partition = parsed
            label = topic if topic in self.topics and partition < self.topics[topic] else OTHER_TOPIC
            segments, size = totals.get(label, (0, 0))
            for f in d.glob("*.log"):
                try:
                    size += f.stat().st_size
                except FileNotFoundError:  # deleted by retention while we listed it
                    continue
                segments += 1
            totals[label] = (segments, size)
        return totals

    def collect(self) -> Iterator[Metric]:
        segments = GaugeMetricFamily(
            f"{PREFIX}log_segments", "Segment (.log) files in segment storage, by topic.", labels=["topic"])
        size = GaugeMetricFamily(
            f"{PREFIX}log_size_bytes", "Bytes of the segment (.log) files in segment storage, by topic.",
            labels=["topic"])
        for topic, (n, b) in sorted(self.scan().items()):
            segments.add_metric([topic], n)
            size.add_metric([topic], b)
        yield segments
        yield size

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(f"{PREFIX}log_segments", "Segment (.log) files in segment storage, by topic.",
                                labels=["topic"])
        yield GaugeMetricFamily(f"{PREFIX}log_size_bytes", "Bytes of the segment (.log) files, by topic.",
                                labels=["topic"])
