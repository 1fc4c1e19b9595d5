"""The driver's side of the foreachBatch sink: what a micro-batch wrote reaches the observers as one merged
summary when its progress report arrives (after Spark committed it), and only then."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafka_cluster.security import KafkaCluster
from sinks.micro_batch import BATCH_ID_COLUMN, NO_ROWS, GatewaySink, MicroBatchSummary, batch_id_and_decisions
from sinks.partition_task import SinkConfig, TaskSummary
from sinks.registry_watcher import RegistryWatcher
from streaming.config import REPO_ROOT

SINK_CONFIG = SinkConfig(KafkaCluster("127.0.0.1:1"), Path("/nonexistent"), "in", "responses", "dlq", 1 << 20)
REGISTRY = RegistryWatcher(REPO_ROOT / "conf" / "topics.json")


def test_a_progress_report_reaches_the_observers_as_the_merged_summary_of_its_tasks() -> None:
    calls: list[tuple[int, MicroBatchSummary]] = []
    sink = GatewaySink(SINK_CONFIG, REGISTRY, [lambda b, s: calls.append((b, s))])
    rows = [{"t": "a", "p": 0}]
    sink.written(7, [TaskSummary(appended_batches=3, appended_bytes=300, responses=3, partitions=1),
                     TaskSummary(dead_letters=1, responses=1, metric_rows=rows, partitions=1),
                     TaskSummary()])  # a task of no target partition
    assert calls == []  # not before Spark committed the micro-batch
    sink.on_progress({"batchId": 7, "durationMs": {"addBatch": 250}})
    assert len(calls) == 1
    batch_id, summary = calls[0]
    assert batch_id == 7 and summary.batch_id == 7 and sink.last_summary is summary
    assert (summary.appended_batches, summary.appended_bytes, summary.responses, summary.dead_letters) == (3, 300, 4, 1)
    assert summary.partitions == 2 and summary.sink_seconds == 0.25 and summary.metric_rows == rows
    sink.on_progress({"batchId": 7, "durationMs": {"addBatch": 250}})  # reported once
    assert len(calls) == 1


def test_a_replayed_attempt_counts_once_and_a_report_without_writes_calls_nothing() -> None:
    calls: list[tuple[int, int]] = []
    sink = GatewaySink(SINK_CONFIG, REGISTRY, [lambda b, s: calls.append((b, s.appended_batches))])
    sink.written(3, [TaskSummary(appended_batches=5, partitions=1)])  # an attempt that failed before its commit ...
    sink.written(3, [TaskSummary(appended_batches=0, replayed_partitions=1, partitions=1)])  # ... and its replay
    sink.written(2, [TaskSummary(), TaskSummary()])  # tasks with no target partition: nothing to report
    sink.on_progress({"batchId": 1, "durationMs": {}})  # no data: nothing written
    sink.on_progress({"batchId": 2, "durationMs": {}})
    sink.on_progress({"batchId": 3, "durationMs": {}})
    assert calls == [(3, 0)]


def test_the_termination_is_waited_for() -> None:
    sink = GatewaySink(SINK_CONFIG, REGISTRY)
    assert not sink.wait_terminated(0)
    sink.on_terminated()
    assert sink.wait_terminated(0)


def test_the_product_reads_no_spark_internal_property() -> None:
    """The exactly-once key is foreachBatch's own batch id, not MicroBatchExecution's local property."""
    product = ("contract", "validators", "storage", "kafka_cluster", "streaming", "sinks", "front_door", "clients",
               "embedded")
    users = [str(f) for d in product for f in (REPO_ROOT / d).rglob("*.py") if "streaming.sql.batchId" in f.read_text()]
    assert users == []


def _tagged(batch_id: int, offsets: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"ingress_offset": offsets, BATCH_ID_COLUMN: [str(batch_id)] * len(offsets)})


def test_a_task_reads_the_micro_batch_id_from_its_rows_and_the_decisions_without_it() -> None:
    """foreachBatch's id rides beside the decisions in the sink's job (`micro_batch_job`); the task takes it
    apart from them before any decision is read."""
    empty = _tagged(9, [])
    batch_id, decisions = batch_id_and_decisions(iter([empty, _tagged(9, [0, 1]), _tagged(9, [2])]))
    assert batch_id == 9
    read = list(decisions)
    assert [b.schema.names for b in read] == [["ingress_offset"], ["ingress_offset"]]
    assert [o for b in read for o in b.column("ingress_offset").to_pylist()] == [0, 1, 2]
    assert batch_id_and_decisions(iter([empty]))[0] == NO_ROWS  # a task without rows appends nothing
    assert list(batch_id_and_decisions(iter([]))[1]) == []


def test_a_task_whose_rows_carry_two_micro_batch_ids_fails() -> None:
    _, decisions = batch_id_and_decisions(iter([_tagged(4, [0]), _tagged(5, [1])]))
    with pytest.raises(ValueError, match="micro-batch ids 4 and 5"):
        list(decisions)
