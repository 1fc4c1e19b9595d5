"""The group APIs at the front door, through Kafka's wire format (requests encoded and answers decoded
with kio): one consumer's life in the versions today's clients use and in the oldest ones served, the
coordinator every node names, NOT_COORDINATOR from the others, and a transaction coordinator without its topic."""

from __future__ import annotations

import datetime
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from front_door.apis import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_fetch,
    sync_group,
)
from front_door.apis.registry import READABLE
from front_door.cluster.leadership import node_ids
from front_door.cluster.node import Node
from front_door.cluster.topic_ids import topic_id
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings
from front_door.groups.placement import coordinator, partition_for
from front_door.metrics import FrontDoorMetrics
from front_door.network.wire import BadRequestError, parse_request
from front_door.producer_id_manager import ProducerIdManager
from tests.memory_group_store import MemoryGroupStore
from tests.unit.test_front_door import REGISTRY, _answer

NODES = 4
GROUP = "orders-app"
HOME = coordinator(GROUP, node_ids(NODES))
AWAY = HOME % NODES + 1
SESSION = datetime.timedelta(seconds=10)
# a group no one made, coordinated by the same node
UNKNOWN = next(g for g in (f"unknown-{i}" for i in range(100)) if coordinator(g, node_ids(NODES)) == HOME)


def _context(tmp_path: Path) -> Context:
    return Context(tuple(Node(n, "gw.example", 9092 + n) for n in node_ids(NODES)), lambda: REGISTRY,
                   bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                   groups=GroupCoordinator(MemoryGroupStore(), GroupSettings(initial_rebalance_delay_ms=0)))


def req(api_key: int, version: int) -> ModuleType:
    """The kio module of one request version (its nested entity classes)."""
    return sys.modules[load_request_schema(api_key, version).__module__]


def test_find_coordinator_names_one_node_for_a_group_on_every_node(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    m4 = req(10, 4)
    for node in node_ids(NODES):
        found = _answer(ctx, find_coordinator.handle, 10, 4, m4.FindCoordinatorRequest(
            key_type=0, coordinator_keys=(GROUP, "other", "")), node_id=node)
        assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
            (GROUP, ErrorCode.none, HOME), ("other", ErrorCode.none, coordinator("other", node_ids(NODES))),
            ("", ErrorCode.invalid_request, -1)]
        assert (found.coordinators[0].host, found.coordinators[0].port) == ("gw.example", 9092 + HOME)
    old = _answer(ctx, find_coordinator.handle, 10, 0, req(10, 0).FindCoordinatorRequest(key=GROUP))
    assert (old.error_code, old.node_id) == (ErrorCode.none, HOME)
    txn = _answer(ctx, find_coordinator.handle, 10, 3, req(10, 3).FindCoordinatorRequest(key="tx", key_type=1))
    assert txn.error_code == ErrorCode.coordinator_not_available  # this door has no transaction state topic
    assert "transaction state topic" in txn.error_message
    ctx.groups.unavailable = "groups topic gateway.consumer_offsets does not exist"  # could not be read at start
    down = _answer(ctx, find_coordinator.handle, 10, 4, m4.FindCoordinatorRequest(key_type=0, coordinator_keys=(GROUP,)))
    assert (down.coordinators[0].error_code, down.coordinators[0].node_id) == (ErrorCode.coordinator_not_available, -1)
    assert "does not exist" in down.coordinators[0].error_message


def test_a_consumers_life_through_the_wire(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    j = req(11, 9)

    def join(member_id: str) -> Any:
        return _answer(ctx, join_group.handle, 11, 9, j.JoinGroupRequest(
            group_id=GROUP, session_timeout=SESSION, rebalance_timeout=SESSION, member_id=member_id,
            group_instance_id=None, protocol_type="consumer",
            protocols=(j.JoinGroupRequestProtocol(name="range", metadata=b"sub"),), reason=None), node_id=HOME)

    first = join("")
    assert first.error_code == ErrorCode.member_id_required
    joined = join(first.member_id)
    assert (joined.error_code, joined.generation_id, joined.protocol_type, joined.protocol_name) == \
           (ErrorCode.none, 1, "consumer", "range")
    member = joined.member_id
    assert [m.member_id for m in joined.members] == [member]
    s = req(14, 5)
    synced = _answer(ctx, sync_group.handle, 14, 5, s.SyncGroupRequest(
        group_id=GROUP, generation_id=1, member_id=member, group_instance_id=None, protocol_type="consumer",
        protocol_name="range", assignments=(s.SyncGroupRequestAssignment(member_id=member, assignment=b"p"),)),
        node_id=HOME)
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"p")
    beat = _answer(ctx, heartbeat.handle, 12, 4, req(12, 4).HeartbeatRequest(
        group_id=GROUP, generation_id=1, member_id=member, group_instance_id=None), node_id=HOME)
    assert beat.error_code == ErrorCode.none

    c = req(8, 9)
    committed = _answer(ctx, offset_commit.handle, 8, 9, c.OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=1, member_id=member, group_instance_id=None, topics=(
            c.OffsetCommitRequestTopic(name="orders", partitions=(
                c.OffsetCommitRequestPartition(partition_index=0, committed_offset=17, committed_leader_epoch=0,
                                               committed_metadata="m"),
                c.OffsetCommitRequestPartition(partition_index=9, committed_offset=1, committed_leader_epoch=-1,
                                               committed_metadata=None))),
            c.OffsetCommitRequestTopic(name="nope", partitions=(
                c.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                               committed_metadata=None),)))), node_id=HOME)
    assert [[(p.partition_index, p.error_code) for p in t.partitions] for t in committed.topics] == [
        [(0, ErrorCode.none), (9, ErrorCode.unknown_topic_or_partition)], [(0, ErrorCode.unknown_topic_or_partition)]]

    f = req(9, 8)
    fetched = _answer(ctx, offset_fetch.handle, 9, 8, f.OffsetFetchRequest(groups=(
        f.OffsetFetchRequestGroup(group_id=GROUP, topics=None),
        f.OffsetFetchRequestGroup(group_id=GROUP, topics=(f.OffsetFetchRequestTopics(name="orders", partition_indexes=(0, 1)),)),
    ), require_stable=False), node_id=HOME)
    every, named = fetched.groups
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata) for p in t.partitions])
            for t in every.topics] == [("orders", [(0, 17, 0, "m")])]
    assert [(p.partition_index, p.committed_offset) for p in named.topics[0].partitions] == [(0, 17), (1, -1)]
    f10 = req(9, 10)
    by_id = _answer(ctx, offset_fetch.handle, 9, 10, f10.OffsetFetchRequest(groups=(f10.OffsetFetchRequestGroup(
        group_id=GROUP, member_id=None, member_epoch=-1, topics=(f10.OffsetFetchRequestTopics(
            topic_id=topic_id("orders"), partition_indexes=(0,)),)),), require_stable=True), node_id=HOME)
    assert by_id.groups[0].topics[0].partitions[0].committed_offset == 17
    old = _answer(ctx, offset_fetch.handle, 9, 1, req(9, 1).OffsetFetchRequest(group_id=GROUP, topics=(
        req(9, 1).OffsetFetchRequestTopic(name="orders", partition_indexes=(0,)),)), node_id=HOME)
    assert old.topics[0].partitions[0].committed_offset == 17

    described = _answer(ctx, describe_groups.handle, 15, 5, req(15, 5).DescribeGroupsRequest(
        groups=(GROUP, UNKNOWN), include_authorized_operations=False), node_id=HOME)
    mine, unknown = described.groups
    assert (mine.group_state, mine.protocol_type, mine.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in mine.members] == \
           [(member, "unit", b"sub", b"p")]
    assert (unknown.error_code, unknown.group_state) == (ErrorCode.none, "Dead")
    v6 = _answer(ctx, describe_groups.handle, 15, 6, req(15, 6).DescribeGroupsRequest(
        groups=(UNKNOWN,), include_authorized_operations=False), node_id=HOME)
    assert v6.groups[0].error_code == ErrorCode.group_id_not_found
    listed = {n: _answer(ctx, list_groups.handle, 16, 5, req(16, 5).ListGroupsRequest(
        states_filter=(), types_filter=()), node_id=n) for n in node_ids(NODES)}
    assert [(g.group_id, g.group_state, g.group_type) for g in listed[HOME].groups] == [(GROUP, "Stable", "classic")]
    assert all(listed[n].groups == () for n in node_ids(NODES) if n != HOME)  # each node lists its own

    lv = req(13, 5)
    left = _answer(ctx, leave_group.handle, 13, 5, lv.LeaveGroupRequest(group_id=GROUP, members=(
        lv.MemberIdentity(member_id=member, group_instance_id=None, reason="done"),)), node_id=HOME)
    assert [(m.member_id, m.error_code) for m in left.members] == [(member, ErrorCode.none)]
    deleted = _answer(ctx, delete_groups.handle, 42, 2, req(42, 2).DeleteGroupsRequest(groups_names=(GROUP, UNKNOWN)),
                      node_id=HOME)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (GROUP, ErrorCode.none), (UNKNOWN, ErrorCode.group_id_not_found)]


def test_the_oldest_versions_served(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    j = req(11, 0)
    joined = _answer(ctx, join_group.handle, 11, 0, j.JoinGroupRequest(
        group_id=GROUP, session_timeout=SESSION, member_id="", protocol_type="consumer",
        protocols=(j.JoinGroupRequestProtocol(name="range", metadata=b"sub"),)), node_id=HOME)
    assert joined.error_code == ErrorCode.none and joined.generation_id == 1  # no MEMBER_ID_REQUIRED before v4
    c = req(8, 2)
    committed = _answer(ctx, offset_commit.handle, 8, 2, c.OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=1, member_id=joined.member_id,
        retention_time=datetime.timedelta(milliseconds=-1), topics=(c.OffsetCommitRequestTopic(
            name="orders", partitions=(c.OffsetCommitRequestPartition(partition_index=1, committed_offset=5,
                                                                      committed_metadata=None),)),)), node_id=HOME)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.rebalance_in_progress  # not yet synced
    left = _answer(ctx, leave_group.handle, 13, 0, req(13, 0).LeaveGroupRequest(group_id=GROUP, member_id="nobody"),
                   node_id=HOME)
    assert left.error_code == ErrorCode.unknown_member_id  # before v3 the member's error is the answer's


@pytest.mark.parametrize("api", ["join", "sync", "heartbeat", "leave", "commit", "fetch", "describe", "delete"])
def test_a_node_that_does_not_coordinate_the_group_says_so(tmp_path: Path, api: str) -> None:
    ctx = _context(tmp_path)
    j, s, c, f = req(11, 9), req(14, 5), req(8, 9), req(9, 7)
    calls: dict[str, tuple[Any, int, int, Any]] = {
        "join": (join_group.handle, 11, 9, j.JoinGroupRequest(
            group_id=GROUP, session_timeout=SESSION, rebalance_timeout=SESSION, member_id="", group_instance_id=None,
            protocol_type="consumer", protocols=(j.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None)),
        "sync": (sync_group.handle, 14, 5, s.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m",
                                                              group_instance_id=None, protocol_type=None,
                                                              protocol_name=None, assignments=())),
        "heartbeat": (heartbeat.handle, 12, 4, req(12, 4).HeartbeatRequest(group_id=GROUP, generation_id=1,
                                                                           member_id="m", group_instance_id=None)),
        "leave": (leave_group.handle, 13, 5, req(13, 5).LeaveGroupRequest(group_id=GROUP, members=())),
        "commit": (offset_commit.handle, 8, 9, c.OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=(
                c.OffsetCommitRequestTopic(name="orders", partitions=(c.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None),)),))),
        "fetch": (offset_fetch.handle, 9, 7, f.OffsetFetchRequest(group_id=GROUP, topics=None, require_stable=False)),
        "describe": (describe_groups.handle, 15, 5, req(15, 5).DescribeGroupsRequest(
            groups=(GROUP,), include_authorized_operations=False)),
        "delete": (delete_groups.handle, 42, 2, req(42, 2).DeleteGroupsRequest(groups_names=(GROUP,))),
    }
    handler, key, version, body = calls[api]
    answer = _answer(ctx, handler, key, version, body, node_id=AWAY)
    codes = {getattr(answer, "error_code", None)}
    for attr in ("groups", "results"):
        codes |= {g.error_code for g in getattr(answer, attr, ())}
    codes |= {p.error_code for t in getattr(answer, "topics", ()) for p in t.partitions}
    assert ErrorCode.not_coordinator in codes
    assert GROUP not in ctx.groups.groups  # nothing happened at the wrong node


@pytest.mark.parametrize("api_key, version", [(11, 9), (14, 5), (8, 9), (9, 8), (13, 5), (42, 2), (10, 4)])
def test_a_malformed_group_request_is_a_bad_request_closing_only_its_connection(api_key: int, version: int) -> None:
    """Truncated bodies and hostile array lengths are BadRequestError, which closes the one connection
    (`processor.py`), as a Kafka broker closes it; nothing reaches the coordinator."""
    header = struct.pack(">hhi", api_key, version, 7) + b"\x00\x04unit\x00"  # header v2: client id, no tags
    for body in (b"", b"\x05gr", b"\x05grp" + b"\xff" * 12, b"\x02g" + b"\x7f\xff\xff\xff" * 4):
        with pytest.raises(BadRequestError):
            parse_request(header + body, READABLE, 1)


def test_a_group_moving_between_doors_is_answered_as_kafka_answers_during_a_coordinator_move(tmp_path: Path) -> None:
    """`door_membership.py`: the door loading a group answers COORDINATOR_LOAD_IN_PROGRESS and names itself
    coordinator; the door that handed it over names none until it adopts the new view."""
    ctx = _context(tmp_path)
    m4 = req(10, 4)
    beat = req(12, 4).HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None)

    def found() -> tuple[int, int]:
        answer = _answer(ctx, find_coordinator.handle, 10, 4, m4.FindCoordinatorRequest(
            key_type=0, coordinator_keys=(GROUP,)), node_id=AWAY)
        return answer.coordinators[0].error_code, answer.coordinators[0].node_id

    ctx.groups.loading = {partition_for(GROUP): AWAY}  # the new view makes AWAY its coordinator
    assert found() == (ErrorCode.none, AWAY)
    assert _answer(ctx, heartbeat.handle, 12, 4, beat, node_id=AWAY).error_code == ErrorCode.coordinator_load_in_progress
    assert _answer(ctx, heartbeat.handle, 12, 4, beat, node_id=HOME).error_code == ErrorCode.not_coordinator
    ctx.groups.loading = {}
    ctx.groups.moving = frozenset({partition_for(GROUP)})  # handed over to another door
    assert found() == (ErrorCode.coordinator_not_available, -1)
    assert _answer(ctx, heartbeat.handle, 12, 4, beat, node_id=HOME).error_code == ErrorCode.not_coordinator
    ctx.groups.moving = frozenset()
    assert found() == (ErrorCode.none, HOME)
