"""The sink's work for one target partition (`sinks.partition_task`): its accepted batches appended in
offset order and committed once per micro-batch, metric deltas for every row; a replayed micro-batch
stores nothing twice; no directory for a partition that only rejects; a batch that does not continue the
log fails the task."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from contract.decision_row import DecisionRow
from sinks.partition_task import SinkConfig, append_partition, run_partition
from sinks.storage.log_reader import read
from streaming.stage import IngressBatch, decide_group
from tests.decision_rows import decision_row
from validators.append_result import PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000
REGISTRY = TopicRegistry({"orders": topic_config("orders", 3, {}, {})})


def _decided(partition: int, count: int) -> list[DecisionRow]:
    """`count` accepted acks=0 batches of `orders-<partition>`, as the stage decides them."""
    items = [
        IngressBatch(ingress_partition=0, ingress_offset=partition * 1000 + i, ingress_timestamp_ms=NOW,
                     batch=build_record_batch([(NOW - 10, b"k%d" % i, b"v" * 50)] * 3), request_id=f"r{partition}-{i}",
                     client_id=None, acks=0, partition_header=str(partition))
        for i in range(count)
    ]
    rows, _ = decide_group("orders", partition, items, REGISTRY, PartitionState(), NOW)
    assert all(r.error_code == 0 for r in rows)
    return rows


def _config(root: Path) -> SinkConfig:
    # no message is sent (acks=0, nothing rejected): the task never needs this broker
    return SinkConfig("127.0.0.1:1", root, "ingress", "responses", "dlq", 1 << 20)


def test_a_partition_appended_committed_and_counted(tmp_path: Path) -> None:
    rows = _decided(2, 5)
    summary = run_partition(_config(tmp_path / "segments"), 7, rows, REGISTRY, time.perf_counter)
    assert (summary.appended_batches, summary.partitions_appended, summary.responses) == (5, 1, 0)
    assert summary.appended_bytes == sum(len(r.batch) for r in rows)
    stored = read(tmp_path / "segments", "orders", 2, 0, max_records=100)
    assert [r.offset for r in stored] == list(range(15))
    assert {m["p"]: m["batches"] for m in summary.metric_rows} == {2: 5}


def test_a_replayed_micro_batch_writes_nothing_twice(tmp_path: Path) -> None:
    config = _config(tmp_path / "segments")
    run_partition(config, 7, _decided(1, 4), REGISTRY, time.perf_counter)
    again = run_partition(config, 7, _decided(1, 4), REGISTRY, time.perf_counter)
    assert (again.appended_batches, again.replayed_partitions) == (0, 1)
    assert len(read(tmp_path / "segments", "orders", 1, 0, max_records=100)) == 12
    assert {m["p"]: m["batches"] for m in again.metric_rows} == {1: 4}  # its rows still count


def test_no_rows_no_work(tmp_path: Path) -> None:
    summary = run_partition(_config(tmp_path), 1, [], REGISTRY, time.perf_counter)
    assert summary.appended_batches == 0 and summary.metric_rows == []


def test_a_partition_that_only_rejects_gets_no_directory(tmp_path: Path) -> None:
    # rejected batches and idempotent duplicates are not stored: such a partition is never opened
    rejected = decision_row(topic="orders", partition=1, error_code=87, error_name="INVALID_RECORD",
                            error_message="bad", base_offset=-1, last_offset=-1)
    duplicate = decision_row(topic="orders", partition=1, duplicate=True)
    assert append_partition(tmp_path / "segments", 3, [rejected, duplicate], REGISTRY) is None
    assert not (tmp_path / "segments").exists()


def test_a_batch_that_does_not_continue_the_log_fails_the_task(tmp_path: Path) -> None:
    rows = _decided(0, 3)
    with pytest.raises(ValueError, match="does not continue the log end offset"):
        run_partition(_config(tmp_path / "segments"), 3, [rows[0], rows[2], rows[1]], REGISTRY, time.perf_counter)
