"""The classic group coordinator (Kafka's `GroupMetadataManager`, classic-group half): JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups and DeleteGroups
with Kafka's semantics, for the groups this front door coordinates (`placement.py`).

Everything runs on the front door's event loop, so state changes need no locks; a request that must
wait (a JoinGroup until the rebalance completes, a follower's SyncGroup until the leader's) awaits a
future the coordinator completes. Timers are the loop's: a member's session timeout, the join phase's
rebalance timeout (with Kafka's initial delay for a group that was empty), the sync phase's timeout, and
the expiry of member ids handed out with MEMBER_ID_REQUIRED (KIP-394).

What lasts (`GroupStore`): the group's record at each new generation's assignment and offsets at each
commit, written before the client is answered, as Kafka appends to `__consumer_offsets` before it
answers. Writes are started in the order they are decided (tasks), and the store keeps a group's records
on one partition, so the last record is the last decision.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata, StoredGroups
from front_door.groups.classic_group import ClassicGroup, GroupState, Member
from front_door.groups.coordinator_api import (
    UNKNOWN_MEMBER_ID,
    GroupDescription,
    GroupSettings,
    GroupSnapshot,
    GroupsSnapshot,
    GroupStore,
    JoinMember,
    JoinRequest,
    JoinResult,
    LeavingMember,
    MemberDescription,
    SyncResult,
    TopicPartition,
)
from front_door.groups.offset_manager import OffsetMetadataManager
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


class GroupCoordinator(OffsetMetadataManager):
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

    # ------------------------------------------------------------------ helpers

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

    def close(self) -> None:
        """Timers off; waiting requests answered NOT_COORDINATOR so their clients look again."""
        self._cancel(self._expiry)
        for rt in self._runtime.values():
            self._stop(rt)
        self._runtime.clear()

    def _stop(self, rt: _Runtime) -> None:
        for h in [*rt.heartbeats.values(), *rt.pending_expiry.values(), rt.join_timer, rt.sync_timer]:
            self._cancel(h)
        for jw in rt.join_waiters.values():
            if not jw.done():
                jw.set_result(JoinResult(ErrorCode.not_coordinator))
        for sw in rt.sync_waiters.values():
            if not sw.done():
                sw.set_result(SyncResult(ErrorCode.not_coordinator))
