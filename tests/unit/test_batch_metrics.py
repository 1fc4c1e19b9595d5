"""Metric deltas computed in the sink's task (`sinks.batch_metrics`), without Spark: bounded labels,
outcomes, the counts a rejected header may claim, histogram buckets, and the fold on the driver."""

from __future__ import annotations

import json

from contract.decision_row import DecisionRow
from sinks.batch_metrics import (
    APPEND_LATENCY_BUCKETS_S,
    TIMESTAMP_SKEW_BUCKETS_S,
    aggregate_decisions,
    bucket_index,
    claimed_records,
)
from sinks.metrics.observer import merge_aggregates
from tests.decision_rows import decision_row
from validators.codec.record_batch import build_record_batch

TOPICS = {"ct": 2}
NOW = 1_700_000_000_000


def row(**kw) -> DecisionRow:
    return decision_row(**kw)


def test_bucket_index_is_prometheus_le() -> None:
    assert bucket_index(None, APPEND_LATENCY_BUCKETS_S) == -1
    assert bucket_index(0.05, APPEND_LATENCY_BUCKETS_S) == 0  # le="0.05" includes 0.05
    assert bucket_index(0.0501, APPEND_LATENCY_BUCKETS_S) == 1
    assert bucket_index(10 ** 6, APPEND_LATENCY_BUCKETS_S) == len(APPEND_LATENCY_BUCKETS_S)  # +Inf only
    assert bucket_index(-7200.0, TIMESTAMP_SKEW_BUCKETS_S) == 0


def test_claimed_records_reads_a_v2_header_and_is_capped_by_the_bytes() -> None:
    batch = build_record_batch([(NOW + i, b"k", b"v") for i in range(7)])
    assert claimed_records(batch) == 7
    lying = bytearray(batch[:61])
    lying[57:61] = (2 ** 32 - 1).to_bytes(4, "big")  # claims 4 billion records in 61 bytes
    assert claimed_records(bytes(lying) + b"\0" * 5) == 5
    assert claimed_records(b"garbage") == 0
    legacy = bytearray(batch)
    legacy[16] = 1
    assert claimed_records(bytes(legacy)) == 0


def test_rows_fold_into_bounded_groups() -> None:
    rejected = build_record_batch([(NOW + i, b"k", b"v") for i in range(4)])
    rows = [
        row(),  # appended, latency 0.2 s, skew 1 s
        row(last_offset=5, clock_held=True, future_timestamps=2, ingress_timestamp_ms=NOW - 150),
        row(duplicate=True, last_offset=1),
        row(error_code=32, error_name="INVALID_TIMESTAMP", record_count=0, batch=rejected, last_offset=-1,
            append_time_ms=-1, producer_max_timestamp=-1, log_start_offset=-1,
            record_errors=json.dumps([{"batch_index": 0, "message": "a"}, {"batch_index": 2, "message": "b"}])),
        row(topic="evil-1", partition=0, error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION", batch=b"",
            last_offset=-1, append_time_ms=-1, producer_max_timestamp=-1, log_start_offset=-1),
        row(partition=9, error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION", batch=b"", last_offset=-1,
            append_time_ms=-1, producer_max_timestamp=-1, log_start_offset=-1),
        row(topic=None, partition=None, error_code=17, error_name="INVALID_TOPIC_EXCEPTION", batch=b"",
            last_offset=-1, append_time_ms=-1, producer_max_timestamp=-1, log_start_offset=-1),
    ]
    groups, clock = merge_aggregates(aggregate_decisions(rows, TOPICS), len(APPEND_LATENCY_BUCKETS_S),
                                     len(TIMESTAMP_SKEW_BUCKETS_S))
    by_key = {(g.topic, g.partition, g.outcome, g.error): g for g in groups}
    assert clock == NOW
    appended = by_key[("ct", 0, "appended", "NONE")]
    assert (appended.batches, appended.records, appended.appended_bytes) == (2, 6, 200)
    assert (appended.clock_holds, appended.future_timestamps, appended.log_end_offset) == (1, 2, 6)
    assert appended.latency_count == 2 and abs(appended.latency_sum_s - 0.35) < 1e-9
    assert appended.latency_buckets[:3] == [0, 0, 2]  # both <= 0.25 s, neither <= 0.1 s
    assert appended.skew_count == 2 and appended.skew_buckets[TIMESTAMP_SKEW_BUCKETS_S.index(1.0)] == 2
    duplicate = by_key[("ct", 0, "duplicate", "NONE")]
    assert (duplicate.batches, duplicate.appended_bytes, duplicate.latency_count) == (1, 0, 0)
    bad_ts = by_key[("ct", 0, "rejected", "INVALID_TIMESTAMP")]
    assert (bad_ts.records, bad_ts.record_errors, bad_ts.log_start_offset) == (4, 2, None)
    assert ("other", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION") in by_key  # hostile names fold into "other"
    assert ("ct", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION") in by_key  # partition 9 of ct: no label
    assert ("other", -1, "rejected", "INVALID_TOPIC_EXCEPTION") in by_key
    assert sum(g.batches for g in groups) == len(rows)
