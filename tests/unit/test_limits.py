"""The size limits of the gateway's own hops, derived once (`contract.limits`), and where they are used:
the gateway's topics, the sink's producer, the Spark source, the local broker, the front door's ingress
bridge and its per-connection bound on request bytes in flight. No Kafka, no Spark."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i32Timedelta

from clients.producer import ProducerConfig
from contract.limits import (
    DEAD_LETTER_HEADERS_BYTES,
    INGRESS_ENVELOPE_BYTES,
    KAFKA_FETCH_MAX_BYTES,
    KAFKA_SOCKET_REQUEST_MAX_BYTES,
    LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES,
    PRODUCE_REQUEST_OVERHEAD_BYTES,
    IngressLimits,
    batch_bytes_through,
)
from contract.topics import (
    GROUPS_TOPIC_CONFIGS,
    REGISTRY_TOPIC_CONFIGS,
    REHEARSAL_TOPIC_CONFIGS,
    TRANSACTION_STATE_TOPIC_CONFIGS,
    rehearsal_topic,
)
from embedded.local_kafka import LocalKafka
from front_door.apis import produce
from front_door.apis.registry import READABLE
from front_door.cluster.node import Node
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.ingress_bridge import IngressBridge
from front_door.metrics import FrontDoorMetrics
from front_door.network.in_flight import InFlightBytes
from front_door.network.wire import DEFAULT_MAX_REQUEST_BYTES, CloseConnection, parse_request
from front_door.producer_id_manager import ProducerIdManager
from kafka_cluster.security import KafkaCluster
from streaming.config import GatewayConfig
from streaming.config_file import load_gateway_config
from streaming.query import sink_config, topic_specs
from tests.memory_group_store import MemoryGroupStore
from validators.topic_config import TopicRegistry

MIB = 1 << 20


def test_by_default_the_hops_carry_a_batch_as_large_as_kafkas_largest_request() -> None:
    limits = IngressLimits()
    assert limits.max_request_bytes == DEFAULT_MAX_REQUEST_BYTES == KAFKA_SOCKET_REQUEST_MAX_BYTES == 100 * MIB
    assert limits.batch_bytes == 100 * MIB
    assert limits.ingress_message_bytes == 100 * MIB + INGRESS_ENVELOPE_BYTES
    assert limits.dead_letter_message_bytes == limits.ingress_message_bytes + DEAD_LETTER_HEADERS_BYTES
    assert limits.broker_request_bytes == limits.dead_letter_message_bytes + PRODUCE_REQUEST_OVERHEAD_BYTES
    assert limits.fetch_max_bytes == limits.ingress_message_bytes > KAFKA_FETCH_MAX_BYTES
    # a small front door still fetches as much as a Kafka consumer does by default
    assert IngressLimits(max_request_bytes=MIB).fetch_max_bytes == KAFKA_FETCH_MAX_BYTES


@pytest.mark.parametrize(("request_bytes", "topic_bytes", "batch"), [
    (100 * MIB, 1_048_588, 100 * MIB),  # Kafka's defaults: the request bounds the batch
    (100 * MIB, 200 * MIB, 200 * MIB),  # a topic allowing more: its producers may write to ingress directly
    (4 * MIB, 0, 4 * MIB),  # no topics
])
def test_the_largest_batch_is_the_larger_of_the_request_limit_and_the_largest_topic(
        request_bytes: int, topic_bytes: int, batch: int) -> None:
    limits = IngressLimits(request_bytes, topic_bytes)
    assert limits.batch_bytes == batch
    # every hop takes what the hop before it hands on
    assert limits.batch_bytes < limits.ingress_message_bytes < limits.dead_letter_message_bytes < \
        limits.broker_request_bytes
    assert batch_bytes_through(limits.ingress_message_bytes, None, None) == batch
    properties = limits.broker_properties()
    assert int(properties["socket.request.max.bytes"]) == limits.broker_request_bytes
    assert int(properties["message.max.bytes"]) == int(properties["replica.fetch.max.bytes"]) \
        == limits.dead_letter_message_bytes


def test_limits_librdkafka_cannot_produce_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="front_door_max_request_bytes must be at least 1"):
        IngressLimits(max_request_bytes=0)
    with pytest.raises(ValueError, match="max.message.bytes must be at least 0"):
        IngressLimits(largest_topic_message_bytes=-1)
    with pytest.raises(ValueError, match=f"librdkafka's largest message.max.bytes \\({LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES}\\)"):
        IngressLimits(max_request_bytes=LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES)


def test_an_actual_cluster_may_carry_less_than_asked_for() -> None:
    asked = IngressLimits().ingress_message_bytes
    assert batch_bytes_through(asked, None, None) == 100 * MIB
    # an existing ingress topic with Kafka's default max.message.bytes
    assert batch_bytes_through(asked, 1_048_588, None) == 1_048_588 - INGRESS_ENVELOPE_BYTES
    # brokers with Kafka's default socket.request.max.bytes: the request must also hold the produce's overhead
    assert batch_bytes_through(asked, asked, KAFKA_SOCKET_REQUEST_MAX_BYTES) == \
        KAFKA_SOCKET_REQUEST_MAX_BYTES - PRODUCE_REQUEST_OVERHEAD_BYTES - INGRESS_ENVELOPE_BYTES
    # more than asked for changes nothing; less than an envelope carries nothing
    assert batch_bytes_through(asked, 2 * asked, 2 * asked) == 100 * MIB
    assert batch_bytes_through(asked, 1000, None) == 0


def _config(tmp_path: Path, topics: dict[str, Any], **settings: Any) -> GatewayConfig:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({"topics": topics}))
    return GatewayConfig(bootstrap_servers="127.0.0.1:1", topics_file=str(path), segments_root=str(tmp_path / "s"),
                         **settings)


def test_the_registry_and_the_front_door_setting_define_every_hop(tmp_path: Path) -> None:
    small = _config(tmp_path, {"a": {"partitions": 1, "configs": {"max.message.bytes": "2000000"}},
                               "b": {"partitions": 1, "configs": {}}}, front_door_max_request_bytes=4 * MIB)
    assert small.ingress_limits() == IngressLimits(4 * MIB, 2_000_000)
    big = _config(tmp_path, {"a": {"partitions": 1, "configs": {"max.message.bytes": str(300 * MIB)}}})
    limits = big.ingress_limits()
    assert limits == IngressLimits(KAFKA_SOCKET_REQUEST_MAX_BYTES, 300 * MIB) and limits.batch_bytes == 300 * MIB
    # the gateway's topics: ingress carries the batch, dead letters and responses the batch and its headers
    specs = {name: configs for name, _, configs in topic_specs(big)}
    assert specs == {
        big.ingress_topic: {"max.message.bytes": str(limits.ingress_message_bytes)},
        big.response_topic: {"max.message.bytes": str(limits.dead_letter_message_bytes)},
        big.dlq_topic: {"max.message.bytes": str(limits.dead_letter_message_bytes)},
        # a standby's rehearsal batch: an ingress message
        rehearsal_topic(big.ingress_topic): {**REHEARSAL_TOPIC_CONFIGS,
                                             "max.message.bytes": str(limits.ingress_message_bytes)},
        big.groups_topic: GROUPS_TOPIC_CONFIGS,  # offsets and groups: small records, Kafka's compacted layout
        big.security_topic: GROUPS_TOPIC_CONFIGS,  # users and ACLs: small records, compacted
        big.registry_topic_name: REGISTRY_TOPIC_CONFIGS,  # the topic registry: compacted
        big.transaction_state_topic_name: TRANSACTION_STATE_TOPIC_CONFIGS,  # the transactions' states: compacted
    }
    assert sink_config(big).max_message_bytes == limits.dead_letter_message_bytes
    assert big.front_door_settings().ingress_max_message_bytes == limits.ingress_message_bytes
    assert big.front_door_settings().max_request_bytes == KAFKA_SOCKET_REQUEST_MAX_BYTES
    # the local broker of `gateway run` is started to carry them
    broker = LocalKafka(tmp_path / "kafka", limits=limits).server_properties()
    assert {k: broker[k] for k in limits.broker_properties()} == limits.broker_properties()


def test_the_defaults_agree_everywhere(tmp_path: Path) -> None:
    """The session broker of the tests, a client's ingress producer and the default gateway: one rule."""
    defaults = _config(tmp_path, {"t": {"partitions": 1, "configs": {}}}).ingress_limits()
    assert defaults == IngressLimits()
    assert ProducerConfig("127.0.0.1:1").ingress_message_max_bytes == defaults.ingress_message_bytes
    broker = LocalKafka(tmp_path / "kafka").server_properties()
    assert int(broker["socket.request.max.bytes"]) == defaults.broker_request_bytes


def test_the_registry_names_its_largest_max_message_bytes() -> None:
    registry = TopicRegistry.from_json({
        "defaults": {"message.max.bytes": "3000000"},  # the gateway-wide default (Kafka's broker name)
        "topics": {"inherits": {"partitions": 1}, "own": {"partitions": 1, "configs": {"max.message.bytes": "5"}}},
    })
    assert registry.largest_max_message_bytes == 3_000_000
    assert TopicRegistry.from_json({"topics": {"t": {"partitions": 1}}}).largest_max_message_bytes == 1_048_588
    assert TopicRegistry().largest_max_message_bytes == 0


def test_the_removed_ingress_setting_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"ingress_max_message_bytes": 16777216, "query_name": "q"}))
    with caplog.at_level(logging.WARNING, logger="gateway.config"):
        config = load_gateway_config(path)
    assert config.query_name == "q"
    assert "ingress_max_message_bytes is no longer used" in caplog.text and "front_door_max_request_bytes" in caplog.text


# ------------------------------------------------------------------------------- the front door


def _produce(records: bytes, acks: int = -1) -> bytes:
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=0, request_api_version=9, correlation_id=7,
                                                       client_id="unit"))
    entity_writer(ProduceRequest)(buffer, ProduceRequest(
        acks=acks, timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), transactional_id=None,
        topic_data=(TopicProduceData(name="orders", partition_data=(PartitionProduceData(index=2, records=records),)),),
    ))
    return buffer.getvalue()


def test_a_batch_the_ingress_hop_cannot_carry_gets_message_too_large_at_the_door(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Not retriable (RecordTooLargeException at a Java client), nothing handed to the ingress topic; with
    acks=0 the connection is closed, as Kafka closes it on a failed acks=0 produce."""
    registry = TopicRegistry.from_json({"topics": {"orders": {"partitions": 3, "configs": {}}}})
    bridge = IngressBridge(KafkaCluster("127.0.0.1:1"), "ingress", "responses", publish_timeout_ms=1000, max_message_bytes=MIB)
    assert bridge.max_batch_bytes == MIB - INGRESS_ENVELOPE_BYTES  # until start() reads the cluster's limits
    ctx = Context((Node(1, "gw", 9093),), lambda: registry, bridge, tmp_path, ProducerIdManager(tmp_path),
                  FrontDoorMetrics(), GroupCoordinator(MemoryGroupStore()))
    batch = b"\x00" * (bridge.max_batch_bytes + 1)  # never parsed: its size is enough
    with caplog.at_level(logging.WARNING, logger="gateway.front_door"):
        answer = asyncio.run(produce.handle(ctx, parse_request(_produce(batch), READABLE, 1)))
    (partition,) = answer.responses[0].partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (2, ErrorCode.message_too_large, -1)
    assert partition.error_message == (
        f"The record batch size in the append to orders-2 is {len(batch)} bytes which exceeds the "
        f"{bridge.max_batch_bytes} bytes the gateway's ingress topic ingress carries.")
    assert "Refused at the front door" in caplog.text
    closed = asyncio.run(produce.handle(ctx, parse_request(_produce(batch, acks=0), READABLE, 1)))
    assert isinstance(closed, CloseConnection)


def test_a_connection_holds_one_largest_request_or_several_small_ones_in_flight() -> None:
    async def scenario() -> None:
        held = InFlightBytes(100)
        await held.acquire(60)
        await held.acquire(40)  # fits beside the first
        third = asyncio.create_task(held.acquire(30))
        await asyncio.sleep(0)  # one turn of the loop: the task runs up to its wait
        assert not third.done() and held.held == 100
        held.release(60)
        await third
        assert held.held == 70
        done = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(done)
        held.release_when_done(task, 70)
        largest = asyncio.create_task(held.acquire(100))  # as large as the limit: waits until nothing is held
        await asyncio.sleep(0)
        assert not largest.done()
        done.set_result(None)
        await largest
        assert held.held == 100
        held.release(100)
        await held.acquire(100)  # alone, it always gets through

    asyncio.run(scenario())
