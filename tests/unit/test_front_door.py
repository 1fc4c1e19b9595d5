"""The front door's pure parts, without Kafka or Spark: framing and refusals, the partition leadership
of its nodes, the answers of Metadata, ApiVersions, the refused APIs and NOT_LEADER_OR_FOLLOWER
(encoded and decoded with kio, Kafka's own schemas), its listener addresses, and the producer-id
allocation across restarts and instances."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from front_door.apis import (
    api_versions,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    unsupported,
)
from front_door.apis.registry import READABLE, REFUSED_APIS
from front_door.cluster.leadership import leader, node_ids
from front_door.cluster.node import Node
from front_door.cluster.topic_ids import topic_id
from front_door.context import CONTROLLER_ID, Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.metrics import FrontDoorMetrics
from front_door.network.wire import (
    BadRequestError,
    UnsupportedApiError,
    encode_response,
    frame_size,
    parse_request,
)
from front_door.producer_id_manager import BLOCK_SIZE, ProducerIdManager
from front_door.settings import FrontDoorSettings
from kafka_cluster.security import KafkaCluster
from tests.memory_group_store import MemoryGroupStore
from validators.topic_config import TopicRegistry

REGISTRY = TopicRegistry.from_json({"topics": {"orders": {"partitions": 3, "configs": {}},
                                               "clicks": {"partitions": 1, "configs": {}}}})
NODES = 4
# Metadata's view of a 4-node front door advertised at gw.example:9093
BROKERS = [(n, "gw.example", 9092 + n) for n in node_ids(NODES)]


def _frame(api_key: int, version: int, body: Any, correlation_id: int = 7) -> bytes:
    """A request frame (without its size field) with the header its version takes (v1, or v2 if flexible)."""
    from kio.index import load_request_schema

    header_schema = load_request_schema(api_key, version).__header_schema__
    buffer = io.BytesIO()
    header = {"request_api_key": api_key, "request_api_version": version, "correlation_id": correlation_id,
              "client_id": "unit"}
    entity_writer(header_schema)(buffer, header_schema(**header))
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


def _context(tmp_path: Path, nodes: int = NODES) -> Context:
    return Context(tuple(Node(n, "gw.example", 9092 + n) for n in node_ids(nodes)), lambda: REGISTRY,
                   bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                   groups=GroupCoordinator(MemoryGroupStore()))


def _handled(ctx: Context, handler: Any, api_key: int, version: int, body: Any, node_id: int = 1) -> Any:
    """What the handler returns for a request read by node `node_id`'s listener."""
    return asyncio.run(handler(ctx, parse_request(_frame(api_key, version, body), READABLE, node_id)))


def _answer(ctx: Context, handler: Any, api_key: int, version: int, body: Any, node_id: int = 1) -> Any:
    """Handle a request as the server does, then decode the encoded answer with kio."""
    encoded = encode_response(api_key, version, 7, _handled(ctx, handler, api_key, version, body, node_id))
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
        parse_request(struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff", READABLE, 1)
    with pytest.raises(UnsupportedApiError) as produce_v2:
        parse_request(struct.pack(">hhi", 0, 2, 5) + b"\xff\xff", READABLE, 1)
    assert (produce_v2.value.api_key, produce_v2.value.api_version, produce_v2.value.correlation_id) == (0, 2, 5)
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    good = _frame(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert parse_request(good, READABLE, 3).body.topics[0].name == "orders"
    assert parse_request(good, READABLE, 3).node_id == 3
    for cut in (len(good) - 4, 12, 9):
        with pytest.raises(BadRequestError, match="Error reading API key 3 version 12"):
            parse_request(good[:cut], READABLE, 1)


# ============================================================================== leadership


def test_leadership_is_stable_across_restarts_and_front_doors() -> None:
    # Golden values: clients cache leaders, and several front doors must agree — a change here moves every
    # partition of every deployed topic to another node.
    assert [leader("orders", p, node_ids(4)) for p in range(8)] == [3, 4, 1, 2, 3, 4, 1, 2]
    assert [leader("clicks", p, node_ids(4)) for p in range(4)] == [1, 2, 3, 4]
    assert [leader("orders", p, node_ids(3)) for p in range(3)] == [2, 3, 1]
    # the start is the topic id's (UUIDv5 of the name): the formula, nothing remembered
    assert all(leader(t, p, node_ids(n)) == 1 + (topic_id(t).int + p) % n
               for t in ("orders", "clicks", "a.b-c_d") for p in range(10) for n in (1, 2, 5, 7))


def test_leadership_spreads_a_topics_partitions_round_robin_over_the_nodes() -> None:
    for nodes in (2, 3, 4, 7):
        for topic in ("orders", "clicks", "x", "gateway.demo"):
            leaders = [leader(topic, p, node_ids(nodes)) for p in range(3 * nodes)]
            assert sorted(leaders) == sorted(list(node_ids(nodes)) * 3), (topic, nodes)
            # consecutive partitions on consecutive nodes: any `nodes` of them use every node once
            assert all(leaders[p + 1] == leaders[p] % nodes + 1 for p in range(len(leaders) - 1))
    # and topics start on different nodes, so one-partition topics spread too
    assert {leader(f"topic-{i}", 0, node_ids(4)) for i in range(40)} == set(node_ids(4))


def test_one_node_leads_everything() -> None:
    assert {leader(t, p, node_ids(1)) for t in ("orders", "clicks", "x") for p in range(16)} == {1}
    assert list(node_ids(1)) == [1]


# ============================================================================== listeners


def _settings(listen: str, **kw: Any) -> FrontDoorSettings:
    values = {"advertised": None, "segments_root": Path("/nonexistent"), **kw}
    return FrontDoorSettings(listen=listen, cluster=KafkaCluster("127.0.0.1:1"), ingress_topic="i", response_topic="r",
                             publish_timeout_ms=1000, ingress_max_message_bytes=1 << 20, **values)


def test_each_node_listens_on_the_next_port_or_a_free_one() -> None:
    from front_door.cluster.node import BrokerAddress

    assert _settings("127.0.0.1:9093").listen_addresses() == [("127.0.0.1", p) for p in (9093, 9094, 9095, 9096)]
    assert _settings(":9093", nodes=2).listen_addresses() == [("0.0.0.0", 9093), ("0.0.0.0", 9094)]
    assert _settings("127.0.0.1:0", nodes=3).listen_addresses() == [("127.0.0.1", 0)] * 3
    assert _settings("127.0.0.1:0", nodes=2, ports=(5000, 6000)).listen_addresses() == [("127.0.0.1", 5000),
                                                                                          ("127.0.0.1", 6000)]
    assert _settings("127.0.0.1:9093", nodes=1).listen_addresses() == [("127.0.0.1", 9093)]
    bound = [BrokerAddress("127.0.0.1", 41000), BrokerAddress("127.0.0.1", 39000)]
    assert _settings("127.0.0.1:0", nodes=2).advertised_nodes(bound) == (Node(1, "127.0.0.1", 41000),
                                                                         Node(2, "127.0.0.1", 39000))
    advertised = _settings("127.0.0.1:0", nodes=2, advertised="gw.example:19093").advertised_nodes(bound)
    assert advertised == (Node(1, "gw.example", 19093), Node(2, "gw.example", 19094))
    with pytest.raises(ValueError, match="must be 1 to 100, got 0"):
        _settings("127.0.0.1:0", nodes=0)
    with pytest.raises(ValueError, match="must be 1 to 100, got 101"):  # door ids' node ranges stay apart
        _settings("127.0.0.1:0", nodes=101)
    with pytest.raises(ValueError, match="ports up to 65536"):
        _settings("127.0.0.1:65533").listen_addresses()
    with pytest.raises(ValueError, match="1 ports for 4"):
        _settings("127.0.0.1:0", ports=(5000,))


# ============================================================================== Metadata


def test_metadata_names_every_node_and_the_leader_of_every_registry_partition(tmp_path: Path) -> None:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    ctx = _context(tmp_path)
    everything = _answer(ctx, metadata.handle, 3, 12, MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [(b.node_id, b.host, b.port) for b in everything.brokers] == BROKERS
    assert everything.controller_id == CONTROLLER_ID == 1
    topics = {t.name: t for t in everything.topics}
    assert sorted(topics) == ["clicks", "orders"]
    assert topics["orders"].topic_id == topic_id("orders")
    # the one replica of each partition is its leader (no replication), spread round robin
    assert [(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
            for p in topics["orders"].partitions] == [(0, 3, [3], [3]), (1, 4, [4], [4]), (2, 1, [1], [1])]
    # every node answers for the whole cluster
    on_node_3 = _answer(ctx, metadata.handle, 3, 12, MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False), node_id=3)
    assert on_node_3 == everything

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
    assert [(b.node_id, b.host, b.port) for b in v0.brokers] == BROKERS


def test_a_single_node_front_door_is_one_broker_leading_everything(tmp_path: Path) -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    answer = _answer(_context(tmp_path, nodes=1), metadata.handle, 3, 12, MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, "gw.example", 9093)]
    assert {(p.leader_id, tuple(p.isr_nodes)) for t in answer.topics for p in t.partitions} == {(1, (1,))}


# ============================================================================== NOT_LEADER_OR_FOLLOWER


def _timeout(ms: int) -> Any:
    from kio.static.primitive import i32Timedelta

    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def _produce_request(version: int, acks: int, partitions: list[int]) -> Any:
    """A Produce of `version` to `orders` (by id from v13), one record set per partition."""
    import importlib

    from front_door.network.messages import build

    m = importlib.import_module(f"kio.schema.produce.v{version}.request")
    data = tuple(m.PartitionProduceData(index=p, records=b"x") for p in partitions)
    topic = build(m.TopicProduceData, name="orders", topic_id=topic_id("orders"), partition_data=data)
    return m.ProduceRequest(transactional_id=None, acks=acks, timeout=_timeout(1000), topic_data=(topic,))


def test_produce_to_a_node_that_does_not_lead_the_partition_is_not_leader_or_follower(tmp_path: Path) -> None:
    from front_door.network.wire import CloseConnection

    ctx = _context(tmp_path)
    # orders-0 is led by node 3 and orders-2 by node 1; both asked of node 2 (nothing reaches the ingress topic)
    old = _answer(ctx, produce.handle, 0, 9, _produce_request(9, -1, [0, 2]), node_id=2)
    (topic,) = old.responses
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (0, ErrorCode.not_leader_or_follower, -1), (2, ErrorCode.not_leader_or_follower, -1)]
    # v10+ (KIP-951): each partition names its leader, the response their endpoints
    for version in (10, 13):
        new = _answer(ctx, produce.handle, 0, version, _produce_request(version, -1, [0, 2]), node_id=2)
        (topic,) = new.responses
        assert [(p.index, p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch)
                for p in topic.partition_responses] == [(0, ErrorCode.not_leader_or_follower, 3, 0),
                                                        (2, ErrorCode.not_leader_or_follower, 1, 0)]
        assert [(n.node_id, n.host, n.port) for n in new.node_endpoints] == [BROKERS[0], BROKERS[2]]
    assert topic.topic_id == topic_id("orders")
    # acks=0: Kafka answers nothing and closes the connection on the error
    assert isinstance(_handled(ctx, produce.handle, 0, 9, _produce_request(9, 0, [0]), node_id=1), CloseConnection)


def _fetch_request(version: int, partitions: list[tuple[str, int]]) -> Any:
    """A consumer's Fetch of `version` (topics by name, or by id from v13), every field the version has."""
    import importlib

    from front_door.network.messages import build

    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    by_topic: dict[str, list[Any]] = {}
    for name, p in partitions:
        by_topic.setdefault(name, []).append(build(
            m.FetchPartition, partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20, replica_directory_id=None))
    return build(m.FetchRequest, replica_id=-1, max_wait=_timeout(0), min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                 cluster_id=None, topics=tuple(build(m.FetchTopic, topic=name, topic_id=topic_id(name),
                                                     partitions=tuple(ps)) for name, ps in by_topic.items()))


def _two_doors(tmp_path: Path) -> tuple[Context, Any, list[int], list[int], int]:
    """Door 1's context (two nodes) in a cluster with door 2: the bridge, `orders`' partitions another door
    leads, those another node of door 1 leads, and the node of door 1 that is asked."""
    from front_door.cluster.door_cluster import DoorCluster, first_node_id
    from tests.unit.test_acl_enforcement import FakeBridge
    from tests.unit.test_door_cluster import _door

    own = _door(1, 9000)  # two nodes per door
    cluster = DoorCluster(own, 9000)
    assert cluster.observe("2", _door(2, 9100).encode(), now_ms=0)
    cluster.adopt(cluster.observed())
    bridge = FakeBridge()
    ctx = Context(own.nodes("PLAINTEXT"), lambda: REGISTRY, bridge,  # type: ignore[arg-type]
                  tmp_path, ProducerIdManager(tmp_path), FrontDoorMetrics(), GroupCoordinator(MemoryGroupStore()),
                  cluster=cluster, listener="PLAINTEXT")
    leaders = {p: leader("orders", p, cluster.node_ids()) for p in range(3)}
    other_door = [p for p, n in leaders.items() if n >= first_node_id(2)]
    same_door = [p for p, n in leaders.items() if n < first_node_id(2)]
    assert other_door and len(same_door) == 1  # orders' 3 partitions over nodes 1, 2, 101, 102
    return ctx, bridge, other_door, same_door, 3 - leaders[same_door[0]]  # this door's other node


def test_produce_to_a_door_for_a_partition_another_door_leads_is_taken(tmp_path: Path) -> None:
    """Between doors a produce is taken wherever it arrives (all doors append through one ingress topic): while a
    door joins or leaves, doors a moment apart name different leaders, and a client bound to the door its
    metadata no longer names would otherwise get NOT_LEADER_OR_FOLLOWER until the next change. A partition led
    by another node of the same door is still refused."""
    ctx, bridge, other_door, same_door, asked = _two_doors(tmp_path)
    answer = _answer(ctx, produce.handle, 0, 9, _produce_request(9, -1, other_door + same_door), node_id=asked)
    (topic,) = answer.responses
    codes = {p.index: p.error_code for p in topic.partition_responses}
    assert codes == {**dict.fromkeys(other_door, ErrorCode.none), **dict.fromkeys(same_door, ErrorCode.not_leader_or_follower)}
    assert bridge.sent == [("orders", p) for p in other_door]


def test_a_consumer_at_a_door_for_a_partition_another_door_leads_is_answered(tmp_path: Path) -> None:
    """A consumer's Fetch, ListOffsets and OffsetForLeaderEpoch for a partition another door leads are answered
    from the shared segments root, as a produce is taken; another node of the same door still refuses."""
    from kio.schema.list_offsets.v9 import request as v9
    from kio.schema.offset_for_leader_epoch.v4 import request as e4

    ctx, _bridge, other_door, same_door, asked = _two_doors(tmp_path)
    refused = dict.fromkeys(same_door, ErrorCode.not_leader_or_follower)
    answered = {**dict.fromkeys(other_door, ErrorCode.none), **refused}
    fetched = _answer(ctx, fetch.handle, 1, 16, _fetch_request(16, [("orders", p) for p in other_door + same_door]),
                      node_id=asked)
    assert {p.partition_index: p.error_code for p in fetched.responses[0].partitions} == answered
    listed = _answer(ctx, list_offsets.handle, 2, 9, v9.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        v9.ListOffsetsTopic(name="orders", partitions=tuple(v9.ListOffsetsPartition(partition_index=p, timestamp=-1)
                                                            for p in other_door + same_door)),)), node_id=asked)
    assert {p.partition_index: (p.error_code, p.offset) for p in listed.topics[0].partitions} == {
        **dict.fromkeys(other_door, (ErrorCode.none, 0)), **{p: (c, -1) for p, c in refused.items()}}
    epochs = _answer(ctx, offset_for_leader_epoch.handle, 23, 4, e4.OffsetForLeaderEpochRequest(replica_id=-1, topics=(
        e4.OffsetForLeaderTopic(topic="orders", partitions=tuple(
            e4.OffsetForLeaderPartition(partition=p, current_leader_epoch=-1, leader_epoch=0)
            for p in other_door + same_door)),)), node_id=asked)
    assert {p.partition: p.error_code for p in epochs.topics[0].partitions} == answered


@pytest.mark.parametrize("version", [4, 11, 12, 13, 15, 16, 17])
def test_fetch_from_a_node_that_does_not_lead_the_partition_is_not_leader_or_follower(
        tmp_path: Path, version: int) -> None:
    ctx = _context(tmp_path)
    # asked of node 1: orders-2 is its own (an empty log), orders-0 is node 3's, orders-7 does not exist
    answer = _answer(ctx, fetch.handle, 1, version, _fetch_request(version, [("orders", 2), ("orders", 0), ("orders", 7)]),
                     node_id=1)
    (topic,) = answer.responses
    parts = {p.partition_index: p for p in topic.partitions}
    assert (parts[2].error_code, parts[2].high_watermark) == (ErrorCode.none, 0)
    assert (parts[0].error_code, parts[0].high_watermark) == (ErrorCode.not_leader_or_follower, -1)
    assert not parts[0].records
    assert parts[7].error_code == ErrorCode.unknown_topic_or_partition  # unknown stays unknown
    if version >= 12:  # KIP-951: the leader, where the version has the field
        assert (parts[0].current_leader.leader_id, parts[0].current_leader.leader_epoch) == (3, 0)
        assert parts[2].current_leader.leader_id == -1  # unset where this node answers itself
    endpoints = getattr(answer, "node_endpoints", ())
    assert [(n.node_id, n.host, n.port) for n in endpoints] == ([BROKERS[2]] if version >= 16 else [])


def test_a_fetch_reads_its_partitions_in_order_within_the_request_max_bytes(tmp_path: Path) -> None:
    """`fetch.read_partitions`, one worker thread's reads for the whole request: the first partition with data
    gets at least its first batch whole (KIP-74) even above the limits, the later ones what the request's
    `max_bytes` has left, each within its own `partition_max_bytes`; a partition at its end reads empty."""
    from storage.batch_appender import append_batches
    from validators.codec.record_batch import build_record_batch

    batch = build_record_batch([(1_700_000_000_000, b"k", b"v" * 100)])
    for p in (0, 1, 2):
        append_batches(tmp_path, "orders", p, 0, [(0, 0, batch, 1_700_000_000_000)])
    whole = fetch.read_partitions(tmp_path, [("orders", 2, 1, 1 << 20), ("orders", 0, 0, 1), ("orders", 1, 0, 1 << 20)],
                                  1, False)
    assert [(d.error, d.high_watermark, d.records) for d in whole] == [
        (ErrorCode.none, 1, b""), (ErrorCode.none, 1, batch), (ErrorCode.none, 1, b"")]
    room = fetch.read_partitions(tmp_path, [("orders", 0, 0, 1 << 20), ("orders", 1, 0, 10)], 1 << 20, False)
    assert [d.records for d in room] == [batch, batch[:10]]
    # a later part of a request that already read something: the slice is not raised to a whole batch
    assert fetch.read_partitions(tmp_path, [("orders", 0, 0, 1)], 1, False, nothing_read=False)[0].records == batch[:1]


def test_a_fetch_read_in_parts_answers_as_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Fetch's partitions go to worker threads `READ_CHUNK` at a time; the answer is the same, in order."""
    from storage.batch_appender import append_batches
    from validators.codec.record_batch import build_record_batch

    batches = [build_record_batch([(1_700_000_000_000, b"k%d" % p, b"v" * 100)]) for p in range(3)]
    for p, batch in enumerate(batches):
        append_batches(tmp_path, "orders", p, 0, [(0, 0, batch, 1_700_000_000_000)])
    ctx = _context(tmp_path, nodes=1)

    def answer() -> list[tuple[int, bytes]]:
        (topic,) = _answer(ctx, fetch.handle, 1, 16, _fetch_request(16, [("orders", p) for p in (2, 0, 1)])).responses
        return [(p.partition_index, p.records) for p in topic.partitions]

    whole = answer()
    monkeypatch.setattr(fetch, "READ_CHUNK", 1)
    assert answer() == whole == [(2, batches[2]), (0, batches[0]), (1, batches[1])]


def test_a_consumer_at_the_tail_is_answered_without_a_read_until_the_partition_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition fetched at its log end is answered from what was read there while its commit record stays
    the same (a long poll's rechecks, the next fetches); the next commit is read at once. A partition nothing was
    appended to is empty without a read. Where a `stat` may be stale (NFS), every fetch reads."""
    from storage.batch_appender import append_batches
    from validators.codec.record_batch import build_record_batch

    first, second = (build_record_batch([(1_700_000_000_000 + i, b"k", b"v")], base_offset=i) for i in (0, 1))
    append_batches(tmp_path, "orders", 0, 0, [(0, 0, first, 1_700_000_000_000)])
    reads: list[tuple[str, int, int]] = []
    real = fetch.read_partition
    monkeypatch.setattr(fetch, "read_partition", lambda root, t, p, o, *a: (reads.append((t, p, o)),
                                                                            real(root, t, p, o, *a))[1])
    tail = [("orders", 0, 1, 1 << 20), ("orders", 1, 0, 1 << 20)]
    assert [(d.high_watermark, d.records) for d in fetch.read_partitions(tmp_path, tail, 1 << 20, False)] == [
        (1, b""), (0, b"")]
    assert [(d.high_watermark, d.records) for d in fetch.read_partitions(tmp_path, tail, 1 << 20, False)] == [
        (1, b""), (0, b"")]
    assert reads == [("orders", 0, 1)]  # the tail read once; orders-1 has no directory: never read
    append_batches(tmp_path, "orders", 0, 1, [(1, 1, second, 1_700_000_000_001)])
    (data, _) = fetch.read_partitions(tmp_path, tail, 1 << 20, False)
    assert (data.high_watermark, data.records) == (2, second)
    assert reads == [("orders", 0, 1), ("orders", 0, 1)]
    monkeypatch.setattr(fetch, "local_filesystem", lambda root: False)
    reads.clear()
    for _ in range(2):
        fetch.read_partitions(tmp_path, [("orders", 0, 2, 1 << 20), ("orders", 1, 0, 1 << 20)], 1 << 20, False)
    assert reads == [("orders", 0, 2), ("orders", 1, 0)] * 2


def test_list_offsets_from_a_node_that_does_not_lead_the_partition_is_not_leader_or_follower(tmp_path: Path) -> None:
    from kio.schema.list_offsets.v9 import request as v9

    ctx = _context(tmp_path)
    latest = -1
    answer = _answer(ctx, list_offsets.handle, 2, 9, v9.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        v9.ListOffsetsTopic(name="orders", partitions=tuple(v9.ListOffsetsPartition(partition_index=p, timestamp=latest)
                                                            for p in (0, 1, 2, 5))),
        v9.ListOffsetsTopic(name="nope", partitions=(v9.ListOffsetsPartition(partition_index=0, timestamp=latest),)))),
        node_id=4)
    orders, nope = answer.topics
    assert [(p.partition_index, p.error_code, p.offset) for p in orders.partitions] == [
        (0, ErrorCode.not_leader_or_follower, -1), (1, ErrorCode.none, 0), (2, ErrorCode.not_leader_or_follower, -1),
        (5, ErrorCode.unknown_topic_or_partition, -1)]
    assert [p.error_code for p in nope.partitions] == [ErrorCode.unknown_topic_or_partition]


def test_api_versions_advertise_what_is_served_and_not_kip_848(tmp_path: Path) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    answer = _answer(_context(tmp_path), api_versions.handle, 18, 3,
                     ApiVersionsRequest(client_software_name="unit", client_software_version="1"))
    assert answer.error_code == ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == api_versions.ADVERTISED
    # a client switches to KIP-848's protocol when it sees ConsumerGroupHeartbeat: never advertised
    assert not set(api_versions.ADVERTISED) & set(REFUSED_APIS)


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


@pytest.mark.parametrize("api_key", sorted(REFUSED_APIS))
def test_every_version_of_every_refused_api_has_an_encodable_error_answer(api_key: int) -> None:
    from front_door.network.messages import error_response

    low, high = READABLE[api_key]
    for version in range(low, high + 1):
        body = error_response(api_key, version, ErrorCode.unsupported_version, unsupported.MESSAGE)
        assert len(encode_response(api_key, version, 1, body)) > 8


@pytest.mark.parametrize("taken_node", [1, 2])
def test_a_taken_port_fails_the_start_and_leaves_nothing_running(tmp_path: Path, taken_node: int) -> None:
    import socket

    from front_door.server import FrontDoor

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # node i listens on the base port + i - 1: node `taken_node`'s is the taken one
        settings = _settings(f"127.0.0.1:{port - taken_node + 1}", nodes=2, segments_root=tmp_path)
        door = FrontDoor(settings, lambda: REGISTRY, FrontDoorMetrics())
        with pytest.raises(OSError):
            door.start()
        assert not door._thread.is_alive() and door.context is None


def test_metadata_of_thousands_of_partitions_is_built_off_the_loop_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `OFF_LOOP_PARTITIONS` the answer is built on a thread of its own: the same answer, every partition."""
    import threading

    from kio.schema.metadata.v12.request import MetadataRequest

    ctx = _context(tmp_path)
    ctx.registry = lambda: TopicRegistry.from_json({"topics": {"wide": {"partitions": 5000, "configs": {}}}})
    request = MetadataRequest(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    built_on: list[str] = []
    real = metadata._topic

    def recording(*args: Any, **kwargs: Any) -> Any:
        built_on.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(metadata, "_topic", recording)
    off_loop = _answer(ctx, metadata.handle, 3, 12, request)
    monkeypatch.setattr(metadata, "OFF_LOOP_PARTITIONS", 10**9)
    on_loop = _answer(ctx, metadata.handle, 3, 12, request)
    assert built_on[0] != built_on[1] == threading.current_thread().name
    assert off_loop == on_loop and metadata.partitions_in(off_loop) == 5000
    assert [p.partition_index for p in off_loop.topics[0].partitions] == list(range(5000))
