"""The gateway's log at INFO: one summary line per interval of micro-batches, each micro-batch's own line at DEBUG
and in `metrics_log_file` (sinks/metrics/log_summary.py, observer.py, metrics_log_file.py). Clocks are passed in."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sinks.batch_metrics import APPEND_LATENCY_BUCKETS_S
from sinks.metrics.gateway_metrics import BatchAggregate, GatewayMetrics
from sinks.metrics.log_summary import LogSummary, MicroBatchFigures, quantile_bound
from sinks.metrics.metrics_log_file import MetricsLogFile
from sinks.metrics.observer import MetricsObserver
from sinks.micro_batch import MicroBatchSummary

BOUNDS = len(APPEND_LATENCY_BUCKETS_S)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def latency(at_most: dict[float, int]) -> tuple[int, ...]:
    """Cumulative bucket counts of appends with the given latencies (seconds -> appends)."""
    return tuple(sum(n for s, n in at_most.items() if s <= bound) for bound in APPEND_LATENCY_BUCKETS_S)


def figures(appended: int = 0, records: int = 0, duplicate: int = 0, rejected: dict[str, int] | None = None,
            latencies: dict[float, int] | None = None) -> MicroBatchFigures:
    rejected = rejected or {}
    latencies = latencies or {}
    return MicroBatchFigures(
        batches={"appended": appended, "duplicate": duplicate, "rejected": sum(rejected.values())},
        rejected_by_error=rejected, records_appended=records, latency_count=sum(latencies.values()),
        latency_sum_s=sum(s * n for s, n in latencies.items()), latency_buckets=latency(latencies))


def test_no_line_within_the_interval_then_one_line_adding_it_up() -> None:
    summary = LogSummary(10.0, now=100.0)
    assert summary.add(figures(appended=3, records=30, latencies={0.2: 3}), 103.0) is None
    assert summary.add(figures(appended=1, records=5, duplicate=1, rejected={"INVALID_TIMESTAMP": 1},
                               latencies={0.4: 1}), 109.9) is None
    line = summary.add(figures(appended=1, records=15, rejected={"UNKNOWN_TOPIC_OR_PARTITION": 2},
                               latencies={0.2: 1}), 110.0)
    assert line == ("last 10.0 s: 3 micro-batch(es); batches 5 appended (50 records), 1 duplicate, 3 rejected "
                    "(INVALID_TIMESTAMP=1, UNKNOWN_TOPIC_OR_PARTITION=2); ingress to append p50 <= 0.25 s, "
                    "p99 <= 0.5 s, mean 0.24 s")
    # the next interval starts at that line, empty
    assert summary.add(figures(), 119.0) is None
    assert summary.add(figures(), 120.5) == ("last 10.5 s: 2 micro-batch(es); batches 0 appended (0 records), "
                                             "0 duplicate, 0 rejected; ingress to append -")


def test_a_micro_batch_after_a_quiet_spell_says_how_long_its_interval_was() -> None:
    summary = LogSummary(10.0, now=0.0)
    line = summary.add(figures(appended=1, records=1, latencies={0.05: 1}), 300.0)
    assert line is not None and line.startswith("last 300.0 s: 1 micro-batch(es); batches 1 appended (1 records)")


def test_quantile_bounds_come_from_the_histogram() -> None:
    cumulative = latency({0.1: 60, 0.5: 39, 2.0: 1})
    assert quantile_bound(0.5, cumulative, 100) == "<= 0.1 s"
    assert quantile_bound(0.99, cumulative, 100) == "<= 0.5 s"
    assert quantile_bound(1.0, cumulative, 100) == "<= 2 s"
    assert quantile_bound(0.99, latency({5000.0: 1}), 1) == "> 1800 s"  # beyond the last bound


def test_figures_of_a_micro_batch_add_its_groups_up() -> None:
    groups = [
        BatchAggregate("ct", 0, "appended", "NONE", batches=2, records=7, appended_bytes=700, latency_count=2,
                       latency_sum_s=0.3, latency_buckets=list(latency({0.1: 1, 0.2: 1}))),
        BatchAggregate("ct", 1, "appended", "NONE", batches=1, records=3, appended_bytes=300, latency_count=1,
                       latency_sum_s=0.5, latency_buckets=list(latency({0.5: 1}))),
        BatchAggregate("ct", 1, "duplicate", "NONE", batches=1, records=3),
        BatchAggregate("other", -1, "rejected", "UNKNOWN_TOPIC_OR_PARTITION", batches=2, records=9),
    ]
    f = MicroBatchFigures.of(groups, MicroBatchSummary(4, 3, 1000, 1, 6, 2))
    assert f.batches == {"appended": 3, "duplicate": 1, "rejected": 2}
    assert f.rejected_by_error == {"UNKNOWN_TOPIC_OR_PARTITION": 2}
    assert (f.records_appended, f.bytes_appended) == (10, 1000)  # rejected and duplicate records are not appended
    assert (f.responses, f.dead_letters, f.replayed_partitions) == (6, 2, 1)
    assert f.latency_count == 3 and f.latency_sum_s == pytest.approx(0.8)
    assert f.latency_buckets == latency({0.1: 1, 0.2: 1, 0.5: 1})


def metric_row(topic: str, outcome: str = "appended", error: str = "NONE", batches: int = 1, records: int = 10
               ) -> dict[str, object]:
    """An aggregate row as the sink's tasks send it (`sinks.batch_metrics.DecisionAggregates`)."""
    appended = outcome == "appended"
    return dict(t=topic, p=0 if appended else -1, o=outcome, e=error, li=2 if appended else -1, si=-1, batches=batches,
                records=records, appended_bytes=100 * batches if appended else 0, record_errors=0, future_timestamps=0,
                clock_holds=0, log_end_offset=None, log_start_offset=None, clock_ms=1_700_000_000_000,
                latency_sum=0.2 * batches if appended else 0.0, skew_sum=0.0)


def test_the_observer_logs_a_summary_per_interval_at_info_and_each_micro_batch_at_debug(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log_file = MetricsLogFile.open(tmp_path / "logs" / "metrics.jsonl")  # its folder made
    observer = MetricsObserver(GatewayMetrics({"ct": 2}), summary_interval_s=10.0, log_file=log_file, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="gateway.metrics"):
        for batch_id in range(30):  # a micro-batch every 0.5 s for 15 s
            clock.now = 0.5 * (batch_id + 1)
            rows = [metric_row("ct", batches=2)]
            if batch_id % 10 == 0:
                rows.append(metric_row("ct", "rejected", "INVALID_TIMESTAMP"))
            observer(batch_id, MicroBatchSummary(batch_id, 2, 200, 0, len(rows) + 1, len(rows) - 1, metric_rows=rows))
    assert observer.metrics.observer_failures._value.get() == 0
    info = [r.getMessage() for r in caplog.records if r.name == "gateway.metrics" and r.levelno == logging.INFO]
    assert info == ["last 10.0 s: 20 micro-batch(es); batches 40 appended (200 records), 0 duplicate, 2 rejected "
                    "(INVALID_TIMESTAMP=2); ingress to append p50 <= 0.25 s, p99 <= 0.25 s, mean 0.20 s"]
    debug = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.metrics"
             and r.levelno == logging.DEBUG]
    written = [json.loads(line) for line in log_file.path.read_text().splitlines()]
    assert [d["batch_id"] for d in debug] == [d["batch_id"] for d in written] == list(range(30))
    assert written[10]["rejected_by_error"] == {"INVALID_TIMESTAMP": 1} and written[10]["batches"]["appended"] == 2
    assert written[10]["dead_letters"] == 1 and "metrics_ms" in written[10]


def test_at_info_the_observer_writes_no_line_per_micro_batch(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    observer = MetricsObserver(GatewayMetrics({"ct": 2}), clock=clock)  # the default interval: 10 s
    with caplog.at_level(logging.INFO, logger="gateway.metrics"):
        for batch_id in range(100):  # three micro-batches a second, as `make run`'s demo
            clock.now = (batch_id + 1) / 3
            observer(batch_id, MicroBatchSummary(batch_id, 1, 100, 0, 1, 0, metric_rows=[metric_row("ct")]))
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.metrics"]
    assert len(lines) == 3 and all(line.startswith("last 10.0 s: 30 micro-batch(es)") for line in lines), lines


def test_the_metrics_log_file_refuses_a_path_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(OSError):
        MetricsLogFile.open(tmp_path / "a-file" / "metrics.jsonl")


def test_a_metrics_log_file_that_cannot_be_written_warns_once_per_streak(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_file = MetricsLogFile.open(tmp_path / "metrics.jsonl")
    log_file.path.unlink()
    log_file.path.mkdir()  # a directory where the file was: every append fails
    with caplog.at_level(logging.INFO, logger="gateway.metrics"):
        for i in range(5):
            log_file.write(f'{{"batch_id": {i}}}')
        log_file.path.rmdir()
        log_file.write('{"batch_id": 5}')
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO], caplog.text
    assert "cannot write the metrics log file" in caplog.records[0].getMessage()
    assert log_file.path.read_text() == '{"batch_id": 5}\n'
