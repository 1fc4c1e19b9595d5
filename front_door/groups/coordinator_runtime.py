"""What the classic group coordinator's parts share, and the event-loop services they run on: Kafka's
`CoordinatorRuntime` for one `GroupCoordinatorShard`. The state is the shard's: the groups, their committed
offsets and the transactional offsets held for open transactions, the store, the clock, and whether the groups
can be served at all (the runtime's `CoordinatorState`: the groups topic unreadable, a partition's groups
loading or moving to another door). The services are the runtime's: each group's timers (`CoordinatorTimer`)
and waiting JoinGroup/SyncGroup requests, and the store's writes (`scheduleWriteOperation`).

Everything runs on the front door's event loop, so state changes need no locks; a request that must wait (a
JoinGroup until the rebalance completes, a follower's SyncGroup until the leader's) awaits a future the
coordinator completes, and timers are the loop's.

What lasts (`GroupStore`): the group's record at each new generation's assignment and offsets at each commit,
written before the client is answered, as Kafka appends to `__consumer_offsets` before it answers. Writes are
started in the order they are decided (tasks), and the store keeps a group's records on one partition, so the
last record is the last decision.

Built on it, as Kafka's managers share a shard: `classic_group_membership.py` and `classic_group_rebalance.py`
(Kafka's `GroupMetadataManager`, classic groups) and `offset_manager.py` (`OffsetMetadataManager`);
`coordinator.py` composes them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door.groups.classic_group import ClassicGroup
from front_door.groups.coordinator_api import (
    GroupSettings,
    GroupStore,
    JoinResult,
    SyncResult,
    TopicPartition,
)
from front_door.groups.transactional_offsets import PendingTransactionalOffsets

log = logging.getLogger("gateway.front_door.groups")


@dataclass
class _Runtime:
    """A group's waiting requests and timers (what the pure `ClassicGroup` does not hold)."""

    join_waiters: dict[str, asyncio.Future[JoinResult]] = field(default_factory=dict)
    sync_waiters: dict[str, asyncio.Future[SyncResult]] = field(default_factory=dict)
    heartbeats: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    pending_expiry: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    # Kafka's InitialDelayedJoin: set while a group that was empty waits for more members to arrive
    initial_delay: bool = False
    new_member_added: bool = False
    delay_remaining_ms: int = 0


class GroupCoordinatorRuntime:
    """One coordinator's state, each group's timers and waiting requests, and its writes to the store."""

    def __init__(self, store: GroupStore, settings: GroupSettings = GroupSettings(),  # noqa: B008 - frozen
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 on_rebalance: Callable[[str], None] = lambda _group: None,
                 on_commit: Callable[[str, int], None] = lambda _group, _n: None) -> None:
        self.store = store
        self.settings = settings
        self._now_ms = now_ms
        self._on_rebalance = on_rebalance
        self._on_commit = on_commit
        self.groups: dict[str, ClassicGroup] = {}
        # why groups cannot be served (the groups topic could not be read), or None: FindCoordinator says so
        self.unavailable: str | None = None
        # Offsets-topic partitions (`placement.partition_for`) whose groups move between doors
        # (`door_membership.py`): handed over by this door (no coordinator here until the new view is adopted),
        # and being loaded by it (partition -> this door's coordinating node; COORDINATOR_LOAD_IN_PROGRESS)
        self.moving: frozenset[int] = frozenset()
        self.loading: dict[int, int] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.transactional = PendingTransactionalOffsets()  # TxnOffsetCommit's, until their transaction ends
        # (producer id, transaction start) -> True committed / False aborted / None not known to be over: the
        # door's transaction view (`transactions/view.py`), when the door has transactions
        self.transaction_outcome: Callable[[int, int], bool | None] = lambda _producer_id, _start: None
        self._runtime: dict[str, _Runtime] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self._expiry: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ groups, timers, writes

    def _create(self, group_id: str) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=self._now_ms())
        return group

    def _rt(self, group: ClassicGroup) -> _Runtime:
        return self._runtime.setdefault(group.group_id, _Runtime())

    def _write_group(self, group: ClassicGroup) -> Awaitable[None]:
        return self._spawn(self.store.write_group(group.group_id, group.stored()), group.group_id)

    def _spawn(self, write: Awaitable[None], group_id: str) -> asyncio.Task[None]:
        """A store write as a task, started now: writes reach the store in the order they are decided."""
        async def run() -> None:
            await write

        task = asyncio.ensure_future(run())
        self._writes.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._writes.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.debug("group %s: a store write failed: %s", group_id, t.exception())

        task.add_done_callback(done)
        return task

    @staticmethod
    def _cancel(handle: asyncio.TimerHandle | None) -> None:
        if handle is not None:
            handle.cancel()

    def _stop(self, rt: _Runtime) -> None:
        for h in [*rt.heartbeats.values(), *rt.pending_expiry.values(), rt.join_timer, rt.sync_timer]:
            self._cancel(h)
        for jw in rt.join_waiters.values():
            if not jw.done():
                jw.set_result(JoinResult(ErrorCode.not_coordinator))
        for sw in rt.sync_waiters.values():
            if not sw.done():
                sw.set_result(SyncResult(ErrorCode.not_coordinator))
