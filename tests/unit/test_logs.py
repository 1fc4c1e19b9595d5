"""Logs an operator can live with: one format in every process, and the KIP-937 warning
about records far ahead of the clock throttled per topic-partition."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from streaming import stage
from streaming.logs import LOG_FORMAT, ThrottledWarning
from streaming.stage import IngressBatch, decide_group
from validators.append_result import PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicConfig, TopicRegistry

NOW = 1_700_000_000_000
HOUR = 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_throttled_warning_logs_first_then_one_summary_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    throttle = ThrottledWarning(logging.getLogger("test.throttle"), "ahead", interval_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        assert throttle.warn("t-0", 3, "t-0: first")
        assert throttle.warn("t-1", 1, "t-1: first")  # each key on its own
        clock.now = 10
        assert not any(throttle.warn("t-0", 2, f"t-0: #{i}") for i in range(500))
        clock.now = 61
        assert throttle.warn("t-0", 2, "t-0: latest")
        assert not throttle.warn("t-0", 2, "t-0: after the summary")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all(r.levelno == logging.WARNING for r in caplog.records)
    assert lines[0].startswith("t-0: first") and lines[1].startswith("t-1: first")
    assert lines[2] == "t-0: 501 more batch(es), 1002 record(s) ahead in the last 61 s; latest: t-0: latest"


def future_batch(offset: int) -> IngressBatch:
    data = build_record_batch([(NOW + 2 * HOUR, b"k", b"v"), (NOW, b"k", b"v")])
    return IngressBatch(0, offset, NOW, data, f"r{offset}", None, -1, "0")


def test_stage_warns_once_per_partition_for_a_flood_of_future_batches(caplog, monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(stage, "future_timestamps",
                        ThrottledWarning(logging.getLogger("gateway.future_timestamps"), "ahead", 60, clock))
    registry = TopicRegistry({"t": TopicConfig(name="t", partitions=2, message_timestamp_after_max_ms=3 * HOUR)})
    with caplog.at_level(logging.WARNING, logger="gateway.future_timestamps"):
        rows, _ = decide_group("t", 0, [future_batch(i) for i in range(200)], registry, PartitionState(), NOW)
        decide_group("t", 1, [future_batch(0)], registry, PartitionState(), NOW)
    assert [r.future_timestamps for r in rows] == [1] * 200  # every record still counted (the metric)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"t-0: accepted 1 record(s) with a timestamp more than {HOUR} ms ahead of the broker "
                               f"time {NOW} (max timestamp {NOW + 2 * HOUR}), KIP-937")
    assert lines[1].startswith("t-1: accepted 1 record(s)")


def test_worker_logging_has_time_and_level() -> None:
    """A fresh interpreter (what a Spark Python worker is) gets the gateway format from the stage."""
    code = ("import logging; from streaming.logs import configure_logging; configure_logging(); "
            "logging.getLogger('gateway.x').warning('hello')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    line = done.stderr.strip()
    assert line.endswith(" WARNING gateway.x hello") and line[:4].isdigit(), line
    assert LOG_FORMAT.endswith("%(message)s")
