"""JoinGroup and the rebalance it starts, the join half of Kafka's `GroupMetadataManager` for classic groups:
`classicGroupJoin` (KIP-394's MEMBER_ID_REQUIRED, KIP-345's static members, KIP-814's `skip_assignment`,
protocol selection), `prepareRebalance`, the join phase's timers (`classicGroupJoinKey`: the rebalance timeout,
the Scala coordinator's `DelayedJoin`, and for a group that was empty `group.initial.rebalance.delay.ms`,
`InitialDelayedJoin`), `completeClassicGroupJoin` (the next generation and every joined member's answer), and
the sync phase's timeout (`classicGroupSyncKey`: members that never send SyncGroup leave).

SyncGroup, Heartbeat, LeaveGroup and the members' sessions: `classic_group_membership.py`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from front_door.groups.classic_group import ClassicGroup, GroupState, Member
from front_door.groups.classic_group_membership import ClassicGroupMembership
from front_door.groups.coordinator_api import (
    UNKNOWN_MEMBER_ID,
    JoinMember,
    JoinRequest,
    JoinResult,
    SyncResult,
)

log = logging.getLogger("gateway.front_door.groups")


class ClassicGroupRebalance(ClassicGroupMembership):
    """JoinGroup and the join and sync phases of a rebalance."""

    # ------------------------------------------------------------------ JoinGroup

    async def join(self, request: JoinRequest) -> JoinResult:
        """`GroupMetadataManager.classicGroupJoin`."""
        s = self.settings
        if not request.group_id:
            return JoinResult(ErrorCode.invalid_group_id, request.member_id)
        if not s.min_session_timeout_ms <= request.session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:  # a member of a group that no longer exists
                return JoinResult(ErrorCode.unknown_member_id, request.member_id)
            group = self._create(request.group_id)
        if group.in_state(GroupState.DEAD):  # being deleted: the client looks the coordinator up again
            return JoinResult(ErrorCode.coordinator_not_available, request.member_id)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        if request.member_id == UNKNOWN_MEMBER_ID:
            return await self._join_unknown_member(group, request)
        return await self._join_known_member(group, request)

    async def _join_unknown_member(self, group: ClassicGroup, request: JoinRequest) -> JoinResult:
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old_id = group.static_member_id(request.group_instance_id)
            if old_id is not None:
                return await self._rejoin_static_member(group, old_id, member_id, request)
        elif request.require_known_member_id:
            # KIP-394: the id first, the join with it next; an id never used expires after a session
            group.pending_members.add(member_id)
            self._schedule_pending_expiry(group, member_id, request.session_timeout_ms)
            return JoinResult(ErrorCode.member_id_required, member_id)
        if len(group.members) >= self.settings.max_size:
            return JoinResult(ErrorCode.group_max_size_reached, member_id)
        return await self._add_member_and_rebalance(group, member_id, request)

    async def _join_known_member(self, group: ClassicGroup, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel(self._rt(group).pending_expiry.pop(member_id, None))
            if len(group.members) >= self.settings.max_size:
                return JoinResult(ErrorCode.group_max_size_reached, member_id)
            return await self._add_member_and_rebalance(group, member_id, request)
        if group.is_fenced(member_id, request.group_instance_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or (request.group_instance_id is not None
                              and member.group_instance_id != request.group_instance_id):
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.in_state(GroupState.PREPARING_REBALANCE):
            return await self._update_member_and_rebalance(group, member, request)
        if group.in_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):  # a resent join: the answer it already had
                return self._join_result(group, member_id)
            return await self._update_member_and_rebalance(group, member, request)
        if group.in_state(GroupState.STABLE):
            if member_id == group.leader or not member.matches(request.protocols):
                return await self._update_member_and_rebalance(group, member, request)
            return self._join_result(group, member_id)
        return JoinResult(ErrorCode.unknown_member_id, member_id)  # Empty: nobody is a member

    async def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, request: JoinRequest) -> JoinResult:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        request.protocols)
        group.add(member)
        rt = self._rt(group)
        waiter = rt.join_waiters[member_id] = asyncio.get_running_loop().create_future()
        if rt.initial_delay:
            rt.new_member_added = True
        self._schedule_heartbeat(group, member)
        self._prepare_rebalance_or_complete_join(group, f"{member_id} joined")
        return await waiter

    async def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, request: JoinRequest) -> JoinResult:
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        rt = self._rt(group)
        previous = rt.join_waiters.pop(member.member_id, None)
        if previous is not None and not previous.done():  # a join resent while the first still waits
            previous.set_result(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        waiter = rt.join_waiters[member.member_id] = asyncio.get_running_loop().create_future()
        self._prepare_rebalance_or_complete_join(group, f"{member.member_id} rejoined")
        return await waiter

    async def _rejoin_static_member(self, group: ClassicGroup, old_id: str, new_id: str, request: JoinRequest) -> JoinResult:
        """KIP-345: a static member back under a new member id takes its old place; the old id is fenced.
        It brings its protocols (their metadata: a restarted client's sticky assignor no longer knows its
        partitions); in a Stable group whose selected protocol they leave unchanged there is no rebalance
        (`updateStaticMemberThenRebalanceOrCompleteJoin`): the member gets the current generation (a
        leader with `skip_assignment`, KIP-814) and its assignment at SyncGroup."""
        rt = self._rt(group)
        old_protocols = group.members[old_id].protocols
        for waiters in (rt.join_waiters, rt.sync_waiters):
            fenced = waiters.pop(old_id, None)
            if fenced is not None and not fenced.done():
                result = JoinResult(ErrorCode.fenced_instance_id, old_id) if waiters is rt.join_waiters \
                    else SyncResult(ErrorCode.fenced_instance_id)
                fenced.set_result(result)  # type: ignore[arg-type]
        self._cancel(rt.heartbeats.pop(old_id, None))
        member = group.replace_static(old_id, new_id)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.protocols = tuple(request.protocols)
        self._schedule_heartbeat(group, member)
        keeps_protocol = bool(group.candidate_protocols()) and group.select_protocol() == group.protocol
        if group.in_state(GroupState.STABLE) and keeps_protocol:
            member.session_timeout_ms = request.session_timeout_ms
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            try:
                await self._write_group(group)
            except Exception as e:  # noqa: BLE001 - the store's failure is the client's retriable error
                log.warning("group %s: static member %s not replaced: %s", group.group_id, request.group_instance_id, e)
                self._cancel(rt.heartbeats.pop(new_id, None))
                member.protocols = old_protocols
                group.replace_static(new_id, old_id)
                self._schedule_heartbeat(group, group.members[old_id])
                return JoinResult(ErrorCode.coordinator_not_available, UNKNOWN_MEMBER_ID)
            is_leader = group.leader == new_id
            return replace(self._join_result(group, new_id, members_for_leader=is_leader), skip_assignment=is_leader)
        return await self._update_member_and_rebalance(group, member, request)

    def _join_result(self, group: ClassicGroup, member_id: str, *, members_for_leader: bool = True) -> JoinResult:
        protocol = group.protocol
        members: tuple[JoinMember, ...] = ()
        if members_for_leader and member_id == group.leader and protocol is not None:
            members = tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                            for m in group.members.values())
        return JoinResult(ErrorCode.none, member_id, group.generation, group.protocol_type, protocol,
                          group.leader or "", members)

    # ------------------------------------------------------------------ rebalance

    def _prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.in_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.in_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """`prepareRebalance`: members must rejoin within the rebalance timeout; a group that was empty
        first waits `group.initial.rebalance.delay.ms` (extended while members keep arriving) so that
        consumers starting together land in one generation."""
        rt = self._rt(group)
        if group.in_state(GroupState.COMPLETING_REBALANCE):  # the assignment being synced is void
            self._fail_sync_waiters(group, ErrorCode.rebalance_in_progress)
        self._cancel(rt.sync_timer)
        rt.sync_timer = None
        was_empty = group.in_state(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self._now_ms())
        self._on_rebalance(group.group_id)
        log.info("group %s: preparing to rebalance in generation %d (%s)", group.group_id, group.generation, reason)
        timeout_ms = group.rebalance_timeout_ms()
        if was_empty and self.settings.initial_rebalance_delay_ms > 0:
            delay = min(self.settings.initial_rebalance_delay_ms, timeout_ms)
            rt.initial_delay, rt.new_member_added = True, False
            rt.delay_remaining_ms = max(timeout_ms - delay, 0)
            self._set_join_timer(group, delay, self._initial_delay_expired)
        else:
            self._set_join_timer(group, timeout_ms, self._complete_join)
            self._maybe_complete_join(group)

    def _initial_delay_expired(self, group: ClassicGroup) -> None:
        """`InitialDelayedJoin.onComplete`: another delay while new members arrived and time remains."""
        rt = self._rt(group)
        if rt.new_member_added and rt.delay_remaining_ms > 0:
            delay = min(self.settings.initial_rebalance_delay_ms, rt.delay_remaining_ms)
            rt.new_member_added = False
            rt.delay_remaining_ms = max(rt.delay_remaining_ms - self.settings.initial_rebalance_delay_ms, 0)
            self._set_join_timer(group, delay, self._initial_delay_expired)
            return
        rt.initial_delay = False
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        rt = self._rt(group)
        if (group.in_state(GroupState.PREPARING_REBALANCE) and not rt.initial_delay and not group.pending_members
                and all(m in rt.join_waiters for m in group.members)):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """`completeClassicGroupJoin`: members that did not rejoin in time leave; the next generation
        starts (Empty without members) and every joined member gets its answer, the leader with the
        members' subscriptions."""
        rt = self._rt(group)
        self._cancel(rt.join_timer)
        rt.join_timer = None
        if not group.in_state(GroupState.PREPARING_REBALANCE):
            return
        for member_id in [m for m in group.members if m not in rt.join_waiters]:
            log.info("group %s: member %s did not rejoin in time; removed", group.group_id, member_id)
            self._remove_member(group, member_id)
        group.next_generation(self._now_ms())
        if group.is_empty():
            log.info("group %s: generation %d with no members", group.group_id, group.generation)
            self._spawn(self._write_group(group), group.group_id)
            return
        log.info("group %s: generation %d, protocol %s, %d members, leader %s", group.group_id, group.generation,
                 group.protocol, len(group.members), group.leader)
        waiters, rt.join_waiters = rt.join_waiters, {}
        for member_id, waiter in waiters.items():
            if not waiter.done():
                waiter.set_result(self._join_result(group, member_id))
            member = group.members.get(member_id)
            if member is not None:
                self._schedule_heartbeat(group, member)
        # Members that never send SyncGroup leave when the sync phase times out (`pendingSyncMembers`).
        generation = group.generation
        rt.sync_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._sync_expired, group, generation)

    def _sync_expired(self, group: ClassicGroup, generation: int) -> None:
        rt = self._rt(group)
        rt.sync_timer = None
        if group.generation != generation or not group.pending_sync:
            return
        if not group.in_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync):
            log.info("group %s: member %s sent no SyncGroup in generation %d; removed", group.group_id,
                     member_id, generation)
            self._remove_member(group, member_id)
        self._prepare_rebalance_or_complete_join(group, "members did not sync")

    def _set_join_timer(self, group: ClassicGroup, delay_ms: int,
                        action: Callable[[ClassicGroup], None]) -> None:
        rt = self._rt(group)
        self._cancel(rt.join_timer)
        rt.join_timer = asyncio.get_running_loop().call_later(delay_ms / 1000, action, group)
