"""The local Apache Kafka broker, topic creation and the raw-batch produce client (tests/kafka_wire.py)."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType
from kafka.record.default_records import DefaultRecordBatchBuilder

from embedded import local_kafka
from embedded.local_kafka import BrokerStartError, LocalKafka, free_port
from kafka_cluster.admin import create_topics
from tests.kafka_wire import ProduceConnection, produce_batch

pytestmark = pytest.mark.integration

CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
FIVE_HOURS_MS = 5 * 3600 * 1000
CRC_OFFSET = 17  # RecordBatch v2: baseOffset(8) length(4) leaderEpoch(4) magic(1) | crc(4)


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def build_batch(timestamps: list[int], compression: int = DefaultRecordBatchBuilder.CODEC_NONE) -> bytes:
    """A producer-style RecordBatch v2 (base offset 0, no producer id) with one record per timestamp."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for index, timestamp in enumerate(timestamps):
        builder.append(index, timestamp, f"k{index}".encode(), f"value-{index}".encode(), [])
    return bytes(builder.build())


def consume_one(bootstrap: str, topic: str, partition: int, timeout_s: float = 30.0) -> Message:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_topic("g"), "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)  # blocks until a message arrives or 1 s passes
            if message is None:
                continue
            assert message.error() is None, message.error()
            return message
        raise AssertionError(f"no message on {topic}-{partition} within {timeout_s}s")
    finally:
        consumer.close()


@pytest.fixture()
def wire(kafka: LocalKafka) -> Iterator[ProduceConnection]:
    with ProduceConnection(kafka.bootstrap_servers) as connection:
        yield connection


def test_broker_round_trips_a_message_with_headers(kafka: LocalKafka) -> None:
    topic = unique_topic("roundtrip")
    kafka.create_topics([(topic, 2, {})])

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True})
    headers = [("gw.topic", b"orders"), ("gw.partition", b"3"), ("empty", b"")]
    producer.produce(
        topic, key=b"orders/3", value=b"\x00\x01payload", partition=1, headers=headers, timestamp=1234
    )
    assert producer.flush(30) == 0

    message = consume_one(kafka.bootstrap_servers, topic, 1)
    assert (message.key(), message.value(), message.offset()) == (b"orders/3", b"\x00\x01payload", 0)
    assert message.headers() == headers
    assert message.timestamp()[1] == 1234


def test_create_topics_applies_configs_and_is_idempotent(kafka: LocalKafka) -> None:
    topic = unique_topic("lat")
    spec = (topic, 3, {"message.timestamp.type": "LogAppendTime", "max.message.bytes": "2000000"})
    create_topics(kafka.cluster, [spec])
    create_topics(kafka.cluster, [spec])  # already exists: tolerated

    admin = kafka.admin()
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    configs = future.result(timeout=30)
    assert configs["message.timestamp.type"].value == "LogAppendTime"
    assert configs["max.message.bytes"].value == "2000000"


def test_wire_produce_assigns_consecutive_offsets(kafka: LocalKafka, wire: ProduceConnection) -> None:
    topic = unique_topic("wire")
    kafka.create_topics([(topic, 1, {})])

    first = wire.produce(topic, 0, build_batch([now_ms(), now_ms()]))
    second = wire.produce(topic, 0, build_batch([now_ms()]))

    assert (first.error_code, first.base_offset, first.log_append_time_ms) == (0, 0, -1)
    assert (first.record_errors, first.error_message, first.log_start_offset) == ((), None, 0)
    assert (second.error_code, second.base_offset) == (0, 2)  # the first batch held two records
    # and the records are really there, readable by an ordinary consumer
    assert consume_one(kafka.bootstrap_servers, topic, 0).value() == b"value-0"


def test_wire_produce_of_single_record_batches_starts_at_zero_then_one(kafka: LocalKafka) -> None:
    topic = unique_topic("wire1")
    kafka.create_topics([(topic, 1, {})])

    results = [produce_batch(kafka.bootstrap_servers, topic, 0, build_batch([now_ms()])) for _ in range(2)]

    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 1)]


def test_wire_produce_to_log_append_time_topic_reports_append_time(
    kafka: LocalKafka, wire: ProduceConnection
) -> None:
    topic = unique_topic("wire-lat")
    kafka.create_topics([(topic, 1, {"message.timestamp.type": "LogAppendTime"})])
    before = now_ms()

    result = wire.produce(topic, 0, build_batch([1_000, 2_000], DefaultRecordBatchBuilder.CODEC_GZIP))

    assert (result.error_code, result.base_offset) == (0, 0)
    assert before <= result.log_append_time_ms <= now_ms()


def test_wire_produce_rejects_old_timestamps_per_record(kafka: LocalKafka, wire: ProduceConnection) -> None:
    topic = unique_topic("wire-old")
    kafka.create_topics([(topic, 1, {"message.timestamp.before.max.ms": "1000"})])
    old = now_ms() - FIVE_HOURS_MS

    result = wire.produce(topic, 0, build_batch([old, old + 1, old + 2]))

    assert result.error_code == INVALID_TIMESTAMP
    assert (result.base_offset, result.log_append_time_ms, result.log_start_offset) == (-1, -1, 0)
    assert [e.batch_index for e in result.record_errors] == [0, 1, 2]
    for index, error in enumerate(result.record_errors):
        assert error.message is not None
        assert error.message.startswith(
            f"Timestamp {old + index} of message with offset {index} is out of range."
        )
    assert result.error_message == "One or more records have been rejected due to invalid timestamp"
    # the whole batch was rejected: nothing appended, the next batch still gets offset 0
    assert wire.produce(topic, 0, build_batch([now_ms()])).base_offset == 0


def test_wire_produce_rejects_a_corrupted_crc(kafka: LocalKafka, wire: ProduceConnection) -> None:
    topic = unique_topic("wire-crc")
    kafka.create_topics([(topic, 1, {})])
    batch = bytearray(build_batch([now_ms()]))
    batch[CRC_OFFSET] ^= 0xFF

    result = wire.produce(topic, 0, bytes(batch))

    assert result.error_code == CORRUPT_MESSAGE
    assert (result.base_offset, result.record_errors) == (-1, ())


def test_broker_that_exits_during_start_fails_at_once_with_its_log(tmp_path: Path) -> None:
    with socket.socket() as squatter:  # the broker's port is taken: Kafka exits on the bind failure
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        broker = LocalKafka(tmp_path, port=squatter.getsockname()[1], start_timeout=600)

        with pytest.raises(BrokerStartError, match="exited with code") as failure:
            broker.start()

    assert str(broker.log_path) in str(failure.value)
    assert not broker.is_running()


def test_broker_jvm_dies_with_its_parent_process(tmp_path: Path) -> None:
    """A killed parent (no atexit, no finally) must not leave the broker JVM behind."""
    script = (
        "import sys; from embedded.local_kafka import LocalKafka\n"
        f"broker = LocalKafka({str(tmp_path)!r}, start_timeout=120).start()\n"
        "print(broker.pid, flush=True)\n"
        "sys.stdin.read()\n"  # hold the broker until the test kills us
    )
    env = {**os.environ, "PYTHONPATH": str(local_kafka.REPO_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert parent.stdout is not None
        jvm_pid = int(parent.stdout.readline())
        # a pidfd becomes readable when the process exits (reaped or not) and pins its identity
        jvm = os.pidfd_open(jvm_pid)
    finally:
        parent.kill()
        parent.wait(timeout=30)
    try:
        exited, _, _ = select.select([jvm], [], [], 30.0)
    finally:
        os.close(jvm)
    assert exited, f"broker JVM {jvm_pid} outlived its killed parent"


def test_free_port_and_classpath() -> None:
    port = free_port()
    assert 0 < port < 65536
    classpath = local_kafka.kafka_classpath()
    assert any(Path(jar).name.startswith("kafka_2.13-") for jar in classpath.split(os.pathsep))


def test_run_kafka_tool_runs_a_kafka_main_class() -> None:
    result = local_kafka.run_kafka_tool("kafka.tools.StorageTool", ["random-uuid"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) == 22


def test_stopped_broker_restarts_on_its_data(tmp_path: Path) -> None:
    topic = unique_topic("restart")
    with LocalKafka(tmp_path) as broker:
        broker.create_topics([(topic, 1, {})])
        assert produce_batch(broker.bootstrap_servers, topic, 0, build_batch([now_ms()])).base_offset == 0
        cluster_id = broker.cluster_id
    assert not broker.is_running()

    with broker:  # same dir, same ports: storage is not formatted again
        assert broker.cluster_id == cluster_id
        broker.create_topics([(topic, 1, {})])  # waits for the reloaded partition's leader
        assert produce_batch(broker.bootstrap_servers, topic, 0, build_batch([now_ms()])).base_offset == 1
