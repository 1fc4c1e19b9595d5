"""Large requests end to end, on the real broker, real Spark and real clients.

- Batches of several MB that their topic allows pass the front door and the ingress hop, are appended,
  and read back intact by an assigned consumer (librdkafka here, the Java client in
  test_front_door_java.py).
- A batch larger than its topic's max.message.bytes but within the request limit reaches the stage:
  MESSAGE_TOO_LARGE at the client and exactly one dead letter with the original bytes.
- A request up to front_door_max_request_bytes is read; one byte more closes that connection only.
- A cluster whose ingress topic carries less than the gateway asked for: MESSAGE_TOO_LARGE at the door
  (not retriable) with a log line saying why; `create_topics` raises an existing topic's too small
  max.message.bytes and never lowers one.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import random
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from contract.limits import INGRESS_ENVELOPE_BYTES, IngressLimits
from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from kafka_cluster.admin import create_topics, describe_hop_limits
from sinks.registry_watcher import RegistryWatcher
from storage.log_reader import batch_records, read
from streaming.config import GatewayConfig
from tests.integration.front_door_harness import (
    CAPPED_MAX_MESSAGE_BYTES,
    LARGE_TOPICS,
    RunningDoor,
    running_front_door,
)
from tests.integration.gateway_io import read_all
from validators.codec.record_batch import build_record_batch

pytestmark = pytest.mark.integration

MIB = 1 << 20


@pytest.fixture
def door(spark, gateway_config: GatewayConfig) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config, LARGE_TOPICS) as running:
        yield running


def _values(n: int, size: int, seed: int) -> list[bytes]:
    """Incompressible values (random bytes), distinct and recognisable by their first bytes."""
    rng = random.Random(seed)
    return [f"{seed}-{i}:".encode() + rng.randbytes(size) for i in range(n)]


def _large_producer(bootstrap: str, **overrides: Any) -> Producer:
    """librdkafka with its request and batch sizes raised (defaults: 1 MB), one batch per flush."""
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 60_000,
                     "message.max.bytes": 16 * MIB, "batch.size": 16 * MIB, "message.timeout.ms": 120_000,
                     **overrides})


def _deliver(p: Producer, topic: str, partition: int, values: list[bytes]) -> list[tuple[Any, Any]]:
    reports: list[tuple[Any, Any]] = []
    for v in values:
        p.produce(topic, value=v, key=b"k", partition=partition, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert p.flush(180) == 0
    return reports


def _read_assigned(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unused-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got: list[Any] = []
    deadline = time.monotonic() + 120
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        c.close()
    return got


def test_librdkafka_batches_of_several_mb_are_appended_and_read_back_intact(door: RunningDoor) -> None:
    first, second = _values(3, 2 * MIB, seed=1), _values(2, 3 * MIB, seed=2)
    p = _large_producer(door.bootstrap)
    reports = _deliver(p, "large", 0, first) + _deliver(p, "large", 0, second)  # a ~6 MB batch each
    assert [err for err, _ in reports] == [None] * 5
    assert [msg.offset() for _, msg in reports] == [0, 1, 2, 3, 4]

    stored = read(door.segments_root, "large", 0, 0, 100)
    assert [(r.offset, r.value) for r in stored] == list(enumerate(first + second))
    log = (door.segments_root / "large-0" / "00000000000000000000.log").stat().st_size
    assert log > 12 * MIB  # two batches of about 6 MB each, stored as they came
    got = _read_assigned(door.bootstrap, "large", 0, 5)
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(first + second))


def test_librdkafka_batch_over_its_topics_limit_is_message_too_large_and_one_dead_letter(door: RunningDoor) -> None:
    (value,) = _values(1, 2 * MIB, seed=3)  # under the request limit, over "capped"'s max.message.bytes
    p = _large_producer(door.bootstrap)
    ((err, _),) = _deliver(p, "capped", 0, [value])
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE and not err.retriable()
    # the producer goes on (librdkafka bumps its idempotent epoch after the failed batch)
    ((after, msg),) = _deliver(p, "capped", 0, [b"small, after"])
    assert after is None and msg.offset() == 0

    letters = _letters(door, 1)
    assert len(letters) == 1
    headers = {k: (v or b"").decode() for k, v in letters[0].headers()}
    assert (headers["gw.errors.name"], headers["gw.errors.code"], headers["gw.errors.topic"]) == (
        "MESSAGE_TOO_LARGE", "10", "capped")
    batch = letters[0].value()
    assert len(batch) > CAPPED_MAX_MESSAGE_BYTES
    assert headers["gw.errors.message"] == (
        f"The record batch size in the append to capped-0 is {len(batch)} bytes which exceeds the maximum "
        f"configured value of {CAPPED_MAX_MESSAGE_BYTES}).")
    # the original bytes: librdkafka's batch as it was sent, CRC intact, holding the one record
    assert [(r.key, r.value) for r in batch_records(bytes(batch))] == [(b"k", value)]
    assert [r.value for r in read(door.segments_root, "capped", 0, 0, 10)] == [b"small, after"]


def _produce_frame(topic: str, records: bytes) -> bytes:
    """A kio-encoded ProduceRequest v9 of `records` for `topic`-0, without its size field."""
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=0, request_api_version=9, correlation_id=5,
                                                       client_id="raw"))
    entity_writer(ProduceRequest)(buffer, ProduceRequest(
        acks=-1, timeout=i32Timedelta.parse(datetime.timedelta(seconds=120)), transactional_id=None,
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),),
    ))
    return buffer.getvalue()


def _request_of_size(topic: str, size: int) -> tuple[bytes, bytes]:
    """(a whole request of exactly `size` bytes after its size field, the one batch it carries): a valid
    batch with one record whose value fills the frame."""
    now = int(time.time() * 1000)
    value_size = size
    for _ in range(10):  # the record's varint lengths move with the value's size: converge on it
        batch = build_record_batch([(now, b"k", random.Random(size).randbytes(value_size))])
        frame = _produce_frame(topic, batch)
        if len(frame) == size:
            return struct.pack(">i", size) + frame, batch
        value_size += size - len(frame)
    raise AssertionError(f"no frame of {size} bytes")


def _letters(door: RunningDoor, count: int) -> list[Any]:
    """The dead-letter topic once it holds `count` letters (published beside the response, maybe just
    after it), read to its end."""
    _read_assigned(door.config.bootstrap_servers, door.config.dlq_topic, 0, count)
    return read_all(door.config, door.config.dlq_topic)


def _exchange(address: tuple[str, int], data: bytes) -> bytes:
    import socket

    with socket.create_connection(address, timeout=180) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # reset before it read everything (EPIPE, ECONNRESET, ENOTCONN): the point
            pass
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def test_a_request_up_to_the_limit_is_read_and_one_byte_more_closes_only_its_connection(door: RunningDoor) -> None:
    # a second front door on the same gateway, one node leading every partition, reading requests up to 3 MiB only
    limit = 3 * MIB
    small = FrontDoor(replace(door.settings, listen="127.0.0.1:0", max_request_bytes=limit, nodes=1, ports=()),
                      door.registry.current, FrontDoorMetrics())
    small.start()
    try:
        assert small.address is not None
        address = (small.address.host, small.address.port)
        other = _large_producer(f"{address[0]}:{address[1]}", **{"linger.ms": 0})
        # an open connection of another client before, during and after
        ((err, _),) = _deliver(other, "large", 1, [b"before"])
        assert err is None

        request, batch = _request_of_size("capped", limit)
        answer = _exchange(address, request)
        _, used = entity_reader(ResponseHeader)(answer, 4)
        response, _ = entity_reader(ProduceResponse)(answer, 4 + used)
        (partition,) = response.responses[0].partition_responses
        # read, handed on, decided by the stage: over "capped"'s limit
        assert (partition.error_code, partition.base_offset) == (ErrorCode.message_too_large, -1)
        assert [bytes(m.value()) for m in _letters(door, 1)] == [batch]  # the original bytes
        too_large, _ = _request_of_size("capped", limit + 1)
        assert _exchange(address, too_large) == b""  # closed, unread and unanswered
        ((err, msg),) = _deliver(other, "large", 1, [b"after"])
        assert err is None and msg.offset() == 1
        assert [r.value for r in read(door.segments_root, "large", 1, 0, 10)] == [b"before", b"after"]
    finally:
        small.stop()


# ============================================================================== a cluster carrying less


def _topic_config(bootstrap: str, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=30)[key].value


def test_an_existing_topic_with_a_smaller_max_message_bytes_is_raised_never_lowered(kafka) -> None:
    topic = f"existing-{uuid.uuid4().hex[:8]}"
    create_topics(kafka.cluster, [(topic, 1, {"max.message.bytes": "1000000"})])
    create_topics(kafka.cluster, [(topic, 1, {"max.message.bytes": str(8 * MIB)})])
    assert _topic_config(kafka.bootstrap_servers, topic, "max.message.bytes") == str(8 * MIB)
    create_topics(kafka.cluster, [(topic, 1, {"max.message.bytes": str(2 * MIB)})])
    assert _topic_config(kafka.bootstrap_servers, topic, "max.message.bytes") == str(8 * MIB)
    hop = describe_hop_limits(kafka.cluster, topic)
    # the session broker is started with the default gateway's limits
    assert (hop.topic_max_message_bytes, hop.broker_request_bytes) == (8 * MIB, IngressLimits().broker_request_bytes)


def test_an_ingress_topic_carrying_less_gets_message_too_large_at_the_door_with_the_reason(
        kafka, gateway_config: GatewayConfig, caplog: pytest.LogCaptureFixture) -> None:
    """An existing ingress topic the gateway may not raise (here: created small, and the front door started
    without `create_topics`): a batch it cannot carry is refused at the door, not retried forever."""
    Path(gateway_config.topics_file).write_text(json.dumps(LARGE_TOPICS))
    create_topics(kafka.cluster, [(gateway_config.ingress_topic, 1, {"max.message.bytes": str(MIB)}),
                                            (gateway_config.response_topic, 1, {})])
    registry = RegistryWatcher(gateway_config.path(gateway_config.topics_file))
    door = FrontDoor(gateway_config.front_door_settings(listen="127.0.0.1:0"), registry.current, FrontDoorMetrics())
    with caplog.at_level(logging.WARNING, logger="gateway.front_door"):
        door.start()
        try:
            assert door.address is not None
            carried = MIB - INGRESS_ENVELOPE_BYTES
            assert door.context is not None and door.context.bridge.max_batch_bytes == carried
            assert f"the ingress hop carries batches up to {carried} bytes only" in caplog.text
            p = _large_producer(f"{door.address.host}:{door.address.port}", **{"enable.idempotence": False})
            (value,) = _values(1, 2 * MIB, seed=5)  # fine for "large", too large for this ingress topic
            ((err, _),) = _deliver(p, "large", 0, [value])
            assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
            assert f"exceeds the {carried} bytes the gateway's ingress topic {gateway_config.ingress_topic} carries" \
                in caplog.text
            # a batch it carries is handed on (acks=0: no gateway query runs here to answer it)
            unacked = _large_producer(f"{door.address.host}:{door.address.port}", acks=0,
                                      **{"enable.idempotence": False})
            ((err, _),) = _deliver(unacked, "large", 0, [b"small enough"])
            assert err is None
            # no groups topic here either: producers are served, groups are not, and the reason is logged
            assert f"no consumer groups: groups topic {gateway_config.groups_topic} does not exist" in caplog.text
        finally:
            door.stop()
    ingress = read_all(gateway_config, gateway_config.ingress_topic)
    assert [(dict(m.headers())["gw.topic"], len(m.value()) < MIB) for m in ingress] == [(b"large", True)]
