"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit,
OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups with Kafka's semantics, for the groups
this front door coordinates (`placement.py`).

Laid out as Kafka's group coordinator is. This file is its entry points: the groups taken over and handed over
(`GroupCoordinatorService.onElection`/`onResignation`, the shard's `onLoaded`/`onUnloaded`), the admin calls
(`listGroups`, `describeGroups`, `deleteGroups`) and closing. It composes, as `GroupCoordinatorShard` does, the
managers that share one shard's state (`coordinator_runtime.py`): the classic groups' `GroupMetadataManager`
(`classic_group_rebalance.py`: JoinGroup and rebalances; `classic_group_membership.py`: SyncGroup, Heartbeat,
LeaveGroup and sessions) and the `OffsetMetadataManager` (`offset_manager.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from contract.group_records import StoredGroups
from front_door.groups.classic_group import ClassicGroup, GroupState
from front_door.groups.classic_group_rebalance import ClassicGroupRebalance
from front_door.groups.coordinator_api import (
    GroupDescription,
    GroupSnapshot,
    GroupsSnapshot,
    MemberDescription,
)
from front_door.groups.offset_manager import OffsetMetadataManager

log = logging.getLogger("gateway.front_door.groups")


class GroupCoordinator(ClassicGroupRebalance, OffsetMetadataManager):
    """The groups this door coordinates: JoinGroup, SyncGroup, Heartbeat and LeaveGroup from
    `ClassicGroupRebalance` and `ClassicGroupMembership`, the offsets APIs from `OffsetMetadataManager`, and here
    loading, handing over, the admin calls and closing."""

    # ------------------------------------------------------------------ loading

    def load(self, stored: StoredGroups, only: Callable[[str], bool] = lambda _group: True) -> None:
        """Take over what the store holds of the groups `only` accepts; members of a loaded group get a full
        session to heartbeat (`GroupMetadataManager.onLoaded` schedules every member's expiration). On the
        loop's thread."""
        for group_id, record in stored.groups.items():
            if not only(group_id):
                continue
            group = ClassicGroup.loaded(group_id, record)
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        for group_id, offsets in stored.offsets.items():
            if offsets and only(group_id):
                self.offsets[group_id] = dict(offsets)
                self.groups.setdefault(group_id, ClassicGroup(group_id))
        for producer_id, by_group in stored.pending.items():
            for group_id, held in by_group.items():
                if only(group_id):
                    self.transactional.add(producer_id, group_id, held.txn_start_ms, held.offsets)
                    self.groups.setdefault(group_id, ClassicGroup(group_id))
        for ended in stored.ended:  # ends the load applied: their records tombstoned (the commits written again)
            if only(ended.group):
                committed = ended.pending.offsets if ended.commit else {}
                self._spawn(self.store.end_pending_offsets(ended.group, ended.producer_id, ended.pending.offsets,
                                                           committed), ended.group)
        self.end_completed()

    def unload(self, which: Callable[[str], bool]) -> None:
        """Hand over the groups `which` names to another door (`GroupMetadataManager.removeGroupsForPartition`):
        their timers stop, waiting requests are answered NOT_COORDINATOR, and they are forgotten here; the
        store keeps them for the door that loads them."""
        for group_id in [g for g in self.groups if which(g)]:
            rt = self._runtime.pop(group_id, None)
            if rt is not None:
                self._stop(rt)
            del self.groups[group_id]
            self.offsets.pop(group_id, None)
        self.transactional.forget(which)

    # ------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupDescription]:
        wanted = {s.lower() for s in states}
        return [self._describe(g, summary=True) for g in self.groups.values()
                if not g.in_state(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def snapshot(self) -> GroupsSnapshot:
        """A copy for the exporter's thread (`group_metrics.py`); on the loop's thread."""
        return GroupsSnapshot(tuple(
            GroupSnapshot(g.group_id, g.state, len(g.members),
                          {tp: o.offset for tp, o in self.offsets.get(g.group_id, {}).items()})
            for g in self.groups.values() if not g.in_state(GroupState.DEAD)))

    def describe(self, group_id: str) -> GroupDescription | None:
        group = self.groups.get(group_id)
        return None if group is None or group.in_state(GroupState.DEAD) else self._describe(group)

    def _describe(self, group: ClassicGroup, summary: bool = False) -> GroupDescription:
        """`ClassicGroup.describe`: members' subscriptions and assignments only in a Stable group."""
        stable = group.in_state(GroupState.STABLE) and group.protocol is not None
        members = () if summary else tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(group.protocol) if stable and group.protocol else b"",
                              m.assignment if stable else b"")
            for m in group.members.values())
        return GroupDescription(group.group_id, group.state, group.protocol_type or "",
                                group.protocol or "" if stable else "", members)

    async def delete(self, group_id: str) -> ErrorCode:
        """`deleteGroups`: only an empty group goes, with its offsets (tombstones on the groups topic)."""
        group = self.groups.get(group_id)
        if group is None or group.in_state(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if not group.in_state(GroupState.EMPTY):
            return ErrorCode.non_empty_group
        group.transition(GroupState.DEAD, self._now_ms())
        try:
            await self._spawn(self.store.delete_group(group_id, list(self.offsets.get(group_id, {}))), group_id)
        except Exception as e:  # noqa: BLE001 - the store's failure is the client's retriable error
            log.warning("group %s: not deleted: %s", group_id, e)
            group.state = GroupState.EMPTY
            return ErrorCode.coordinator_not_available
        if self.groups.get(group_id) is group:
            del self.groups[group_id]
            self._runtime.pop(group_id, None)
            self.offsets.pop(group_id, None)
        return ErrorCode.none

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Timers off; waiting requests answered NOT_COORDINATOR so their clients look again."""
        self._cancel(self._expiry)
        for rt in self._runtime.values():
            self._stop(rt)
        self._runtime.clear()
