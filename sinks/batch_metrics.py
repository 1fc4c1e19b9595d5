"""Metric deltas of one task's decisions, computed where the decisions are (docs/operations.md: metrics; docs/performance.md).

The sink's task already holds every decision row of its target partitions; it folds them here into
a few aggregate rows — one per (topic label, bounded partition, outcome, error, latency bucket, skew
bucket) — and sends only those back to the driver, where `sinks.metrics.merge_aggregates` adds them
into the Prometheus collectors. No Spark job of its own, no batch bytes leave the executor.

Pure Python: the label rules (a hostile producer cannot mint series) and the histogram bounds live
here so that the executor side needs neither Spark nor prometheus_client.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contract.decision_row import DecisionRow

PREFIX = "gateway_"  # every metric name starts with it (docs/operations.md: metrics)

OTHER_TOPIC = "other"  # every topic that is not in the registry (unknown, illegal or missing names)
NO_ERROR = "NONE"  # Kafka's name for error code 0

OUTCOME_APPENDED = "appended"
OUTCOME_DUPLICATE = "duplicate"  # idempotent retry: acknowledged with its original offsets, nothing stored
OUTCOME_REJECTED = "rejected"

# Ingress timestamp -> append time: a healthy gateway answers within a trigger interval or two.
APPEND_LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
# Append time - max CreateTime: negative when the producer's clock is ahead, hours to days for
# replays of old data (the `before` window defaults to unbounded).
TIMESTAMP_SKEW_BUCKETS_S = (
    -3600.0, -600.0, -60.0, -10.0, -1.0, 0.0, 1.0, 10.0, 60.0, 600.0, 3600.0, 21600.0, 86400.0, 604800.0,
)

# RecordBatch v2 header (Kafka's `DefaultRecordBatch` header): magic at byte 16, record count at bytes 57..60, 61 bytes in all.
_MAGIC_OFFSET = 16
_RECORDS_COUNT_OFFSET = 57
_HEADER_SIZE = 61


def bucket_index(value: float | None, bounds: Sequence[float]) -> int:
    """Index of the first bucket whose upper bound is >= value; len(bounds) for +Inf; -1 without a value."""
    if value is None:
        return -1
    return bisect.bisect_left(bounds, value)


def claimed_records(batch: bytes) -> int:
    """A rejected batch's record count as a readable v2 header claims it, capped by the bytes that
    could hold that many records, so garbage cannot inflate the counter."""
    if len(batch) < _HEADER_SIZE or batch[_MAGIC_OFFSET] != 2:
        return 0
    count = int.from_bytes(batch[_RECORDS_COUNT_OFFSET:_HEADER_SIZE], "big")
    return min(count, len(batch) - _HEADER_SIZE)


def aggregate_decisions(rows: Iterable[DecisionRow], topics: Mapping[str, int]) -> list[dict[str, Any]]:
    """Fold decision rows into aggregate rows (`DecisionAggregates`)."""
    aggregates = DecisionAggregates(topics)
    aggregates.add(rows)
    return aggregates.rows()


class DecisionAggregates:
    """Decision rows folded, as they come, into aggregate rows with the keys `merge_aggregates` reads:
    t, p, o, e, li, si, batches, records, appended_bytes, record_errors, future_timestamps, clock_holds,
    log_end_offset, log_start_offset, clock_ms, latency_sum, skew_sum. `topics`: registry topic ->
    partition count (the bounded labels)."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self._topics = topics
        self._groups: dict[tuple[str, int, str, str, int, int], dict[str, Any]] = {}

    def rows(self) -> list[dict[str, Any]]:
        return list(self._groups.values())

    def add(self, rows: Iterable[DecisionRow]) -> None:
        topics, groups = self._topics, self._groups
        for row in rows:
            topic = row.topic
            partition = row.partition
            label = topic if topic is not None and topic in topics else OTHER_TOPIC
            bounded = label != OTHER_TOPIC and partition is not None and 0 <= partition < topics[label]
            accepted = row.error_code == 0
            duplicate = accepted and row.duplicate
            appended = accepted and not duplicate
            outcome = OUTCOME_REJECTED if not accepted else OUTCOME_DUPLICATE if duplicate else OUTCOME_APPENDED
            error = row.error_name or NO_ERROR
            append_time = row.append_time_ms
            latency = (append_time - row.ingress_timestamp_ms) / 1000.0 if appended and append_time >= 0 else None
            create_max = row.producer_max_timestamp
            skew = (append_time - create_max) / 1000.0 if appended and create_max >= 0 and append_time >= 0 else None
            li = bucket_index(latency, APPEND_LATENCY_BUCKETS_S)
            si = bucket_index(skew, TIMESTAMP_SKEW_BUCKETS_S)
            key = (label, partition if bounded else -1, outcome, error, li, si)
            g = groups.get(key)
            if g is None:
                g = groups[key] = dict(
                    t=key[0], p=key[1], o=outcome, e=error, li=li, si=si, batches=0, records=0, appended_bytes=0,
                    record_errors=0, future_timestamps=0, clock_holds=0, log_end_offset=None, log_start_offset=None,
                    clock_ms=None, latency_sum=0.0, skew_sum=0.0,
                )
            g["batches"] += 1
            g["records"] += row.record_count if accepted else claimed_records(row.batch)
            if appended:
                g["appended_bytes"] += len(row.batch)
                g["future_timestamps"] += row.future_timestamps
                g["clock_holds"] += 1 if row.clock_held else 0
                if row.last_offset >= 0:
                    g["log_end_offset"] = _max(g["log_end_offset"], row.last_offset + 1)
            elif not accepted:
                g["record_errors"] += row.record_error_count  # all of them, also beyond the bounded list
            if accepted:
                g["log_start_offset"] = _max(g["log_start_offset"], row.log_start_offset)
            g["clock_ms"] = _max(g["clock_ms"], row.batch_time_ms)
            if latency is not None:
                g["latency_sum"] += latency
            if skew is not None:
                g["skew_sum"] += skew


def _max(current: int | None, value: int) -> int:
    return value if current is None else max(current, value)
