"""The front doors of one gateway, as KRaft's controller knows its brokers: every door registers itself on the
doors topic (`doors_topic`, compacted: a record per door, `door/<id>`, its value a `DoorRegistration`) and
heartbeats by rewriting it every `HEARTBEAT_INTERVAL_MS` (Kafka's `broker.heartbeat.interval.ms`); a door
whose registration is not renewed within the session timeout (Kafka's `broker.session.timeout.ms`, 9 s) is
fenced, and one that stops cleanly deletes its record and is gone at once. Every door follows the topic, so
every door sees the same live doors within the follow delay of a change, with no coordinator of the gateway's
own.

The brokers of the cluster are the live doors' nodes: door d owns node ids `(d - 1) * MAX_NODES_PER_DOOR + 1`
onwards, one per `front_door_nodes`, so ids never collide (Kafka's `node.id` is likewise configured per
broker). Partition leadership and group coordination (`leadership.py`, `groups/placement.py`) are computed
over the sorted node ids of the adopted view, so they spread over every live door and move when one joins or
leaves.

A door changes its view in two steps (`observed` then `adopt`): the server first hands over or loads the
groups the change moves (`door_membership.py`), and only then adopts the view, so no group is served by a door that
has not loaded it. This module is the pure part: registrations, liveness and the views, with the clock given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from front_door.cluster.node import Node

DOOR_KIND = "door"  # the doors topic's record kind (`cluster/security_store.py`'s key form `<kind>/<name>`)
HEARTBEAT_INTERVAL_MS = 2000  # Kafka's broker.heartbeat.interval.ms
DEFAULT_SESSION_TIMEOUT_MS = 9000  # Kafka's broker.session.timeout.ms
# How often a door looks for a session that ran out: the doors fence a silent one within this of each other
# (and of its deadline), so their Metadata answers disagree for no longer
EXPIRY_CHECK_MS = 250
MAX_NODES_PER_DOOR = 100  # node ids reserved per door id


def first_node_id(door_id: int) -> int:
    """Door `door_id`'s first node id: door 1 has nodes 1..N, door 2 101..100+N, ..."""
    return (door_id - 1) * MAX_NODES_PER_DOOR + 1


@dataclass(frozen=True)
class DoorRegistration:
    """What a door says of itself: its id, a random id of this start, its nodes per listener name (each as
    advertised), and when it wrote this (wall clock, ms)."""

    door_id: int
    instance: str
    listeners: tuple[tuple[str, tuple[Node, ...]], ...]
    heartbeat_ms: int

    def nodes(self, listener: str) -> tuple[Node, ...]:
        return dict(self.listeners).get(listener, ())

    def node_ids(self) -> tuple[int, ...]:
        return tuple(n.node_id for n in self.listeners[0][1]) if self.listeners else ()

    def addresses(self) -> frozenset[tuple[str, str, int]]:
        return frozenset((name, n.host, n.port) for name, nodes in self.listeners for n in nodes)

    def encode(self) -> bytes:
        return json.dumps({"door_id": self.door_id, "instance": self.instance, "heartbeat_ms": self.heartbeat_ms,
                           "listeners": {name: [[n.node_id, n.host, n.port] for n in nodes]
                                         for name, nodes in self.listeners}}).encode()

    @staticmethod
    def decode(value: bytes) -> DoorRegistration:
        """ValueError naming what is wrong for a record that is not a registration."""
        try:
            raw = json.loads(value)
            listeners = tuple((str(name), tuple(Node(int(i), str(h), int(p)) for i, h, p in nodes))
                              for name, nodes in raw["listeners"].items())
            return DoorRegistration(int(raw["door_id"]), str(raw["instance"]), listeners, int(raw["heartbeat_ms"]))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a door registration: {e!r}") from None


class DuplicateDoorError(RuntimeError):
    """Another live door holds this door's id (Kafka's DUPLICATE_BROKER_REGISTRATION)."""


class DoorCluster:
    """The live doors as this door sees them. `observe` and `expire` change what is observed (each returns
    whether the set of live doors changed); `adopt` makes an observed set the view that `node_ids`, `nodes`
    and `node` answer from. This door is always live in its own view."""

    def __init__(self, own: DoorRegistration, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        self.own = own
        self.session_timeout_ms = session_timeout_ms
        self._others: dict[int, tuple[DoorRegistration, int]] = {}  # door id -> (registration, deadline ms)
        self._view: tuple[DoorRegistration, ...] = (own,)
        self._ids: tuple[int, ...] = own.node_ids()
        self._by_listener: dict[str, dict[int, Node]] = {}

    # ------------------------------------------------------------------ observing

    def load(self, records: Mapping[str, bytes], wall_ms: int, now_ms: int) -> None:
        """The registrations the topic held at start; each live for what is left of its session by its
        heartbeat's wall-clock age. DuplicateDoorError when a live one holds this door's id at other addresses
        (the same addresses: this door's previous start, replaced)."""
        for value in records.values():
            try:
                registration = DoorRegistration.decode(value)
            except ValueError:
                continue
            left = self.session_timeout_ms - max(0, wall_ms - registration.heartbeat_ms)
            if left <= 0:
                continue
            if registration.door_id == self.own.door_id:
                if registration.addresses() != self.own.addresses():
                    where = ", ".join(sorted(f"{h}:{p}" for _, h, p in registration.addresses()))
                    raise DuplicateDoorError(
                        f"front_door_id {self.own.door_id} is held by a live door at {where} (last heartbeat "
                        f"{max(0, wall_ms - registration.heartbeat_ms) / 1000:.1f} s ago): give each door its own "
                        f"front_door_id, or start this one after {left / 1000:.1f} s")
                continue
            self._others[registration.door_id] = (registration, now_ms + left)

    def observe(self, name: str, value: bytes | None, now_ms: int) -> bool:
        """A record of the doors topic (None: a door that stopped); whether the live doors changed."""
        try:
            door_id = int(name)
        except ValueError:
            return False
        if door_id == self.own.door_id:
            return False
        if value is None:
            return self._others.pop(door_id, None) is not None
        try:
            registration = DoorRegistration.decode(value)
        except ValueError:
            return False
        before = self._others.get(door_id)
        self._others[door_id] = (registration, now_ms + self.session_timeout_ms)
        return before is None or before[0].listeners != registration.listeners

    def expire(self, now_ms: int) -> bool:
        """Fence the doors whose session ran out; whether any was."""
        fenced = [d for d, (_, deadline) in self._others.items() if deadline <= now_ms]
        for door_id in fenced:
            del self._others[door_id]
        return bool(fenced)

    def observed(self) -> tuple[DoorRegistration, ...]:
        """The live doors now, by door id."""
        return tuple(sorted([self.own, *(r for r, _ in self._others.values())], key=lambda r: r.door_id))

    # ------------------------------------------------------------------ the adopted view

    def adopt(self, doors: tuple[DoorRegistration, ...]) -> None:
        self._view = doors
        self._ids = node_ids_of(doors)
        self._by_listener = {}

    @property
    def doors(self) -> tuple[DoorRegistration, ...]:
        return self._view

    def node_ids(self) -> tuple[int, ...]:
        """Every live node id, sorted: what leadership and coordination are computed over."""
        return self._ids

    def nodes(self, listener: str) -> dict[int, Node]:
        """Node id -> node as advertised on `listener`, for every live node with that listener."""
        nodes = self._by_listener.get(listener)
        if nodes is None:
            nodes = self._by_listener[listener] = {n.node_id: n for r in self._view for n in r.nodes(listener)}
        return nodes


def node_ids_of(doors: tuple[DoorRegistration, ...]) -> tuple[int, ...]:
    return tuple(sorted(i for r in doors for i in r.node_ids()))
