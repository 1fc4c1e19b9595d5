"""The front door's pure parts, without Kafka or Spark: framing and refusals, partition leadership, the
answers of Metadata, ApiVersions and the refused group APIs (encoded and decoded with kio, Kafka's own
schemas), and the producer-id allocation across restarts and instances."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from front_door import api_versions, metadata, unsupported
from front_door.context import NODE_ID, BrokerAddress, Context
from front_door.leadership import leader, node_ids
from front_door.metrics import FrontDoorMetrics
from front_door.producer_id_manager import BLOCK_SIZE, ProducerIdManager
from front_door.server import READABLE
from front_door.topic_ids import topic_id
from front_door.wire import BadRequestError, UnsupportedApiError, encode_response, frame_size, parse_request
from validators.topic_config import TopicRegistry

REGISTRY = TopicRegistry.from_json({"topics": {"orders": {"partitions": 3, "configs": {}},
                                               "clicks": {"partitions": 1, "configs": {}}}})


def _frame(api_key: int, version: int, body: Any, correlation_id: int = 7) -> bytes:
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=api_key, request_api_version=version,
                                                       correlation_id=correlation_id, client_id="unit"))
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


def _context(tmp_path: Path) -> Context:
    return Context(BrokerAddress("gw.example", 9093), lambda: REGISTRY, bridge=None,  # type: ignore[arg-type]
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics())


def _answer(ctx: Context, handler: Any, api_key: int, version: int, body: Any) -> Any:
    """Handle a request as the server does, then decode the encoded answer with kio."""
    request = parse_request(_frame(api_key, version, body), READABLE)
    encoded = encode_response(api_key, version, request.correlation_id, asyncio.run(handler(ctx, request)))
    assert struct.unpack(">i", encoded[:4])[0] == len(encoded) - 4
    from kio.index import load_response_schema

    schema = load_response_schema(api_key, version)
    header, used = entity_reader(schema.__header_schema__)(encoded, 4)
    assert header.correlation_id == 7
    decoded, size = entity_reader(schema)(encoded, 4 + used)
    assert 4 + used + size == len(encoded)
    return decoded


def test_frame_sizes_kafka_closes_the_connection_for() -> None:
    assert frame_size(struct.pack(">i", 100), 1000) == 100
    for size in (-1, 0, 7, 1001):
        with pytest.raises(BadRequestError, match="Invalid receive"):
            frame_size(struct.pack(">i", size), 1000)


def test_unknown_apis_versions_and_unreadable_bodies_are_refused() -> None:
    with pytest.raises(UnsupportedApiError, match="API key 9999"):
        parse_request(struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff", READABLE)
    with pytest.raises(UnsupportedApiError) as produce_v2:
        parse_request(struct.pack(">hhi", 0, 2, 5) + b"\xff\xff", READABLE)
    assert (produce_v2.value.api_key, produce_v2.value.api_version, produce_v2.value.correlation_id) == (0, 2, 5)
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    good = _frame(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert parse_request(good, READABLE).body.topics[0].name == "orders"
    for cut in (len(good) - 4, 12, 9):
        with pytest.raises(BadRequestError, match="Error reading API key 3 version 12"):
            parse_request(good[:cut], READABLE)


# ============================================================================== leadership


def test_leadership_is_stable_across_restarts_and_front_doors() -> None:
    # Golden values: clients cache leaders, and several front doors must agree — a change here moves every
    # partition of every deployed topic to another node.
    assert [leader("orders", p, 4) for p in range(8)] == [3, 4, 1, 2, 3, 4, 1, 2]
    assert [leader("clicks", p, 4) for p in range(4)] == [1, 2, 3, 4]
    assert [leader("orders", p, 3) for p in range(3)] == [2, 3, 1]
    # the start is the topic id's (UUIDv5 of the name): the formula, nothing remembered
    assert all(leader(t, p, n) == 1 + (topic_id(t).int + p) % n
               for t in ("orders", "clicks", "a.b-c_d") for p in range(10) for n in (1, 2, 5, 7))


def test_leadership_spreads_a_topics_partitions_round_robin_over_the_nodes() -> None:
    for nodes in (2, 3, 4, 7):
        for topic in ("orders", "clicks", "x", "gateway.demo"):
            leaders = [leader(topic, p, nodes) for p in range(3 * nodes)]
            assert sorted(leaders) == sorted(list(node_ids(nodes)) * 3), (topic, nodes)
            # consecutive partitions on consecutive nodes: any `nodes` of them use every node once
            assert all(leaders[p + 1] == leaders[p] % nodes + 1 for p in range(len(leaders) - 1))
    # and topics start on different nodes, so one-partition topics spread too
    assert {leader(f"topic-{i}", 0, 4) for i in range(40)} == set(node_ids(4))


def test_one_node_leads_everything() -> None:
    assert {leader(t, p, 1) for t in ("orders", "clicks", "x") for p in range(16)} == {1}
    assert list(node_ids(1)) == [1]


def test_metadata_names_the_one_broker_and_every_registry_partition(tmp_path: Path) -> None:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    ctx = _context(tmp_path)
    everything = _answer(ctx, metadata.handle, 3, 12, MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [(b.node_id, b.host, b.port) for b in everything.brokers] == [(NODE_ID, "gw.example", 9093)]
    assert everything.controller_id == NODE_ID
    topics = {t.name: t for t in everything.topics}
    assert sorted(topics) == ["clicks", "orders"]
    assert topics["orders"].topic_id == topic_id("orders")
    assert [(p.partition_index, p.leader_id, list(p.isr_nodes)) for p in topics["orders"].partitions] == [
        (0, NODE_ID, [NODE_ID]), (1, NODE_ID, [NODE_ID]), (2, NODE_ID, [NODE_ID])]

    asked = _answer(ctx, metadata.handle, 3, 12, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="nope"), MetadataRequestTopic(topic_id=None, name="bad/name"),
                MetadataRequestTopic(topic_id=topic_id("clicks"), name=None),
                MetadataRequestTopic(topic_id=topic_id("gone"), name=None)),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [(t.name, t.error_code, len(t.partitions)) for t in asked.topics] == [
        ("nope", ErrorCode.unknown_topic_or_partition, 0), ("bad/name", ErrorCode.invalid_topic_exception, 0),
        ("clicks", ErrorCode.none, 1), (None, ErrorCode.unknown_topic_id, 0)]
    from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0

    v0 = _answer(ctx, metadata.handle, 3, 0, MetadataRequestV0(topics=()))  # v0: an empty list means all
    assert sorted(t.name for t in v0.topics) == ["clicks", "orders"]


def test_api_versions_advertise_what_is_served_and_no_group_apis(tmp_path: Path) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    answer = _answer(_context(tmp_path), api_versions.handle, 18, 3,
                     ApiVersionsRequest(client_software_name="unit", client_software_version="1"))
    assert answer.error_code == ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == api_versions.ADVERTISED
    assert not set(api_versions.ADVERTISED) & set(unsupported.GROUP_APIS)


def test_group_apis_are_answered_unsupported_with_a_message(tmp_path: Path) -> None:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.join_group.v9.request import JoinGroupRequest

    ctx = _context(tmp_path)
    found = _answer(ctx, unsupported.handle, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=("g1", "g2")))
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
        ("g1", ErrorCode.unsupported_version, -1), ("g2", ErrorCode.unsupported_version, -1)]
    assert "assign()" in found.coordinators[0].error_message
    joined = _answer(ctx, unsupported.handle, 11, 9, JoinGroupRequest(
        group_id="g1", session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=(), reason=None))
    assert joined.error_code == ErrorCode.unsupported_version


def test_producer_ids_stay_unique_across_restarts_and_instances(tmp_path: Path) -> None:
    first, second = ProducerIdManager(tmp_path), ProducerIdManager(tmp_path)
    a = [first.generate() for _ in range(BLOCK_SIZE + 5)]  # crosses into a second block
    b = [second.generate() for _ in range(10)]
    restarted = ProducerIdManager(tmp_path)  # the rest of the old blocks are abandoned, as Kafka does
    c = [restarted.generate() for _ in range(10)]
    assert len(set(a + b + c)) == len(a + b + c)
    assert min(c) > max(a + b)
    (tmp_path / ".front-door" / "producer-ids.json").write_text("garbage")
    with pytest.raises(ValueError, match="unreadable producer id allocation"):
        ProducerIdManager(tmp_path).generate()


@pytest.mark.parametrize("api_key", sorted(unsupported.REFUSED_APIS))
def test_every_version_of_every_refused_api_has_an_encodable_error_answer(api_key: int) -> None:
    from front_door.messages import error_response

    low, high = READABLE[api_key]
    for version in range(low, high + 1):
        body = error_response(api_key, version, ErrorCode.unsupported_version, unsupported.MESSAGE)
        assert len(encode_response(api_key, version, 1, body)) > 8


def test_a_taken_port_fails_the_start_and_leaves_nothing_running(tmp_path: Path) -> None:
    import socket

    from front_door.server import FrontDoor, FrontDoorSettings

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = FrontDoorSettings(listen=f"127.0.0.1:{port}", advertised=None, bootstrap_servers="127.0.0.1:1",
                                     ingress_topic="i", response_topic="r", segments_root=tmp_path,
                                     publish_timeout_ms=1000, ingress_max_message_bytes=1 << 20)
        door = FrontDoor(settings, lambda: REGISTRY, FrontDoorMetrics())
        with pytest.raises(OSError):
            door.start()
        assert not door._thread.is_alive() and door.context is None
