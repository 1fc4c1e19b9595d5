"""A classic group's members between joins, the membership half of Kafka's `GroupMetadataManager` for classic
groups: SyncGroup (`classicGroupSync`: the leader's assignment stored, then every member answered), Heartbeat
(`classicGroupHeartbeat`), LeaveGroup (`classicGroupLeave`; KIP-345's static members by instance id alone), the
member checks OffsetCommit shares, and the member timers: a member's session timeout (`classicGroupHeartbeatKey`,
the Scala coordinator's `DelayedHeartbeat`) and the expiry of member ids handed out with MEMBER_ID_REQUIRED
(KIP-394).

A member leaving, timing out or a failed assignment starts a rebalance: `classic_group_rebalance.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from front_door.groups.classic_group import ClassicGroup, GroupState, Member
from front_door.groups.coordinator_api import UNKNOWN_MEMBER_ID, JoinResult, LeavingMember, SyncResult
from front_door.groups.coordinator_runtime import GroupCoordinatorRuntime

log = logging.getLogger("gateway.front_door.groups")


class ClassicGroupMembership(GroupCoordinatorRuntime):
    """SyncGroup, Heartbeat, LeaveGroup and the member timers of the groups in `GroupCoordinatorRuntime`."""

    # the rebalance these requests and timers start or complete (`classic_group_rebalance.ClassicGroupRebalance`)
    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        raise NotImplementedError

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ SyncGroup

    async def sync(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: Mapping[str, bytes]) -> SyncResult:
        """`classicGroupSync`."""
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        error = self._validate_member(group, member_id, group_instance_id, generation)
        if error is not None:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.in_state(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        group.pending_sync.discard(member_id)
        if group.in_state(GroupState.STABLE):
            self._heartbeat_seen(group, member_id)
            return self._sync_result(group, member_id)
        rt = self._rt(group)  # CompletingRebalance
        waiter = rt.sync_waiters[member_id] = asyncio.get_running_loop().create_future()
        if member_id == group.leader:
            for m_id, member in group.members.items():
                member.assignment = bytes(assignments.get(m_id, b""))
            try:
                await self._write_group(group)
            except Exception as e:  # noqa: BLE001 - the store's failure is every member's retriable error
                log.warning("group %s: generation %d's assignment not stored: %s", group.group_id, generation, e)
                if group.generation == generation and group.in_state(GroupState.COMPLETING_REBALANCE):
                    for member in group.members.values():
                        member.assignment = b""
                    self._fail_sync_waiters(group, ErrorCode.coordinator_not_available)
                    self._prepare_rebalance(group, "the assignment could not be stored")
                return await waiter
            if group.generation == generation and group.in_state(GroupState.COMPLETING_REBALANCE):
                group.transition(GroupState.STABLE, self._now_ms())
                waiters, rt.sync_waiters = rt.sync_waiters, {}
                for m_id, w in waiters.items():
                    if not w.done():
                        w.set_result(self._sync_result(group, m_id))
        return await waiter

    def _sync_result(self, group: ClassicGroup, member_id: str) -> SyncResult:
        return SyncResult(ErrorCode.none, group.protocol_type, group.protocol, group.members[member_id].assignment)

    def _fail_sync_waiters(self, group: ClassicGroup, error: ErrorCode) -> None:
        rt = self._rt(group)
        waiters, rt.sync_waiters = rt.sync_waiters, {}
        for w in waiters.values():
            if not w.done():
                w.set_result(SyncResult(error))

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """`classicGroupHeartbeat`: keeps the member's session; tells it to rejoin while the group
        rebalances."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = self._validate_member(group, member_id, group_instance_id, generation)
        if error is not None:
            return error
        self._heartbeat_seen(group, member_id)
        if group.in_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: Iterable[LeavingMember]) -> tuple[ErrorCode, list[tuple[LeavingMember, ErrorCode]]]:
        """`classicGroupLeave`: each member by id, or a static member by its instance id alone (the admin
        client's removeMembersFromConsumerGroup)."""
        members = list(members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [(m, ErrorCode.unknown_member_id) for m in members]
        if group.in_state(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        results = []
        for m in members:
            member_id = m.member_id
            if member_id == UNKNOWN_MEMBER_ID:
                member_id = group.static_member_id(m.group_instance_id) or UNKNOWN_MEMBER_ID
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._cancel(self._rt(group).pending_expiry.pop(member_id, None))
                results.append((m, ErrorCode.none))
                self._maybe_complete_join(group)
                continue
            if group.is_fenced(member_id, m.group_instance_id):
                results.append((m, ErrorCode.fenced_instance_id))
            elif member_id not in group.members:
                results.append((m, ErrorCode.unknown_member_id))
            else:
                log.info("group %s: member %s left", group_id, member_id)
                self._remove_member_and_rebalance(group, member_id, f"{member_id} left")
                results.append((m, ErrorCode.none))
        return ErrorCode.none, results

    def _validate_member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None,
                         generation: int) -> ErrorCode | None:
        if group.in_state(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None or (group_instance_id is not None and member.group_instance_id != group_instance_id):
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        return None

    def _remove_member_and_rebalance(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        """`removeMemberAndUpdateClassicGroup`."""
        self._remove_member(group, member_id)
        if group.in_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.in_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        rt = self._rt(group)
        self._cancel(rt.heartbeats.pop(member_id, None))
        for waiters, result in ((rt.join_waiters, JoinResult(ErrorCode.unknown_member_id, member_id)),
                                (rt.sync_waiters, SyncResult(ErrorCode.unknown_member_id))):
            waiter = waiters.pop(member_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(result)  # type: ignore[arg-type]
        group.remove(member_id)

    # ------------------------------------------------------------------ sessions

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        rt = self._rt(group)
        self._cancel(rt.heartbeats.pop(member.member_id, None))
        rt.heartbeats[member.member_id] = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member.member_id)

    def _heartbeat_seen(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)

    def _session_expired(self, group: ClassicGroup, member_id: str) -> None:
        """A member whose session ran out leaves, unless it is waiting in a join or sync (that phase's own
        timeout decides then: `ClassicGroupMember.hasSatisfiedHeartbeat`)."""
        rt = self._rt(group)
        rt.heartbeats.pop(member_id, None)
        member = group.members.get(member_id)
        if member is None:
            return
        if member_id in rt.join_waiters or member_id in rt.sync_waiters:
            self._schedule_heartbeat(group, member)
            return
        log.info("group %s: member %s's session timed out (%d ms); removed", group.group_id, member_id,
                 member.session_timeout_ms)
        self._remove_member_and_rebalance(group, member_id, f"{member_id}'s session timed out")

    def _schedule_pending_expiry(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            rt.pending_expiry.pop(member_id, None)
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._maybe_complete_join(group)

        rt = self._rt(group)
        rt.pending_expiry[member_id] = asyncio.get_running_loop().call_later(timeout_ms / 1000, expire)
