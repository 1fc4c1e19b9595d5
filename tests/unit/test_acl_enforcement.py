"""Kafka's ACLs enforced by the front door's APIs, each with the resource, operation and error Kafka's
`KafkaApis` uses: produce (nothing of a denied topic reaches the ingress topic), InitProducerId (KIP-679),
fetch, ListOffsets, DescribeProducers, Metadata (left out of a listing, TOPIC_AUTHORIZATION_FAILED when named,
authorized operations), the group APIs, OffsetCommit's topic READ, OffsetFetch, DescribeConfigs, DescribeCluster
and the refused topic admin APIs; each denial counted by API."""

from __future__ import annotations

import asyncio
import datetime
import struct
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from front_door.apis import (
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from front_door.apis.metadata import AUTHORIZED_OPERATIONS_OMITTED
from front_door.apis.registry import READABLE
from front_door.cluster.node import Node
from front_door.cluster.topic_ids import topic_id
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings
from front_door.ingress_bridge import Answers
from front_door.metrics import FrontDoorMetrics
from front_door.network.messages import build
from front_door.network.principal import KafkaPrincipal, user
from front_door.network.wire import CloseConnection, encode_response, parse_request
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.acls import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from front_door.security.authorizer import AclAuthorizer
from tests.memory_group_store import MemoryGroupStore
from tests.memory_security_store import MemorySecurityStore
from tests.unit.test_acl_authorizer import acl
from tests.unit.test_front_door import REGISTRY, _fetch_request, _frame, _timeout

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE = user("alice")
GROUP_ID = "app"
SESSION = datetime.timedelta(seconds=10)


class FakeBridge:
    """The ingress bridge's produce side: what was handed over, each answered appended at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def too_large(self, topic: str, partition: int, size: int) -> dict[str, Any] | None:
        return None

    def send(self, topic: str, partition: int, records: bytes, answers: Answers | None, *, client_id: str | None,
             acks: int, principal: str, transactional_id: str | None = None, origin: str | None = None) -> str:
        self.sent.append((topic, partition))
        request_id = f"r{len(self.sent)}"
        if answers is not None:
            answers.expect()
            answers.answer(request_id, {"error_code": 0, "base_offset": 41, "log_append_time_ms": -1,
                                        "log_start_offset": 0, "record_errors": []})
        return request_id

    def forget(self, request_id: str) -> None:
        pass


class Door:
    """A one-node front door's context with an authorizer holding `bindings`, and what it was asked."""

    def __init__(self, tmp_path: Path, *bindings: AclBinding, **kw: Any) -> None:
        self.denials: list[str] = []
        self.authorizer = AclAuthorizer(MemorySecurityStore(), on_denied=self.denials.append, **kw)  # type: ignore[arg-type]
        assert asyncio.run(self.authorizer.create(bindings)) == [None] * len(bindings)
        self.bridge = FakeBridge()
        self.ctx = Context((Node(1, "gw.example", 9093),), lambda: REGISTRY, self.bridge,  # type: ignore[arg-type]
                           tmp_path, ProducerIdManager(tmp_path), FrontDoorMetrics(),
                           GroupCoordinator(MemoryGroupStore(), GroupSettings(initial_rebalance_delay_ms=0)),
                           authorizer=self.authorizer)

    def handled(self, handler: Any, api_key: int, version: int, body: Any, principal: KafkaPrincipal = ALICE) -> Any:
        request = parse_request(_frame(api_key, version, body), READABLE, 1, "/10.0.0.1", principal)
        return asyncio.run(handler(self.ctx, request))

    def answer(self, handler: Any, api_key: int, version: int, body: Any, principal: KafkaPrincipal = ALICE) -> Any:
        """Handled, encoded as the server sends it, and decoded with kio."""
        encoded = encode_response(api_key, version, 7, self.handled(handler, api_key, version, body, principal))
        schema = load_response_schema(api_key, version)
        _, used = entity_reader(schema.__header_schema__)(encoded, 4)
        decoded, size = entity_reader(schema)(encoded, 4 + used)
        assert 4 + used + size == len(encoded) and struct.unpack(">i", encoded[:4])[0] == len(encoded) - 4
        return decoded


def req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _produce(version: int, acks: int, topics: dict[str, list[int]]) -> Any:
    m = req(0, version)
    data = tuple(build(m.TopicProduceData, name=name, topic_id=topic_id(name), partition_data=tuple(
        m.PartitionProduceData(index=p, records=b"x") for p in partitions)) for name, partitions in topics.items())
    return m.ProduceRequest(transactional_id=None, acks=acks, timeout=_timeout(1000), topic_data=data)


# ============================================================================== producing


@pytest.mark.parametrize("version", [9, 13])
def test_produce_needs_write_and_nothing_denied_reaches_the_ingress_topic(tmp_path: Path, version: int) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.WRITE))
    answer = door.answer(produce.handle, 0, version, _produce(version, -1, {"orders": [0, 1], "clicks": [0]}))
    codes = {(getattr(t, "name", None) or t.topic_id, p.index): (p.error_code, p.base_offset)
             for t in answer.responses for p in t.partition_responses}
    orders, clicks = ("orders", "clicks") if version < 13 else (topic_id("orders"), topic_id("clicks"))
    assert codes == {(orders, 0): (ErrorCode.none, 41), (orders, 1): (ErrorCode.none, 41),
                     (clicks, 0): (ErrorCode.topic_authorization_failed, -1)}
    assert door.bridge.sent == [("orders", 0), ("orders", 1)]
    assert door.denials == ["produce"]  # one per denied topic, not per partition


def test_a_denied_produce_with_acks_0_closes_the_connection_and_sends_nothing(tmp_path: Path) -> None:
    door = Door(tmp_path)
    assert isinstance(door.handled(produce.handle, 0, 9, _produce(9, 0, {"orders": [0]})), CloseConnection)
    assert door.bridge.sent == []


def test_produce_authorization_comes_before_invalid_acks_and_super_users_need_no_acl(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.WRITE), super_users=frozenset({user("admin")}))
    answer = door.answer(produce.handle, 0, 9, _produce(9, 2, {"orders": [0], "clicks": [0]}))
    assert [(t.name, t.partition_responses[0].error_code) for t in answer.responses] == [
        ("orders", ErrorCode.invalid_required_acks), ("clicks", ErrorCode.topic_authorization_failed)]
    admin = door.answer(produce.handle, 0, 9, _produce(9, -1, {"clicks": [0]}), user("admin"))
    assert admin.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert door.bridge.sent == [("clicks", 0)]


@pytest.mark.parametrize(("bindings", "allowed"), [
    ((), False),
    ((acl("orders", "User:alice", Op.READ),), False),
    ((acl("kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE, resource_type=CLUSTER),), True),
    ((acl("orders", "User:alice", Op.WRITE),), True),  # KIP-679: WRITE on any topic
    ((acl("pay.", "User:*", Op.ALL, pattern_type=PatternType.PREFIXED),), True),
    ((acl("orders", "User:alice", Op.WRITE), acl("orders", "User:alice", Op.WRITE, AclPermissionType.DENY)), False),
])
def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(
        tmp_path: Path, bindings: tuple[AclBinding, ...], allowed: bool) -> None:
    door = Door(tmp_path, *bindings)
    answer = door.answer(init_producer_id.handle, 22, 5, req(22, 5).InitProducerIdRequest(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1))
    if allowed:
        assert answer.error_code == ErrorCode.none and answer.producer_id >= 0
        assert door.denials == []
    else:
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
            ErrorCode.cluster_authorization_failed, -1, -1)
        assert door.denials == ["init_producer_id"]


# ============================================================================== consuming


@pytest.mark.parametrize("version", [11, 13])
def test_fetch_needs_read(tmp_path: Path, version: int) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.READ), acl("clicks", "User:alice", Op.WRITE))
    answer = door.answer(fetch.handle, 1, version, _fetch_request(version, [("orders", 0), ("clicks", 0)]))
    codes = [(p.error_code, p.high_watermark) for t in answer.responses for p in t.partitions]
    assert codes == [(ErrorCode.none, 0), (ErrorCode.topic_authorization_failed, -1)]
    assert door.denials == ["fetch"]


def test_list_offsets_and_offset_for_leader_epoch_need_describe(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.READ))  # READ implies DESCRIBE
    lo = req(2, 9)
    listed = door.answer(list_offsets.handle, 2, 9, lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=tuple(
        lo.ListOffsetsTopic(name=n, partitions=(lo.ListOffsetsPartition(partition_index=0, timestamp=-1),))
        for n in ("orders", "clicks"))))
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].offset) for t in listed.topics] == [
        ("orders", ErrorCode.none, 0), ("clicks", ErrorCode.topic_authorization_failed, -1)]
    e = req(23, 4)
    epochs = door.answer(offset_for_leader_epoch.handle, 23, 4, e.OffsetForLeaderEpochRequest(replica_id=-1, topics=tuple(
        e.OffsetForLeaderTopic(topic=n, partitions=(e.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=0),)) for n in ("orders", "clicks"))))
    assert [(t.topic, t.partitions[0].error_code) for t in epochs.topics] == [
        ("orders", ErrorCode.none), ("clicks", ErrorCode.topic_authorization_failed)]
    assert door.denials == ["list_offsets", "offset_for_leader_epoch"]


def test_describe_producers_needs_read(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.READ), acl("clicks", "User:alice", Op.DESCRIBE))
    m = req(61, 0)
    answer = door.answer(describe_producers.handle, 61, 0, m.DescribeProducersRequest(topics=tuple(
        m.TopicRequest(name=n, partition_indexes=(0,)) for n in ("orders", "clicks"))))
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].error_message) for t in answer.topics] == [
        ("orders", ErrorCode.none, None),
        ("clicks", ErrorCode.topic_authorization_failed, "Topic authorization failed.")]
    assert door.denials == ["describe_producers"]


# ============================================================================== metadata


def test_metadata_leaves_out_what_may_not_be_described_and_refuses_it_when_named(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.WRITE), acl("kafka-cluster", "User:alice", Op.DESCRIBE,
                                                                     resource_type=CLUSTER))
    m = req(3, 12)
    every = door.answer(metadata.handle, 3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                  include_topic_authorized_operations=False))
    assert [t.name for t in every.topics] == ["orders"]
    assert door.denials == []  # a listing's omissions are not logged
    named = door.answer(metadata.handle, 3, 12, m.MetadataRequest(topics=(
        m.MetadataRequestTopic(topic_id=None, name="clicks"), m.MetadataRequestTopic(topic_id=None, name="ghost"),
        m.MetadataRequestTopic(topic_id=topic_id("clicks"), name=None),
        m.MetadataRequestTopic(topic_id=None, name="orders")),
        allow_auto_topic_creation=False, include_topic_authorized_operations=True))
    assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in named.topics] == [
        ("clicks", None, ErrorCode.topic_authorization_failed, 0),  # the zero id (kio reads it as None)
        ("ghost", None, ErrorCode.topic_authorization_failed, 0),  # existence is not given away
        (None, topic_id("clicks"), ErrorCode.topic_authorization_failed, 0),  # nor a topic id's name
        ("orders", topic_id("orders"), ErrorCode.none, 3)]
    assert named.topics[3].topic_authorized_operations == 1 << Op.WRITE | 1 << Op.DESCRIBE
    assert named.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert door.denials == ["metadata"] * 2  # clicks (asked twice, by name and by id) and ghost
    v10 = req(3, 10)
    cluster = door.answer(metadata.handle, 3, 10, v10.MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False))
    assert cluster.cluster_authorized_operations == 1 << Op.DESCRIBE
    denied = Door(tmp_path).answer(metadata.handle, 3, 10, v10.MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False))
    assert denied.cluster_authorized_operations == 0


def test_allow_everyone_if_no_acl_found_lets_metadata_list_unprotected_topics(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:bob", Op.ALL), allow_everyone_if_no_acl_found=True)
    every = door.answer(metadata.handle, 3, 12, req(3, 12).MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert [t.name for t in every.topics] == ["clicks"]


# ============================================================================== groups


def _join(door: Door, member_id: str = "m") -> Any:
    j = req(11, 9)
    return door.answer(join_group.handle, 11, 9, j.JoinGroupRequest(
        group_id=GROUP_ID, session_timeout=SESSION, rebalance_timeout=SESSION, member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer", protocols=(j.JoinGroupRequestProtocol(name="range", metadata=b"s"),), reason=None))


def test_the_group_apis_need_their_group_permission(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("other", "User:alice", Op.READ, resource_type=GROUP))
    joined = _join(door)
    assert (joined.error_code, joined.member_id, joined.generation_id) == (ErrorCode.group_authorization_failed, "", -1)
    assert door.ctx.groups.describe(GROUP_ID) is None  # the coordinator never saw it
    beat = door.answer(heartbeat.handle, 12, 4, req(12, 4).HeartbeatRequest(
        group_id=GROUP_ID, generation_id=1, member_id="m", group_instance_id=None))
    assert beat.error_code == ErrorCode.group_authorization_failed
    synced = door.answer(sync_group.handle, 14, 5, req(14, 5).SyncGroupRequest(
        group_id=GROUP_ID, generation_id=1, member_id="m", group_instance_id=None, protocol_type="consumer",
        protocol_name="range", assignments=()))
    assert synced.error_code == ErrorCode.group_authorization_failed
    left = door.answer(leave_group.handle, 13, 5, req(13, 5).LeaveGroupRequest(group_id=GROUP_ID, members=(
        req(13, 5).MemberIdentity(member_id="m", group_instance_id=None, reason=None),)))
    assert (left.error_code, left.members) == (ErrorCode.group_authorization_failed, ())
    found = door.answer(find_coordinator.handle, 10, 4, req(10, 4).FindCoordinatorRequest(
        key_type=0, coordinator_keys=(GROUP_ID, "other")))
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
        (GROUP_ID, ErrorCode.group_authorization_failed, -1), ("other", ErrorCode.none, 1)]
    described = door.answer(describe_groups.handle, 15, 5, req(15, 5).DescribeGroupsRequest(
        groups=(GROUP_ID, "other"), include_authorized_operations=True))
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (GROUP_ID, ErrorCode.group_authorization_failed), ("other", ErrorCode.none)]
    assert described.groups[1].authorized_operations == 1 << Op.READ | 1 << Op.DESCRIBE
    deleted = door.answer(delete_groups.handle, 42, 2, req(42, 2).DeleteGroupsRequest(groups_names=(GROUP_ID, "other")))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (GROUP_ID, ErrorCode.group_authorization_failed), ("other", ErrorCode.group_authorization_failed)]
    assert door.denials == ["join_group", "heartbeat", "sync_group", "leave_group", "find_coordinator",
                            "describe_groups", "delete_groups", "delete_groups"]


def test_list_groups_shows_only_describable_groups_without_cluster_describe(tmp_path: Path) -> None:
    door = Door(tmp_path, acl(GROUP_ID, "User:alice", Op.READ, resource_type=GROUP),
                acl("kafka-cluster", "User:admin", Op.DESCRIBE, resource_type=CLUSTER))
    assert _join(door, "").error_code == ErrorCode.member_id_required  # the group exists now
    assert asyncio.run(_join_as_admin(door)) is None
    listing = req(16, 5).ListGroupsRequest(states_filter=(), types_filter=())
    assert sorted(g.group_id for g in door.answer(list_groups.handle, 16, 5, listing, user("admin")).groups) == [
        GROUP_ID, "hidden"]
    assert [g.group_id for g in door.answer(list_groups.handle, 16, 5, listing).groups] == [GROUP_ID]
    assert door.denials == []


async def _join_as_admin(door: Door) -> None:
    """A second group, made by the coordinator directly (no ACL names it)."""
    from front_door.groups.classic_group import Protocol
    from front_door.groups.coordinator_api import JoinRequest

    await door.ctx.groups.join(JoinRequest(
        group_id="hidden", member_id="", group_instance_id=None, session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, protocol_type="consumer", protocols=(Protocol("range", b"s"),),
        client_id="c", client_host="/h", require_known_member_id=True))


def test_offset_commit_needs_group_read_and_topic_read(tmp_path: Path) -> None:
    door = Door(tmp_path, acl(GROUP_ID, "User:alice", Op.READ, resource_type=GROUP),
                acl("orders", "User:alice", Op.READ))
    c = req(8, 9)

    def commit(principal: KafkaPrincipal = ALICE) -> Any:
        return door.answer(offset_commit.handle, 8, 9, c.OffsetCommitRequest(
            group_id=GROUP_ID, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=tuple(
                c.OffsetCommitRequestTopic(name=n, partitions=(c.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=None),))
                for n in ("orders", "clicks"))), principal)

    answer = commit()
    assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
        ("orders", ErrorCode.none), ("clicks", ErrorCode.topic_authorization_failed)]
    assert {tp: o.offset for tp, o in door.ctx.groups.fetch_offsets(GROUP_ID, None).items()} == {("orders", 0): 5}
    bob = commit(user("bob"))
    assert [t.partitions[0].error_code for t in bob.topics] == [ErrorCode.group_authorization_failed] * 2
    assert door.denials == ["offset_commit", "offset_commit"]

    f = req(9, 8)
    fetched = door.answer(offset_fetch.handle, 9, 8, f.OffsetFetchRequest(groups=(
        f.OffsetFetchRequestGroup(group_id=GROUP_ID, topics=(
            f.OffsetFetchRequestTopics(name="orders", partition_indexes=(0,)),
            f.OffsetFetchRequestTopics(name="clicks", partition_indexes=(0,)))),
        f.OffsetFetchRequestGroup(group_id="other", topics=None)), require_stable=False))
    mine, other = fetched.groups
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in mine.topics] == [
        ("orders", ErrorCode.none, 5), ("clicks", ErrorCode.topic_authorization_failed, -1)]
    assert (other.error_code, other.topics) == (ErrorCode.group_authorization_failed, ())


def test_offset_fetch_of_every_partition_leaves_out_undescribable_topics(tmp_path: Path) -> None:
    door = Door(tmp_path, acl(GROUP_ID, "User:alice", Op.READ, resource_type=GROUP),
                acl("orders", "User:alice", Op.READ), super_users=frozenset({user("admin")}))
    c = req(8, 9)
    door.answer(offset_commit.handle, 8, 9, c.OffsetCommitRequest(
        group_id=GROUP_ID, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=tuple(
            c.OffsetCommitRequestTopic(name=n, partitions=(c.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=9, committed_leader_epoch=-1, committed_metadata=None),))
            for n in ("orders", "clicks"))), user("admin"))
    f = req(9, 8)
    every = f.OffsetFetchRequest(groups=(f.OffsetFetchRequestGroup(group_id=GROUP_ID, topics=None),), require_stable=False)
    assert sorted(t.name for t in door.answer(offset_fetch.handle, 9, 8, every, user("admin")).groups[0].topics) == [
        "clicks", "orders"]
    assert [t.name for t in door.answer(offset_fetch.handle, 9, 8, every).groups[0].topics] == ["orders"]


# ============================================================================== admin


def test_describe_configs_needs_describe_configs_on_the_topic_or_the_cluster(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("orders", "User:alice", Op.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    m = req(32, 4)
    answer = door.answer(describe_configs.handle, 32, 4, m.DescribeConfigsRequest(resources=(
        m.DescribeConfigsResource(resource_type=2, resource_name="orders", configuration_keys=None),
        m.DescribeConfigsResource(resource_type=2, resource_name="clicks", configuration_keys=None),
        m.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)),
        include_synonyms=False, include_documentation=False))
    assert [(r.resource_name, r.error_code, r.error_message, bool(r.configs)) for r in answer.results] == [
        ("orders", ErrorCode.none, None, True),
        ("clicks", ErrorCode.topic_authorization_failed, "Topic authorization failed.", False),
        ("1", ErrorCode.cluster_authorization_failed, "Cluster authorization failed.", False)]
    assert door.denials == ["describe_configs"] * 2


def test_describe_cluster_is_open_and_its_operations_need_describe(tmp_path: Path) -> None:
    body = req(60, 1).DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1)
    denied = Door(tmp_path).answer(describe_cluster.handle, 60, 1, body)
    assert (denied.error_code, len(denied.brokers), denied.cluster_authorized_operations) == (ErrorCode.none, 1, 0)
    door = Door(tmp_path, acl("kafka-cluster", "User:alice", Op.ALTER, resource_type=CLUSTER))
    assert door.answer(describe_cluster.handle, 60, 1, body).cluster_authorized_operations == \
        1 << Op.ALTER | 1 << Op.DESCRIBE


def test_topic_admin_apis_answer_authorization_before_their_refusal(tmp_path: Path) -> None:
    door = Door(tmp_path, acl("new", "User:alice", Op.CREATE), acl("orders", "User:alice", Op.ALTER),
                acl("clicks", "User:alice", Op.DELETE))
    ct = req(19, 7)
    created = door.answer(create_topics.create_topics, 19, 7, ct.CreateTopicsRequest(topics=tuple(ct.CreatableTopic(
        name=n, num_partitions=1, replication_factor=1, assignments=(), configs=()) for n in ("new", "other")),
        timeout=datetime.timedelta(seconds=5), validate_only=False))
    assert [(t.name, t.error_code, t.topic_config_error_code) for t in created.topics] == [
        ("new", ErrorCode.policy_violation, ErrorCode.topic_authorization_failed),
        ("other", ErrorCode.topic_authorization_failed, 0)]
    assert created.topics[1].error_message == "Authorization failed."
    dt = req(20, 6)
    deleted = door.answer(delete_topics.delete_topics, 20, 6, dt.DeleteTopicsRequest(topics=(
        dt.DeleteTopicState(name="clicks", topic_id=uuid.UUID(int=0)), dt.DeleteTopicState(name="orders", topic_id=uuid.UUID(int=0)),
        dt.DeleteTopicState(name=None, topic_id=topic_id("orders"))), timeout=datetime.timedelta(seconds=5)))
    assert [(t.name, t.error_code) for t in deleted.responses] == [
        ("clicks", ErrorCode.topic_deletion_disabled), ("orders", ErrorCode.topic_authorization_failed),
        ("orders", ErrorCode.topic_authorization_failed)]  # ALTER implies DESCRIBE: the id's name may be shown
    cp = req(37, 3)
    altered = door.answer(create_partitions.create_partitions, 37, 3, cp.CreatePartitionsRequest(topics=tuple(
        cp.CreatePartitionsTopic(name=n, count=5, assignments=None) for n in ("orders", "clicks")),
        timeout=datetime.timedelta(seconds=5), validate_only=False))
    assert [(r.name, r.error_code) for r in altered.results] == [
        ("orders", ErrorCode.policy_violation), ("clicks", ErrorCode.topic_authorization_failed)]


def test_without_an_authorizer_nothing_is_checked(tmp_path: Path) -> None:
    door = Door(tmp_path)
    door.ctx.authorizer = None
    answer = door.answer(produce.handle, 0, 9, _produce(9, -1, {"clicks": [0]}))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
    every = door.answer(metadata.handle, 3, 12, req(3, 12).MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True))
    assert sorted(t.name for t in every.topics) == ["clicks", "orders"]
    # AuthHelper.authorizedOperations without an authorizer: every operation Kafka supports on a topic
    topic_operations = sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.TOPIC])
    assert {t.topic_authorized_operations for t in every.topics} == {topic_operations}
    assert door.denials == []
