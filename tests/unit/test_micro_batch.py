"""The stage's sink work takes its micro-batch id from Spark's local property; outside a task of a streaming
micro-batch there is none, and asking fails with a message rather than appending under a wrong id. The
driver's side of the sink merges a progress report's observed summaries for the observers."""

from __future__ import annotations

from pathlib import Path

import pytest

from sinks.kafka_security import KafkaCluster
from sinks.micro_batch import (
    BATCH_ID_PROPERTY,
    SUMMARIES_FIELD,
    SUMMARIES_METRIC,
    GatewaySink,
    MicroBatchSummary,
    micro_batch_id,
)
from sinks.partition_task import SinkConfig, TaskSummary


def test_outside_a_streaming_task_there_is_no_batch_id() -> None:
    assert BATCH_ID_PROPERTY == "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
    with pytest.raises(RuntimeError, match="not in a task of a streaming micro-batch"):
        micro_batch_id()

SINK_CONFIG = SinkConfig(KafkaCluster("127.0.0.1:1"), Path("/nonexistent"), "in", "responses", "dlq", 1 << 20)


def _observed(*summaries: TaskSummary) -> dict:
    return {SUMMARIES_METRIC: {SUMMARIES_FIELD: [s.to_json() for s in summaries]}}


def test_a_progress_report_reaches_the_observers_as_the_merged_summary_of_its_tasks() -> None:
    calls: list[tuple[int, MicroBatchSummary]] = []
    sink = GatewaySink(SINK_CONFIG, [lambda b, s: calls.append((b, s))])
    rows = [{"t": "a", "p": 0}]
    sink.on_progress({"batchId": 7, "durationMs": {"addBatch": 250},
                      "observedMetrics": _observed(TaskSummary(appended_batches=3, appended_bytes=300, responses=3),
                                                   TaskSummary(dead_letters=1, responses=1, metric_rows=rows))})
    assert len(calls) == 1
    batch_id, summary = calls[0]
    assert batch_id == 7 and summary.batch_id == 7 and sink.last_summary is summary
    assert (summary.appended_batches, summary.appended_bytes, summary.responses, summary.dead_letters) == (3, 300, 4, 1)
    assert summary.partitions == 2 and summary.sink_seconds == 0.25 and summary.metric_rows == rows


def test_a_report_without_summaries_calls_no_observer() -> None:
    calls: list[int] = []
    sink = GatewaySink(SINK_CONFIG, [lambda b, s: calls.append(b)])
    sink.on_progress({"batchId": 1, "durationMs": {}})  # no data: no observed metrics at all
    sink.on_progress({"batchId": 2, "durationMs": {}, "observedMetrics": _observed()})
    assert calls == [] and sink.last_summary is None


def test_the_termination_is_waited_for() -> None:
    sink = GatewaySink(SINK_CONFIG)
    assert not sink.wait_terminated(0)
    sink.on_terminated()
    assert sink.wait_terminated(0)
