"""Observability end to end: the gateway's exporter, scraped by a real Prometheus server, answers every
PromQL expression of the Grafana dashboard, and its counters equal the traffic that was sent.

Real everything: Kafka broker, Spark query (available-now runs), the query listener, the metrics
observer of the sink, prometheus_client's HTTP exporter, and the Debian `prometheus` server (installed
by `prometheus_server.ensure_prometheus` when missing).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from sinks.metrics.gateway_metrics import GatewayMetrics
from sinks.metrics.observer import MetricsObserver
from sinks.metrics.server import serve_metrics
from sinks.registry_watcher import RegistryWatcher
from streaming.config import REPO_ROOT
from streaming.listener import GatewayListener
from streaming.query import start_gateway
from streaming.version import gateway_version
from tests.integration.gateway_io import create_gateway_topics, produce_batches, read_all, read_responses
from tests.integration.ports import free_port
from tests.integration.prometheus_server import PrometheusServer
from validators.topic_config import TopicRegistry

pytestmark = pytest.mark.integration

DASHBOARD = REPO_ROOT / "conf" / "grafana" / "dashboards" / "gateway.json"
HOUR_MS = 3_600_000
TOPICS = {
    "defaults": {"log.message.timestamp.after.max.ms": str(HOUR_MS)},
    "topics": {
        "ct": {"partitions": 2, "configs": {"message.timestamp.type": "CreateTime"}},
        "lat": {"partitions": 2, "configs": {"message.timestamp.type": "LogAppendTime"}},
        # accepts CreateTimes up to two days ahead: records > 1 h ahead are accepted and counted (KIP-937)
        "future": {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime",
                                                "message.timestamp.after.max.ms": str(48 * HOUR_MS)}},
    },
}
# Grafana's variables, as a dashboard would expand them over a window covering the whole test.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "5m", "$__range": "5m", "$topic": ".*"}


def batch(timestamps: list[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=b"k", value=f"v{i}".encode(), headers=[])
    return bytes(builder.build())


def run_available_now(spark, config, observer: MetricsObserver) -> dict:
    query, sink = start_gateway(spark, config, available_now=True, observers=[observer])
    query.awaitTermination()
    assert query.exception() is None
    assert sink.wait_terminated(60), "the query's termination never reached its sink's listener"
    return query.lastProgress


def dashboard_expressions() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    out = []
    for panel in doc["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out += [(p["title"], t["expr"]) for t in p.get("targets", []) if t.get("expr")]
    return out


def expand(expr: str) -> str:
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unexpanded Grafana variable in {expr}"
    return expr


def by(prom: PrometheusServer, expr: str, *labels: str) -> dict:
    return {tuple(s["metric"].get(label, "") for label in labels) if len(labels) > 1 else s["metric"].get(labels[0], ""):
            s["value"] for s in prom.query(expr)}


def scalar(prom: PrometheusServer, expr: str) -> float:
    result = prom.query(expr)
    assert len(result) == 1, f"{expr}: {result}"
    return result[0]["value"]


def test_prometheus_scrapes_the_gateway_and_answers_every_dashboard_panel(spark, gateway_config, tmp_path: Path) -> None:
    topics_file = tmp_path / "observability-topics.json"
    topics_file.write_text(json.dumps(TOPICS))
    # Small triggers: several micro-batches per run, so durations, rates and lag have more than one report.
    config = gateway_config.with_overrides(topics_file=str(topics_file), max_offsets_per_trigger=8,
                                           metrics_address=f"127.0.0.1:{free_port()}")
    create_gateway_topics(config)

    metrics = GatewayMetrics.for_registry(TopicRegistry.load(topics_file), config.path(config.segments_root))
    metrics.describe_query(config.query_name, gateway_version())  # `gateway status` reads only its query's
    exporter = serve_metrics(metrics, config.metrics_address)
    listener = GatewayListener(metrics, config.query_name, config.ingress_topic)
    spark.streams.addListener(listener)
    observer = MetricsObserver(metrics, RegistryWatcher(topics_file).current)  # as `streaming run` wires it
    prom = PrometheusServer(tmp_path / "prometheus", [config.metrics_address])
    try:
        prom.start()
        # the shipped scrape config is valid for the very Prometheus the test runs
        check = subprocess.run([prom.promtool(), "check", "config", str(REPO_ROOT / "conf/prometheus/prometheus.yml")],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        # A baseline scrape before any traffic: rates start from the pre-initialised zeros.
        prom.wait_for_scrapes_after(time.time(), count=1)

        now = int(time.time() * 1000)
        good = batch([now])
        too_new = batch([now, now + 2 * HOUR_MS, now + 3 * HOUR_MS])  # 2 of 3 records outside after.max.ms
        round1 = [(t, p, batch([now - 60_000 + 10 * i for i in range(3)])) for t in ("ct", "lat") for p in (0, 1)
                  for _ in range(2)]
        round1 += [
            ("future", 0, batch([now + 2 * HOUR_MS, now + 2 * HOUR_MS + 5])),  # accepted, 2 future timestamps
            ("ct", 0, too_new), ("ct", 1, too_new),                       # INVALID_TIMESTAMP
            ("nope", 0, good), ("nope", 1, good), ("ct", 7, good),         # UNKNOWN_TOPIC_OR_PARTITION
            ("lat", 0, good[:-1] + b"\xff"), ("ct", 1, good[:-1] + b"\xff"),  # CORRUPT_MESSAGE (CRC)
            ("bad topic!", 0, good),                                       # INVALID_TOPIC_EXCEPTION
            ("ct", 1, b"\x00garbage"),  # no readable header: rejected (the validator names the reason)
        ]
        round2 = [("ct", 0, batch([now + i for i in range(5)])), ("lat", 1, batch([now + i for i in range(5)])),
                  ("ct", 1, too_new)]
        kinds = {"INVALID_TIMESTAMP": 3, "UNKNOWN_TOPIC_OR_PARTITION": 3, "CORRUPT_MESSAGE": 2,
                 "INVALID_TOPIC_EXCEPTION": 1}
        sent = produce_batches(config, round1)
        last = run_available_now(spark, config, observer)
        sent += produce_batches(config, round2)  # a restart from the checkpoint with more traffic
        last = run_available_now(spark, config, observer)

        # The listener hears Spark's events asynchronously: wait until it has the last run's final
        # progress and termination, then until Prometheus has scraped twice more (every series then has
        # at least two samples after the last change, so rate() and increase() see it).
        def listener_caught_up() -> bool:
            value = metrics.registry.get_sample_value
            return value("gateway_progress_batch_id") == last["batchId"] and value("gateway_query_active") == 0

        prom.wait_for(listener_caught_up, 60, "the query listener to report the last progress and termination")
        prom.wait_for_scrapes_after(time.time(), count=2)

        # ---- what was sent, as the gateway must have decided it
        responses = {r["request_id"]: r for r in read_responses(config)}
        assert len(responses) == len(sent)
        registry = TopicRegistry.load(topics_file)
        expected_batches: Counter = Counter()
        expected_records: Counter = Counter()
        appended_records: Counter = Counter()
        appended_bytes: Counter = Counter()
        end_offsets: Counter = Counter()
        for s in sent:
            r = responses[s.request_id]
            topic = s.topic if s.topic in registry.topics else "other"
            error = r["error_name"] or "NONE"
            outcome = "appended" if r["error_code"] == 0 else "rejected"
            expected_batches[(topic, outcome, error)] += 1
            if outcome == "appended":
                appended_records[topic] += r["record_count"]
                appended_bytes[topic] += len(s.batch)
                end_offsets[(s.topic, str(s.partition))] += r["record_count"]
            elif len(s.batch) >= 61:  # a readable v2 header: its record count
                expected_records[(topic, error)] += int.from_bytes(s.batch[57:61], "big")
        rejected_by_error = Counter()
        for (_, outcome, error), n in expected_batches.items():
            if outcome == "rejected":
                rejected_by_error[error] += n
        garbage = [responses[s.request_id] for s in sent if s.batch == b"\x00garbage"]
        assert len(garbage) == 1 and garbage[0]["error_code"] != 0
        assert rejected_by_error == Counter(kinds) + Counter([garbage[0]["error_name"]])

        # ---- counters equal the known traffic, read back through Prometheus
        assert by(prom, 'sum by (error) (gateway_batches_total{outcome="rejected"})', "error") == rejected_by_error
        assert by(prom, "sum by (topic, outcome, error) (gateway_batches_total) > 0", "topic", "outcome", "error") \
            == expected_batches
        assert by(prom, 'sum by (topic) (gateway_records_total{outcome="appended"}) > 0', "topic") == appended_records
        assert by(prom, 'sum by (topic, error) (gateway_records_total{outcome="rejected"}) > 0', "topic", "error") \
            == {k: v for k, v in expected_records.items() if v}
        assert by(prom, "gateway_appended_bytes_total > 0", "topic") == appended_bytes
        record_errors = sum(len(r["record_errors"]) for r in responses.values())
        assert record_errors == 3 * 2
        assert by(prom, "sum by (error) (gateway_record_errors_total)", "error") == {"INVALID_TIMESTAMP": record_errors}
        assert scalar(prom, "gateway_responses_published_total") == len(sent)
        assert scalar(prom, "gateway_dead_letters_published_total") == sum(rejected_by_error.values())
        assert len(read_all(config, config.dlq_topic)) == sum(rejected_by_error.values())
        assert by(prom, "gateway_log_end_offset", "topic", "partition") == end_offsets
        assert set(by(prom, "gateway_log_start_offset", "topic", "partition").values()) == {0}
        assert scalar(prom, 'gateway_future_timestamps_total{topic="future"}') == 2
        assert scalar(prom, "sum(gateway_clock_holds_total)") == 0  # each micro-batch clock is later than the last

        # histograms: one observation per appended batch (skew uses the producer's max CreateTime,
        # which the stage passes along also for LogAppendTime topics)
        appended_batches = {t: n for (t, o, _), n in expected_batches.items() if o == "appended"}
        assert by(prom, "gateway_append_latency_seconds_count > 0", "topic") == appended_batches
        skew_counts = by(prom, 'gateway_timestamp_skew_seconds_bucket{le="+Inf"} > 0', "topic")
        assert skew_counts == appended_batches
        # the future topic's batch is ~2 h ahead: the only negative skew, below -1 h
        assert by(prom, 'gateway_timestamp_skew_seconds_bucket{le="-3600.0"} > 0', "topic") == {"future": 1}
        assert scalar(prom, 'gateway_timestamp_skew_seconds_bucket{topic="ct", le="0.0"}') == 0

        # storage scan: one segment per partition that appended, its bytes = the appended batches
        segments = by(prom, "gateway_log_segments", "topic")
        assert segments == {"ct": 2, "lat": 2, "future": 1}
        assert by(prom, "gateway_log_size_bytes", "topic") == appended_bytes
        assert scalar(prom, "sum(gateway_retention_deleted_segments_total)") == 0

        # from the listener
        micro_batches = scalar(prom, "gateway_micro_batches_total")
        assert micro_batches >= 4  # > 8 messages per run with max 8 per trigger: at least 2 micro-batches each
        assert scalar(prom, "gateway_micro_batch_duration_seconds_count") == micro_batches
        assert scalar(prom, "gateway_ingress_messages_total") == len(sent)
        assert scalar(prom, "sum(gateway_ingress_lag_messages)") == 0
        assert scalar(prom, "gateway_state_rows") == len(end_offsets)  # one row per partition that appended
        assert scalar(prom, "gateway_state_memory_bytes") > 0
        assert scalar(prom, "gateway_last_micro_batch_id") == last["batchId"]
        assert scalar(prom, "gateway_query_active") == 0
        assert scalar(prom, "gateway_metrics_observer_failures_total") == 0

        # ---- every expression of every dashboard panel returns data
        # (the front door does not run here: its row's metrics are checked after real clients in test_front_door)
        expressions = [(t, e) for t, e in dashboard_expressions() if "gateway_front_door_" not in e]
        assert len(expressions) >= 20
        empty = []
        for title, expr in expressions:
            result = prom.query(expand(expr))
            if not result or not any(math.isfinite(s["value"]) for s in result):
                empty.append(f"{title}: {expr} -> {result}")
        assert not empty, "dashboard expressions without data:\n" + "\n".join(empty)
        # the dashboard's own rejection panels show the same numbers
        table = dict(expressions)["Batches by outcome and error since gateway start"]
        assert by(prom, expand(table) + " > 0", "topic", "outcome", "error") == expected_batches

        # ---- the terminal view, through the real command line
        conf = tmp_path / "gateway.json"
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        conf.write_text(json.dumps(fields))
        status = subprocess.run(
            [sys.executable, "-m", "streaming", "status", "--config", str(conf), "--metrics-url", exporter.url,
             "--errors", "5"],
            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
        )
        out = status.stdout
        assert status.returncode == 1, out + status.stderr  # reachable, query not active (available-now ended)
        assert "query            not active; last micro-batch" in out, out
        assert "ingress lag      0 messages" in out, out
        assert f"published        {len(sent)} responses, {sum(rejected_by_error.values())} dead letters" in out, out
        assert re.search(r"^ct\s+.*\bINVALID_TIMESTAMP=3\b", out, re.M), out
        assert re.search(r"^other\s+.*INVALID_TOPIC_EXCEPTION=1 UNKNOWN_TOPIC_OR_PARTITION=2", out, re.M), out
        recent = [line for line in out.splitlines() if line.startswith("  ") and "request" in line]
        assert len(recent) == 5 and all(any(e in line for e in rejected_by_error) for line in recent), out
    finally:
        spark.streams.removeListener(listener)
        exporter.stop()
        prom.stop()


def test_a_summary_per_interval_at_info_and_each_micro_batch_at_debug(spark, gateway_config, tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    topics_file = tmp_path / "quiet-topics.json"
    topics_file.write_text(json.dumps(TOPICS))
    config = gateway_config.with_overrides(topics_file=str(topics_file), max_offsets_per_trigger=2)
    create_gateway_topics(config)
    metrics = GatewayMetrics.for_registry(TopicRegistry.load(topics_file), config.path(config.segments_root))
    listener = GatewayListener(metrics, config.query_name, config.ingress_topic)
    spark.streams.addListener(listener)
    try:
        now = int(time.time() * 1000)
        produce_batches(config, [("ct", p, batch([now])) for p in (0, 1) for _ in range(4)])
        with caplog.at_level(logging.DEBUG, logger="gateway"):
            # each reading of the observer's clock (one per micro-batch) a second after the last: with a 2 s
            # interval, a summary every second micro-batch
            ticks = itertools.count()
            observer = MetricsObserver(metrics, summary_interval_s=2.0, clock=lambda: float(next(ticks)))
            progress = run_available_now(spark, config, observer)
            # the listener hears the last progress asynchronously: its DEBUG line is the sign it has
            until = time.monotonic() + 60
            while time.monotonic() < until and not any(
                    r.name == "gateway.progress" and f'"batch_id": {progress["batchId"]}' in r.getMessage()
                    for r in caplog.records):
                time.sleep(0.1)  # polling the captured records: the listener bus has no completion callback
    finally:
        spark.streams.removeListener(listener)
    micro_batches = progress["batchId"] + 1
    assert micro_batches >= 3, "several micro-batches (two ingress batches per trigger)"
    # the query's start and termination are INFO lines of their own, once per run
    per_batch = Counter(r.name for r in caplog.records if r.levelno == logging.INFO and r.name in
                        ("gateway.metrics", "gateway.sink", "gateway.progress")
                        and '"event": "query_' not in r.getMessage())
    assert per_batch == {"gateway.metrics": micro_batches // 2}, per_batch
    summaries = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.name == "gateway.metrics"]
    assert all(line.startswith("last 2.0 s: 2 micro-batch(es); batches ") for line in summaries), summaries
    debug = Counter(r.name for r in caplog.records if r.levelno == logging.DEBUG)
    assert debug["gateway.metrics"] == micro_batches and debug["gateway.sink"] == micro_batches, debug
    assert debug["gateway.progress"] >= micro_batches, debug
