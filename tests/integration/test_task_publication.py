"""A task's produce responses go out as its partitions are committed (`sinks.partition_task.run_task`), against the
real broker: the partitions committed early (their rows all in, while the task reads on) are answered before the
task reads its last rows, their commit records already naming the micro-batch; the others at the task's end, after
theirs; every request answered once. A failed early commit sends nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

import sinks.partition_task as partition_task
from contract.decision_row import DecisionRow
from contract.responses import decode_response
from embedded.local_kafka import LocalKafka
from kafka_cluster.admin import create_topics
from kafka_cluster.publisher import producer
from sinks.partition_task import SinkConfig, run_task
from storage.commit_record import read_commit
from storage.file_names import partition_dir
from streaming.stage import IngressBatch, decide_group
from validators.append_result import PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000
BATCH_ID = 7
REGISTRY = TopicRegistry({"orders": topic_config("orders", 4, {}, {})})


def _decided(partition: int, count: int) -> list[DecisionRow]:
    """`count` accepted acks=all batches of `orders-<partition>`, request ids `r<partition>-<i>`."""
    items = [
        IngressBatch(ingress_partition=0, ingress_offset=partition * 1000 + i, ingress_timestamp_ms=NOW,
                     batch=build_record_batch([(NOW - 10, b"k", b"v" * 50)]), request_id=f"r{partition}-{i}",
                     client_id=None, acks=-1, partition_header=str(partition))
        for i in range(count)
    ]
    rows, _ = decide_group("orders", partition, items, REGISTRY, PartitionState(), NOW)
    assert all(r.error_code == 0 for r in rows)
    return rows


def _answered(consumer: Consumer, expected: int) -> dict[str, int]:
    """Request id -> base offset of the next `expected` responses (within 30 s)."""
    answers: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while len(answers) < expected and time.monotonic() < deadline:
        for m in consumer.consume(100, timeout=0.5):
            assert m.error() is None, m.error()
            answers[m.key().decode()] = decode_response(m.value())["base_offset"]
    return answers


def _committed(root: Path, partition: int) -> bool:
    record = read_commit(partition_dir(root, "orders", partition))
    return record is not None and record.batch_id == BATCH_ID


def test_early_committed_partitions_are_answered_while_the_task_reads_on(
    kafka: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    responses, letters = f"responses-{uuid.uuid4().hex[:8]}", f"dlq-{uuid.uuid4().hex[:8]}"
    create_topics(kafka.cluster, [(responses, 2, {}), (letters, 1, {})])
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"test-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(responses, p, 0) for p in range(2)])
    root = tmp_path / "segments"
    decided = [_decided(p, 2) for p in range(4)]
    before_last: dict[str, int] = {}
    committed_then: list[bool] = []

    def reading() -> Iterator[list[DecisionRow]]:
        yield decided[0] + decided[1] + decided[2][:1]  # partitions 0 and 1 complete: committed early
        before_last.update(_answered(consumer, 4))
        committed_then.extend(_committed(root, p) for p in range(4))
        yield decided[2][1:] + decided[3]

    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 2)
    config = SinkConfig(kafka.cluster, root, "ingress", responses, letters, 1 << 20)
    try:
        summary = run_task(config, BATCH_ID, REGISTRY, reading(), time.perf_counter)
        at_end = _answered(consumer, 4)
    finally:
        consumer.close()
    assert before_last == {"r0-0": 0, "r0-1": 1, "r1-0": 0, "r1-1": 1}
    assert committed_then == [True, True, False, False]
    assert at_end == {"r2-0": 0, "r2-1": 1, "r3-0": 0, "r3-1": 1}
    assert (summary.responses, summary.dead_letters, summary.appended_batches) == (8, 0, 8)
    assert all(_committed(root, p) for p in range(4))


def test_an_early_commit_that_fails_sends_nothing(
    kafka: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early commit's partitions fail to commit: the task fails, and none of their responses was sent (read up
    to a marker the task's own producer sends after it, on a response topic of one partition: the producer keeps
    its order)."""
    responses, letters = f"responses-{uuid.uuid4().hex[:8]}", f"dlq-{uuid.uuid4().hex[:8]}"
    create_topics(kafka.cluster, [(responses, 1, {}), (letters, 1, {})])
    real_commit = partition_task.PartitionAppend.commit

    def commit(self: partition_task.PartitionAppend) -> object:
        if self.appender is not None and self.appender.partition in (0, 1):
            raise OSError(5, "Input/output error")
        return real_commit(self)

    monkeypatch.setattr(partition_task.PartitionAppend, "commit", commit)
    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 2)
    decided = [_decided(p, 2) for p in range(4)]
    config = SinkConfig(kafka.cluster, tmp_path / "segments", "ingress", responses, letters, 1 << 20)
    with pytest.raises(OSError, match="Input/output error"):
        run_task(config, BATCH_ID, REGISTRY, [decided[0] + decided[1] + decided[2][:1], decided[2][1:] + decided[3]],
                 time.perf_counter)
    same = producer(kafka.cluster, config.max_message_bytes, config.publish_timeout_ms)
    same.produce(responses, key=b"marker", value=b"")
    assert same.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"test-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(responses, 0, 0)])
    keys: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while b"marker" not in keys and time.monotonic() < deadline:
            keys += [m.key() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    assert keys == [b"marker"]
