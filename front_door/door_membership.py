"""A door's part in the doors' cluster (`door_cluster.py` says what it is): it registers on the doors topic
before serving, heartbeats every `HEARTBEAT_INTERVAL_MS`, follows the other doors' registrations, fences
those whose session ran out (checked every `EXPIRY_CHECK_MS`), and deletes its own record when it stops.

When the live doors change, the groups whose coordinator moves are handed over as Kafka hands over an offsets
partition between leaders: the door that loses a group unloads it at once (its waiting members are answered
NOT_COORDINATOR); the door that gains one waits `HANDOVER_SETTLE_S` (so the losing door's last writes reach
the groups topic), reads the groups topic, loads the group and only then adopts the new view. Meanwhile a
group being loaded answers COORDINATOR_LOAD_IN_PROGRESS at its new door (as a Kafka coordinator loading its
offsets partition), and one handed over has no coordinator at its old door (FindCoordinator:
COORDINATOR_NOT_AVAILABLE; the group APIs: NOT_COORDINATOR), so no group is ever served by two doors at
once, nor by one that has not loaded it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from front_door.cluster.door_cluster import (
    DOOR_KIND,
    EXPIRY_CHECK_MS,
    HEARTBEAT_INTERVAL_MS,
    DoorCluster,
    DoorRegistration,
    node_ids_of,
)
from front_door.cluster.kafka_security_store import KafkaSecurityStore
from front_door.cluster.leadership import leader
from front_door.cluster.security_store import SecurityStoreError
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.placement import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, partition_for
from front_door.groups.store import GroupStoreError, KafkaGroupStore
from front_door.stopping import blocking_step
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.front_door.doors")

HANDOVER_SETTLE_S = 0.5  # the losing door's in-flight group writes land in the groups topic meanwhile
STOP_WRITE_TIMEOUT_S = 5.0
STOP_CLOSE_TIMEOUT_S = 5.0  # then the doors topic's clients are abandoned (`stopping.blocking_step`)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def owned_partitions(node_ids: tuple[int, ...], own: frozenset[int]) -> frozenset[int]:
    """The offsets-topic partitions (`placement.partition_for`) whose groups this door's nodes coordinate."""
    if not node_ids:
        return frozenset()
    return frozenset(p for p in range(OFFSETS_TOPIC_PARTITIONS) if leader(OFFSETS_TOPIC, p, node_ids) in own)


class DoorMembership:
    def __init__(self, kafka: KafkaCluster, topic: str, door_id: int, session_timeout_ms: int,
                 on_change: Callable[[DoorCluster], None] = lambda _cluster: None) -> None:
        self._store = KafkaSecurityStore(kafka, topic, what="doors topic")
        self._door_id = door_id
        self._session_timeout_ms = session_timeout_ms
        self._on_change = on_change
        self._instance = uuid.uuid4().hex
        self.cluster: DoorCluster | None = None
        self._groups: GroupCoordinator | None = None
        self._group_store: KafkaGroupStore | None = None
        self._owned: frozenset[int] = frozenset()
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._registered = False

    def _registration(self, listeners: tuple[tuple[str, tuple[Any, ...]], ...]) -> DoorRegistration:
        return DoorRegistration(self._door_id, self._instance, listeners, _wall_ms())

    async def join(self, loop: asyncio.AbstractEventLoop,
                   listeners: tuple[tuple[str, tuple[Any, ...]], ...]) -> DoorCluster:
        """Read the doors topic, see the live doors (DuplicateDoorError: this door's id is another's) and
        register; the returned cluster's view holds every live door, this one included."""
        await asyncio.to_thread(self._store.load)
        cluster = self.cluster = DoorCluster(self._registration(listeners), self._session_timeout_ms)
        cluster.load(self._store.snapshot(DOOR_KIND), _wall_ms(), _monotonic_ms())
        cluster.adopt(cluster.observed())
        self._store.start(loop)
        self._registered = True
        self._store.subscribe(self._observe)
        await self._heartbeat_once()
        return cluster

    def coordinate(self, groups: GroupCoordinator, store: KafkaGroupStore | None) -> frozenset[int]:
        """Start following the doors; returns the offsets partitions whose groups this door may load now. Alone,
        that is all of them; beside live doors, none: the groups it coordinates are loaded after the settle
        time, once every door has seen it join."""
        assert self.cluster is not None, "join() first"
        self._groups, self._group_store = groups, store
        ids = tuple(self.cluster.node_ids())
        owned = owned_partitions(ids, frozenset(self.cluster.own.node_ids()))
        if len(self.cluster.doors) > 1:
            groups.loading = {p: leader(OFFSETS_TOPIC, p, ids) for p in owned}  # loaded by the follower below
            self._changed.set()
        else:
            self._owned = owned
        self._tasks = [asyncio.ensure_future(self._heartbeats()), asyncio.ensure_future(self._expiry()),
                       asyncio.ensure_future(self._follow())]
        return self._owned

    # ------------------------------------------------------------------ following

    def _observe(self, kind: str, name: str, value: bytes | None) -> None:
        if kind == DOOR_KIND and self.cluster is not None and self.cluster.observe(name, value, _monotonic_ms()):
            self._changed.set()

    async def _heartbeat_once(self) -> None:
        assert self.cluster is not None
        own = self.cluster.own
        try:
            await self._store.write(DOOR_KIND, str(own.door_id), self._registration(own.listeners).encode())
        except SecurityStoreError as e:  # the other doors fence this one if it lasts; it keeps serving
            log.warning("front door %d: heartbeat not written: %s", own.door_id, e)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_MS / 1000)
            await self._heartbeat_once()

    async def _expiry(self) -> None:
        assert self.cluster is not None
        while True:
            await asyncio.sleep(EXPIRY_CHECK_MS / 1000)
            if self.cluster.expire(_monotonic_ms()):
                self._changed.set()

    async def _follow(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self._move()
            except (GroupStoreError, OSError) as e:  # retried on the next heartbeat
                log.warning("front door: groups not handed over yet: %s", e)
                await asyncio.sleep(HEARTBEAT_INTERVAL_MS / 1000)
                self._changed.set()

    async def _move(self) -> None:
        """Adopt the observed doors, handing over the groups whose coordinator changes."""
        cluster, groups = self.cluster, self._groups
        assert cluster is not None and groups is not None
        doors = cluster.observed()
        ids = node_ids_of(doors)
        owned = owned_partitions(ids, frozenset(cluster.own.node_ids()))
        gained, lost = (owned - self._owned) | (groups.loading.keys() & owned), self._owned - owned
        if gained or lost:
            groups.moving = lost
            groups.loading = {p: leader(OFFSETS_TOPIC, p, ids) for p in gained}
            groups.unload(lambda g: partition_for(g) in lost)
            if gained and self._group_store is not None and groups.unavailable is None:
                await asyncio.sleep(HANDOVER_SETTLE_S)
                stored = await asyncio.to_thread(self._group_store.load)
                groups.load(stored, only=lambda g: partition_for(g) in gained and g not in groups.groups)
        cluster.adopt(doors)
        self._owned = owned
        groups.moving, groups.loading = frozenset(), {}
        log.info("front door %d: %d live door(s) (%s), %d node(s); coordinating the groups of %d of %d offsets "
                 "partitions (%d taken over, %d handed over)", cluster.own.door_id, len(doors),
                 ", ".join(str(d.door_id) for d in doors), len(ids), len(owned), OFFSETS_TOPIC_PARTITIONS,
                 len(gained), len(lost))
        self._on_change(cluster)

    # ------------------------------------------------------------------ leaving

    async def leave(self) -> None:
        """Stop heartbeating and delete this door's registration, so the others take over at once."""
        for task in self._tasks:
            task.cancel()
        # gathered, not each awaited under a suppress: a cancelled leave() stays cancelled (FrontDoor's stop
        # bounds it)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._registered:
            try:
                await asyncio.wait_for(self._store.write(DOOR_KIND, str(self._door_id), None), STOP_WRITE_TIMEOUT_S)
            except (SecurityStoreError, TimeoutError) as e:
                log.warning("front door %d: registration not deleted (the others fence it after %d ms): %s",
                            self._door_id, self._session_timeout_ms, e)
        await blocking_step("closing the doors topic's clients", self._store.close, STOP_CLOSE_TIMEOUT_S)
