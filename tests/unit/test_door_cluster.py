"""The doors' cluster without Kafka: registrations, liveness by heartbeat and session timeout (Kafka's broker
fencing), the adopted view, and leadership and group coordination spread over every live door the same way
from each door's view."""

from __future__ import annotations

import pytest

from front_door.cluster.door_cluster import (
    DoorCluster,
    DoorRegistration,
    DuplicateDoorError,
    first_node_id,
)
from front_door.cluster.leadership import leader, node_ids
from front_door.cluster.node import Node
from front_door.door_membership import owned_partitions
from front_door.groups.placement import OFFSETS_TOPIC_PARTITIONS, coordinator

TIMEOUT = 9000


def _door(door_id: int, port: int, nodes: int = 2, heartbeat_ms: int = 1_000_000, instance: str = "a") -> DoorRegistration:
    ids = node_ids(nodes, first_node_id(door_id))
    return DoorRegistration(door_id, instance, (
        ("PLAINTEXT", tuple(Node(n, "127.0.0.1", port + i) for i, n in enumerate(ids))),
        ("SASL_SSL", tuple(Node(n, "gw.example", port + 100 + i) for i, n in enumerate(ids))),
    ), heartbeat_ms)


def test_each_door_owns_a_range_of_node_ids() -> None:
    assert first_node_id(1) == 1 and first_node_id(2) == 101 and first_node_id(3) == 201
    assert _door(2, 9000).node_ids() == (101, 102)


def test_a_registration_round_trips_and_garbage_is_refused() -> None:
    door = _door(3, 9000)
    assert DoorRegistration.decode(door.encode()) == door
    for garbage in (b"", b"{", b"[]", b'{"door_id": 1}', b'{"door_id": "x", "instance": "a", "heartbeat_ms": 1, '
                                                         b'"listeners": {}}'):
        with pytest.raises(ValueError, match="not a door registration"):
            DoorRegistration.decode(garbage)


def test_at_start_only_doors_heartbeating_within_the_session_are_live() -> None:
    cluster = DoorCluster(_door(1, 9000), TIMEOUT)
    wall = 1_000_000
    records = {"2": _door(2, 9100, heartbeat_ms=wall - 1000).encode(),
               "3": _door(3, 9200, heartbeat_ms=wall - TIMEOUT - 1).encode(),  # fenced already
               "x": b"not a registration"}
    cluster.load(records, wall, now_ms=50)
    assert [d.door_id for d in cluster.observed()] == [1, 2]
    assert not cluster.expire(50 + TIMEOUT - 1001)
    assert cluster.expire(50 + TIMEOUT - 1000)  # what was left of door 2's session ran out
    assert [d.door_id for d in cluster.observed()] == [1]


def test_a_live_door_with_this_doors_id_elsewhere_refuses_the_start() -> None:
    wall = 1_000_000
    cluster = DoorCluster(_door(1, 9000), TIMEOUT)
    with pytest.raises(DuplicateDoorError, match="front_door_id 1 is held by a live door at 127.0.0.1:9500"):
        cluster.load({"1": _door(1, 9500, heartbeat_ms=wall - 100, instance="b").encode()}, wall, 0)
    restarted = DoorCluster(_door(1, 9000), TIMEOUT)  # the same addresses: this door's previous start
    restarted.load({"1": _door(1, 9000, heartbeat_ms=wall - 100, instance="b").encode()}, wall, 0)
    assert [d.door_id for d in restarted.observed()] == [1]


def test_joining_heartbeating_leaving_and_fencing() -> None:
    cluster = DoorCluster(_door(1, 9000), TIMEOUT)
    assert cluster.observe("2", _door(2, 9100).encode(), now_ms=0)  # joined
    assert not cluster.observe("2", _door(2, 9100, heartbeat_ms=2_000_000).encode(), now_ms=2000)  # a heartbeat
    assert not cluster.observe("1", None, now_ms=2000)  # this door is always live to itself
    assert not cluster.expire(2000 + TIMEOUT - 1)
    assert cluster.expire(2000 + TIMEOUT)  # fenced: no heartbeat for a session
    assert cluster.observe("3", _door(3, 9200).encode(), now_ms=0)
    assert cluster.observe("3", None, now_ms=1)  # stopped cleanly: gone at once
    assert not cluster.observe("3", None, now_ms=2)
    assert [d.door_id for d in cluster.observed()] == [1]


def test_the_adopted_view_lists_every_live_node_per_listener() -> None:
    cluster = DoorCluster(_door(1, 9000), TIMEOUT)
    cluster.observe("2", _door(2, 9100).encode(), 0)
    assert cluster.node_ids() == (1, 2)  # observed, not yet adopted
    cluster.adopt(cluster.observed())
    assert cluster.node_ids() == (1, 2, 101, 102)
    assert cluster.nodes("SASL_SSL")[101] == Node(101, "gw.example", 9200)
    assert cluster.nodes("PLAINTEXT")[2] == Node(2, "127.0.0.1", 9001)
    assert cluster.nodes("SSL") == {}


def test_every_door_names_the_same_leaders_and_coordinators_and_spreads_them() -> None:
    doors = [_door(1, 9000), _door(2, 9100), _door(3, 9200)]
    views = []
    for own in doors:
        cluster = DoorCluster(own, TIMEOUT)
        for other in doors:
            cluster.observe(str(other.door_id), other.encode(), 0)
        cluster.adopt(cluster.observed())
        views.append(cluster.node_ids())
    assert views[0] == views[1] == views[2] == (1, 2, 101, 102, 201, 202)
    ids = views[0]
    assert {leader("orders", p, ids) for p in range(12)} == set(ids)  # every node leads some partitions
    assert {coordinator(f"g{i}", ids) for i in range(300)} == set(ids)
    owned = [owned_partitions(ids, frozenset(d.node_ids())) for d in doors]
    assert sum(len(o) for o in owned) == OFFSETS_TOPIC_PARTITIONS  # each offsets partition has one door
    assert frozenset().union(*owned) == frozenset(range(OFFSETS_TOPIC_PARTITIONS))
    assert all(owned)


def test_a_lone_door_leads_as_it_always_has() -> None:
    cluster = DoorCluster(_door(1, 9000, nodes=4), TIMEOUT)
    assert tuple(cluster.node_ids()) == tuple(node_ids(4))
    assert [leader("orders", p, cluster.node_ids()) for p in range(8)] == [3, 4, 1, 2, 3, 4, 1, 2]
