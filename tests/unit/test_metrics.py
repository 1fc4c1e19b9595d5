"""The gateway's metrics without Spark: naming rules, bounded labels, the aggregated histograms, the
storage scan, progress reports into metrics, and the exporter + `status` rendering over real HTTP."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sinks.metrics.collectors import AggregatedHistogram, StorageCollector
from sinks.metrics.gateway_metrics import BatchAggregate, GatewayMetrics, ingress_lag
from sinks.metrics.health import Health
from sinks.metrics.log_summary import MicroBatchFigures
from sinks.metrics.observer import merge_aggregates, micro_batch_log
from sinks.metrics.server import parse_address, serve_metrics
from sinks.micro_batch import MicroBatchSummary
from streaming.status import fetch_health, fetch_samples, render, summarize
from validators.topic_config import TopicRegistry

TOPICS = {"ct": 2, "lat": 3}
ALLOWED_LABELS = {"topic", "outcome", "error", "partition", "reason", "phase", "le", "cause", "query", "version", "how"}


def fresh(segments_root: Path | None = None) -> GatewayMetrics:
    metrics = GatewayMetrics(TOPICS, segments_root, create_time_topics=["ct"])
    metrics.describe_query("gateway", "0.9.0")
    return metrics


def families(m: GatewayMetrics) -> dict:
    return {f.name: f for f in text_string_to_metric_families(generate_latest(m.registry).decode())}


def value(m: GatewayMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def aggregate(topic: str, partition: int = 0, outcome: str = "appended", error: str = "NONE", **kw) -> BatchAggregate:
    return BatchAggregate(topic=topic, partition=partition, outcome=outcome, error=error, **kw)


def test_names_follow_prometheus_conventions(tmp_path: Path) -> None:
    m = fresh(tmp_path)
    fams = families(m)
    assert fams, "nothing exported"
    for name, fam in fams.items():
        assert name.startswith("gateway_"), name
        assert not re.search(r"_(ms|millis|milliseconds|kb|mb|minutes|hours)(_|$)", name), f"{name}: not a base unit"
        for s in fam.samples:
            assert set(s.labels) <= ALLOWED_LABELS, f"{s.name}: unbounded label in {set(s.labels)}"
            if fam.type == "counter":
                assert s.name.endswith("_total") or s.name.endswith("_created"), s.name
        if fam.type == "gauge":
            assert not name.endswith("_total"), f"{name}: a gauge named like a counter"
        if "seconds" in name or "latency" in name or "duration" in name:
            assert "_seconds" in name, name
    for name in m.metric_names():
        assert name.startswith("gateway_"), name


def test_known_topics_start_at_zero_and_unknown_topics_fold_into_other() -> None:
    m = fresh()
    assert value(m, "gateway_batches_total", topic="ct", outcome="appended", error="NONE") == 0
    assert value(m, "gateway_retention_deleted_segments_total", topic="lat", reason="retention_ms") == 0
    assert value(m, "gateway_partition_logs_opened_total", how="kept") == 0
    summary = MicroBatchSummary(batch_id=5, appended_batches=1, appended_bytes=100, replayed_partitions=0,
                                responses=4, dead_letters=3, logs_opened=2, logs_kept=7)
    m.record_micro_batch(5, [
        aggregate("ct", 1, batches=1, records=3, appended_bytes=100, log_end_offset=3, log_start_offset=0,
                  latency_count=1, latency_sum_s=0.2, latency_buckets=[0, 0, 1] + [1] * 9),
        aggregate("evil-topic-1", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION", batches=2, records=2),
        aggregate("ct", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION", batches=1),  # partition 7 of ct
    ], summary, clock_ms=1_700_000_000_000)
    assert value(m, "gateway_batches_total", topic="other", outcome="rejected", error="UNKNOWN_TOPIC_OR_PARTITION") == 2
    assert value(m, "gateway_batches_total", topic="ct", outcome="rejected", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert value(m, "gateway_records_total", topic="ct", outcome="appended", error="NONE") == 3
    assert value(m, "gateway_appended_bytes_total", topic="ct") == 100
    assert value(m, "gateway_log_end_offset", topic="ct", partition="1") == 3
    assert value(m, "gateway_log_end_offset", topic="ct", partition="-1") is None  # unbounded: no gauge
    assert value(m, "gateway_responses_published_total") == 4
    assert value(m, "gateway_dead_letters_published_total") == 3
    assert value(m, "gateway_partition_logs_opened_total", how="afresh") == 2
    assert value(m, "gateway_partition_logs_opened_total", how="kept") == 7
    assert value(m, "gateway_last_micro_batch_id") == 5
    assert value(m, "gateway_last_micro_batch_clock_seconds") == 1_700_000_000
    assert value(m, "gateway_append_latency_seconds_bucket", topic="ct", le="0.1") == 0
    assert value(m, "gateway_append_latency_seconds_bucket", topic="ct", le="0.25") == 1
    assert value(m, "gateway_append_latency_seconds_count", topic="ct") == 1
    assert all(s.labels.get("topic") in {"ct", "lat", "other", None}
               for f in families(m).values() for s in f.samples)


def test_offset_gauges_never_go_back_on_a_replayed_micro_batch() -> None:
    m = fresh()
    m.record_micro_batch(1, [aggregate("lat", 2, batches=1, log_end_offset=10, log_start_offset=0)])
    m.record_micro_batch(0, [aggregate("lat", 2, batches=1, log_end_offset=4, log_start_offset=0)])  # replay
    assert value(m, "gateway_log_end_offset", topic="lat", partition="2") == 10
    m.record_micro_batch(2, [aggregate("lat", 2, batches=1, log_end_offset=12, log_start_offset=5)])
    assert value(m, "gateway_log_end_offset", topic="lat", partition="2") == 12
    assert value(m, "gateway_log_start_offset", topic="lat", partition="2") == 5


def test_a_micro_batch_of_many_groups_exports_what_its_groups_one_by_one_do() -> None:
    """The groups are folded by their labels before the series are touched: the same samples as recording each
    group in a micro-batch of its own (partitions of one topic, other outcomes and errors, an unknown topic)."""
    lat = [0] * 12
    groups = [
        aggregate("lat", 0, batches=2, records=6, appended_bytes=300, future_timestamps=1, log_end_offset=7,
                  log_start_offset=0, latency_count=2, latency_sum_s=0.3, latency_buckets=[0, 1, *[2] * 10]),
        aggregate("lat", 1, batches=1, records=3, appended_bytes=100, clock_holds=1, log_end_offset=3,
                  log_start_offset=0, latency_count=1, latency_sum_s=0.2, latency_buckets=[0, 0, *[1] * 10]),
        aggregate("lat", 2, outcome="rejected", error="CORRUPT_MESSAGE", batches=1, records=2, record_errors=2,
                  latency_buckets=lat),
        aggregate("ct", 1, batches=1, records=1, appended_bytes=50, log_end_offset=1, log_start_offset=0,
                  skew_count=1, skew_sum_s=-2.0, skew_buckets=[0, 0, 0, 0, 1, *[1] * 9]),
        aggregate("nope", -1, outcome="rejected", error="UNKNOWN_TOPIC_OR_PARTITION", batches=3, records=3),
    ]
    together, alone = fresh(), fresh()
    together.record_micro_batch(5, groups)
    for g in groups:
        alone.record_micro_batch(5, [g])
    def samples(m: GatewayMetrics) -> dict:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families(m).values() for s in f.samples
                if f.name != "gateway_micro_batches" and not s.name.endswith("_created")}
    assert samples(together) == pytest.approx(samples(alone))
    assert value(together, "gateway_batches_total", topic="lat", outcome="appended", error="NONE") == 3
    assert value(together, "gateway_log_end_offset", topic="lat", partition="1") == 3


def test_aggregation_rows_fold_into_groups_with_cumulative_buckets() -> None:
    def row(li: int, si: int, n: int, **kw) -> dict:
        base = dict(t="ct", p=0, o="appended", e="NONE", li=li, si=si, batches=n, records=3 * n, appended_bytes=100 * n,
                    record_errors=0, future_timestamps=0, clock_holds=0, log_end_offset=None, log_start_offset=0,
                    clock_ms=1000, latency_sum=0.0, skew_sum=0.0)
        return {**base, **kw}

    rows = [
        row(0, 5, 2, latency_sum=0.05, skew_sum=0.0, log_end_offset=6),  # 2 batches: latency <= 0.05 s, skew <= 0
        row(3, 6, 1, latency_sum=0.4, skew_sum=0.5, log_end_offset=9, clock_ms=2000),
        row(12, 14, 1, latency_sum=4000.0, skew_sum=10 ** 6),  # beyond the last bounds: only +Inf
        row(-1, -1, 4, o="rejected", e="INVALID_TIMESTAMP", records=12, appended_bytes=0, record_errors=5),
    ]
    groups, clock = merge_aggregates(rows, 12, 14)
    assert clock == 2000
    by_key = {(g.outcome, g.error): g for g in groups}
    ok = by_key[("appended", "NONE")]
    assert (ok.batches, ok.records, ok.appended_bytes, ok.log_end_offset) == (4, 12, 400, 9)
    assert ok.latency_count == 4 and ok.latency_sum_s == pytest.approx(4000.45)
    assert ok.latency_buckets == [2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]
    assert ok.skew_count == 4 and ok.skew_buckets == [0] * 5 + [2] + [3] * 8
    bad = by_key[("rejected", "INVALID_TIMESTAMP")]
    assert (bad.batches, bad.records, bad.record_errors, bad.latency_count, bad.skew_count) == (4, 12, 5, 0, 0)


def test_aggregated_histogram_exposes_cumulative_buckets() -> None:
    h = AggregatedHistogram("gateway_test_seconds", "test", ["topic"], [1.0, 5.0])
    h.init_series("a")
    h.add(["a"], [1, 3], 4, 12.5)  # 1 <= 1 s, 3 <= 5 s, 4 in all
    h.add(["a"], [0, 1], 1, 2.0)
    (family,) = h.collect()
    samples = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    assert samples[("gateway_test_seconds_bucket", "1.0")] == 1
    assert samples[("gateway_test_seconds_bucket", "5.0")] == 4
    assert samples[("gateway_test_seconds_bucket", "+Inf")] == 5
    assert samples[("gateway_test_seconds_count", None)] == 5
    assert samples[("gateway_test_seconds_sum", None)] == 14.5
    with pytest.raises(ValueError):
        h.add(["a"], [1], 1, 0.0)
    with pytest.raises(ValueError):
        AggregatedHistogram("gateway_bad_seconds", "x", [], [5.0, 1.0])


def test_timestamp_skew_has_negative_buckets_and_no_sum() -> None:
    m = fresh()
    buckets = m.timestamp_skew.buckets
    ahead = [1 if b >= -3600 else 0 for b in buckets]  # one batch whose CreateTime is an hour ahead
    m.record_micro_batch(0, [aggregate("ct", 0, batches=1, skew_count=1, skew_sum_s=-3600.0, skew_buckets=ahead)])
    assert value(m, "gateway_timestamp_skew_seconds_bucket", topic="ct", le="-3600.0") == 1
    assert value(m, "gateway_timestamp_skew_seconds_bucket", topic="ct", le="+Inf") == 1
    # OpenMetrics: no _sum (and so no _count) for histograms with negative buckets
    assert value(m, "gateway_timestamp_skew_seconds_sum", topic="ct") is None
    assert "gateway_timestamp_skew_seconds_sum" not in m.metric_names()
    assert "gateway_append_latency_seconds_sum" in m.metric_names()


def test_storage_scan_counts_segments_and_bytes_per_topic(tmp_path: Path) -> None:
    def segment(directory: str, base: int, size: int) -> None:
        d = tmp_path / directory
        d.mkdir(exist_ok=True)
        (d / f"{base:020d}.log").write_bytes(b"x" * size)
        (d / f"{base:020d}.index").write_bytes(b"i" * 8)  # not a segment: not counted

    segment("ct-0", 0, 100)
    segment("ct-0", 10, 50)
    segment("ct-1", 0, 7)
    segment("my-topic-0", 0, 5)  # not in the registry
    segment("ct-9", 0, 3)  # partition beyond the configured count
    (tmp_path / "not-a-partition").mkdir()
    collector = StorageCollector(tmp_path, TOPICS)
    assert collector.scan() == {"ct": (3, 157), "lat": (0, 0), "other": (2, 8)}
    m = fresh(tmp_path)
    assert value(m, "gateway_log_segments", topic="ct") == 3
    assert value(m, "gateway_log_size_bytes", topic="other") == 8
    assert value(m, "gateway_log_segments", topic="lat") == 0
    assert StorageCollector(tmp_path / "missing", TOPICS).scan() == {"ct": (0, 0), "lat": (0, 0)}


# A progress report as Spark 4.0 writes it (StreamingQueryProgress.json), trimmed to what matters.
PROGRESS = {
    "id": "1d1c6f0e-0000-0000-0000-000000000000", "runId": "2e2c6f0e-0000-0000-0000-000000000000",
    "name": "gateway", "timestamp": "2026-01-02T03:04:05.678Z", "batchId": 17, "batchDuration": 1234,
    "numInputRows": 40, "inputRowsPerSecond": 20.0, "processedRowsPerSecond": "NaN",
    "durationMs": {"addBatch": 900, "getBatch": 3, "latestOffset": 10, "queryPlanning": 50, "triggerExecution": 1234,
                   "walCommit": 20},
    "stateOperators": [{"operatorName": "applyInPandasWithState", "numRowsTotal": 6, "numRowsUpdated": 2,
                        "memoryUsedBytes": 4096}],
    "sources": [{
        "description": "KafkaV2[Subscribe[gateway.ingress]]",
        "startOffset": '{"gateway.ingress":{"0":10,"1":20}}',
        "endOffset": '{"gateway.ingress":{"0":30,"1":40}}',
        "latestOffset": '{"gateway.ingress":{"0":35,"1":40}}',
        "numInputRows": 40,
    }],
    "sink": {"description": "ForeachBatchSink"},
}


def test_progress_reports_become_rates_duration_state_and_lag() -> None:
    m = fresh()
    figures = m.record_progress(PROGRESS, "gateway.ingress")
    assert figures["batch_id"] == 17 and figures["ingress_lag"] == 5
    assert value(m, "gateway_progress_batch_id") == 17
    assert value(m, "gateway_progress_timestamp_seconds") == pytest.approx(1767323045.678)
    assert value(m, "gateway_micro_batch_duration_seconds_count") == 1
    assert value(m, "gateway_micro_batch_duration_seconds_sum") == pytest.approx(1.234)
    assert value(m, "gateway_micro_batch_phase_duration_seconds", phase="addBatch") == pytest.approx(0.9)
    assert value(m, "gateway_micro_batch_phase_duration_seconds", phase="commitOffsets") == 0
    assert value(m, "gateway_ingress_messages_total") == 40
    assert value(m, "gateway_input_messages_per_second") == 20
    assert value(m, "gateway_processed_messages_per_second") == 0  # NaN (no time elapsed) is not exported
    assert value(m, "gateway_state_rows") == 6
    assert value(m, "gateway_state_memory_bytes") == 4096
    assert value(m, "gateway_ingress_lag_messages", partition="0") == 5
    assert value(m, "gateway_ingress_lag_messages", partition="1") == 0
    assert all(math.isfinite(s.value) for f in families(m).values() for s in f.samples)


def test_ingress_lag_reads_only_the_ingress_topic() -> None:
    sources = [{"endOffset": {"in": {"0": 3}, "x": {"0": 0}}, "latestOffset": '{"in":{"0":7,"1":2},"x":{"0":9}}'},
               {"endOffset": None, "latestOffset": None}]
    assert ingress_lag(sources, "in") == {0: 4, 1: 2}
    assert ingress_lag(sources) == {0: 13, 1: 2}
    assert ingress_lag([{"endOffset": "not json", "latestOffset": "{}"}]) == {}


def test_retention_deletions_are_counted_by_reason(tmp_path: Path) -> None:
    m = fresh()
    m.record_retention_deletion("ct", "retention_max_eventtime_ms", segments=2, size_bytes=2048)
    m.record_retention_deletion("someone-else", "made-up", segments=1)
    assert value(m, "gateway_retention_deleted_segments_total", topic="ct", reason="retention_max_eventtime_ms") == 2
    assert value(m, "gateway_retention_deleted_bytes_total", topic="ct", reason="retention_max_eventtime_ms") == 2048
    assert value(m, "gateway_retention_deleted_segments_total", topic="other", reason="other") == 1
    assert value(m, "gateway_retention_deleted_segments_total", topic="ct", reason="retention_ms") == 0


def test_for_registry_takes_topics_partitions_and_timestamp_types() -> None:
    registry = TopicRegistry.from_json({"topics": {
        "a": {"partitions": 4, "configs": {"message.timestamp.type": "CreateTime"}},
        "b": {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime"}},
    }})
    m = GatewayMetrics.for_registry(registry)
    assert m.topics == {"a": 4, "b": 1}
    assert value(m, "gateway_timestamp_skew_seconds_bucket", topic="a", le="+Inf") == 0
    assert value(m, "gateway_timestamp_skew_seconds_bucket", topic="b", le="+Inf") is None
    assert m.partition_bounded("a", 3) and not m.partition_bounded("a", 4) and not m.partition_bounded("zz", 0)


def test_a_reloaded_registry_gives_new_topics_their_own_labels(tmp_path: Path) -> None:
    def registry(**topics: int) -> TopicRegistry:
        return TopicRegistry.from_json({"topics": {t: {"partitions": n, "configs": {}} for t, n in topics.items()}})

    m = GatewayMetrics.for_registry(registry(a=1), tmp_path)
    assert m.topic_label("b") == "other"
    m.set_registry(registry(a=1, b=2))
    assert m.topic_label("b") == "b" and m.partition_bounded("b", 1)
    assert value(m, "gateway_batches_total", topic="b", outcome="appended", error="NONE") == 0
    assert value(m, "gateway_log_segments", topic="b") == 0  # the storage scan knows it too


def test_micro_batch_log_line_is_json_with_the_batch_id() -> None:
    line = micro_batch_log(9, MicroBatchFigures.of([
        aggregate("ct", batches=2, records=5, appended_bytes=70),
        aggregate("other", -1, "rejected", "INVALID_TOPIC_EXCEPTION", batches=1)]))
    doc = json.loads(json.dumps(line))
    assert doc["batch_id"] == 9 and doc["event"] == "micro_batch"
    assert doc["batches"] == {"appended": 2, "rejected": 1}
    assert doc["rejected_by_error"] == {"INVALID_TOPIC_EXCEPTION": 1}
    assert doc["records_appended"] == 5 and doc["bytes_appended"] == 70


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:9108") == ("127.0.0.1", 9108)
    assert parse_address(":9108") == ("0.0.0.0", 9108)
    assert parse_address("[::1]:9108") == ("::1", 9108)
    with pytest.raises(ValueError):
        parse_address("localhost")


def test_exporter_serves_the_registry_and_status_renders_it(tmp_path: Path) -> None:
    m = fresh(tmp_path)
    m.set_query_active(True)
    m.record_progress(PROGRESS, "gateway.ingress")
    m.record_micro_batch(17, [
        aggregate("ct", 0, batches=3, records=9, appended_bytes=3000, log_end_offset=9, log_start_offset=0),
        aggregate("ct", -1, "rejected", "INVALID_TIMESTAMP", batches=2, record_errors=4),
        aggregate("other", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION", batches=1),
    ], MicroBatchSummary(17, 3, 3000, 0, 6, 3), clock_ms=1_767_323_045_000)
    health = Health()
    health.set(ready=False, detail="standby: waiting for the active driver (pid 7 on host-a)")
    server = serve_metrics(m, "127.0.0.1:0", health)
    try:
        samples = fetch_samples(server.url)
        standby = fetch_health(server.url)  # a 503 with its reason
    finally:
        server.stop()
    assert standby == {"live": True, "ready": False, "detail": "standby: waiting for the active driver (pid 7 on host-a)"}
    assert fetch_health(server.url) is None  # stopped: nothing answers
    assert "driver           standby: waiting for the active driver (pid 7 on host-a)" in render(
        server.url, summarize(samples), None, None, None, "gateway.responses", standby)
    assert not any(s.name.endswith("_created") for s in samples)
    status = summarize(samples)
    assert status["query_active"] and status["last_micro_batch_id"] == 17
    assert status["ingress_lag"] == {"total": 5, "by_partition": {"0": 5, "1": 0}}
    assert status["topics"]["ct"] == {"appended": 3, "duplicate": 0, "rejected": 2, "records": 9, "bytes": 3000,
                                      "errors": {"INVALID_TIMESTAMP": 2}}
    assert status["topics"]["other"]["errors"] == {"UNKNOWN_TOPIC_OR_PARTITION": 1}
    assert status["topics"]["lat"]["appended"] == 0  # registry topics are listed before their first batch
    errors = [{"timestamp_ms": 1_767_323_045_000, "topic": "ct", "partition": 0, "error_name": "INVALID_TIMESTAMP",
               "error_code": 32, "request_id": "r-1", "error_message": "Timestamp 1 of message with offset 0 is out of range"}]
    text = render(server.url, status, None, errors, None, "gateway.responses")
    assert "query            running; last micro-batch 17" in text
    assert "ingress lag      5 messages (p0 5, p1 0)" in text
    assert "published        6 responses, 3 dead letters in 1 micro-batches" in text
    assert re.search(r"^ct\s+3\s+9\s+2\.9 KiB\s+0\s+2\s+INVALID_TIMESTAMP=2$", text, re.M), text
    assert "ct-0  INVALID_TIMESTAMP (32)  request r-1  Timestamp 1 of message" in text
    down = render("http://127.0.0.1:1/metrics", None, "Connection refused", None, "no broker", "gateway.responses")
    assert "not reachable: Connection refused" in down and "recent errors    unavailable: no broker" in down


def test_health_probes_beside_the_metrics(tmp_path) -> None:
    import json as _json
    import urllib.error
    import urllib.request

    from sinks.metrics.health import Health

    health = Health()
    server = serve_metrics(GatewayMetrics({"t": 1}, tmp_path), "127.0.0.1:0", health)

    def get(path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(server.base_url + path, timeout=10) as r:
                return r.status, _json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _json.loads(e.read())

    try:
        assert get("/healthz") == (200, {"live": True, "ready": False, "detail": "starting"})
        assert get("/readyz")[0] == 503
        health.set(ready=True, detail="query running")
        assert get("/readyz") == (200, {"live": True, "ready": True, "detail": "query running"})
        health.set(live=False, ready=False, detail="failed: LogStateMismatchError")
        assert get("/healthz")[0] == 503 and get("/readyz")[0] == 503
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert b"gateway_query_restarts_total" in r.read()
    finally:
        server.stop()
