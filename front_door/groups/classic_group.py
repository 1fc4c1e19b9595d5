"""One classic consumer group's state (Kafka's `ClassicGroup` and `ClassicGroupMember`, group-coordinator
module): its members with their protocols, the generation, the selected protocol, the leader, and the
state machine

    Empty <-> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
                                    (any state) -> Dead

Pure: no clock, no I/O, no futures. The coordinator (`coordinator.py` and the managers it composes) drives
it; the timers and the waiting JoinGroup/SyncGroup requests are its runtime's (`coordinator_runtime.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from contract.group_records import StoredGroup, StoredMember


class GroupState(Enum):
    """`ClassicGroupState`; the values are Kafka's names, which DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# `ClassicGroupState.validPreviousStates`
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A transition Kafka's state machine does not have: a coordinator bug, never a client's doing."""


@dataclass(frozen=True)
class Protocol:
    """One (name, metadata) of a JoinGroup: an assignor the member supports, with its subscription."""

    name: str
    metadata: bytes


@dataclass
class Member:
    """`ClassicGroupMember`."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""

    def metadata(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Iterable[Protocol]) -> bool:
        """Same protocols, in the same order, with the same metadata (`ClassicGroupMember.matches`)."""
        return tuple(protocols) == self.protocols


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id (KIP-345)
    # member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them (KIP-394)
    pending_members: set[str] = field(default_factory=set)
    # members of the current generation that have not sent their SyncGroup (`pendingSyncMembers`)
    pending_sync: set[str] = field(default_factory=set)

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[to]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {to.value}")
        self.state = to
        self.state_timestamp_ms = now_ms

    def in_state(self, *states: GroupState) -> bool:
        return self.state in states

    def is_empty(self) -> bool:
        return not self.members

    # ------------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        if not self.members:  # the first member sets the group's protocol type
            self.protocol_type = member.protocol_type
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:  # `ClassicGroup.remove`: the next member in join order leads
            self.leader = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """A static member rejoined with an unknown member id: it takes the old one's place under a new
        member id; the old id is fenced from now on (`ClassicGroup.replaceStaticMember`)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static member's request under a member id that is no longer its own
        (`ClassicGroup.isStaticMemberFenced`): FENCED_INSTANCE_ID."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        candidates: set[str] | None = None
        for m in self.members.values():
            names = {p.name for p in m.protocols}
            candidates = names if candidates is None else candidates & names
        return candidates or set()

    def supports(self, protocol_type: str, protocols: Iterable[Protocol]) -> bool:
        """Whether a member with these protocols may join (`ClassicGroup.supportsProtocols`): an empty group
        takes any non-empty protocol type and list; otherwise the type must match and one protocol must be
        supported by every member and the newcomer."""
        names = {p.name for p in protocols}
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & names)

    def select_protocol(self) -> str:
        """Each member votes for the first protocol of its list that every member supports; the most votes
        win (`ClassicGroup.selectProtocol`; ties go to the protocol named first by the earliest member)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            vote = next(p.name for p in m.protocols if p.name in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def next_generation(self, now_ms: int) -> None:
        """`ClassicGroup.initNextGeneration`: members -> CompletingRebalance with a selected protocol; no
        members -> Empty without one."""
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.pending_sync = set(self.members)
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol = None
            self.pending_sync = set()
            self.transition(GroupState.EMPTY, now_ms)

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among members: how long the join phase waits."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ durable form

    def stored(self) -> StoredGroup:
        """What the group's record on the groups topic says (`GroupMetadataValue`)."""
        protocol = self.protocol
        return StoredGroup(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=protocol,
            leader=self.leader if self.members else None, current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(StoredMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"", assignment=m.assignment)
                for m in self.members.values()))

    @classmethod
    def loaded(cls, group_id: str, record: StoredGroup) -> ClassicGroup:
        """A group as its last record left it: with members, Stable in its generation (Kafka loads a group
        with members as Stable); without, Empty."""
        group = cls(group_id, generation=record.generation, protocol_type=record.protocol_type or None,
                    protocol=record.protocol, state_timestamp_ms=record.current_state_timestamp_ms)
        for m in record.members:
            protocols = (Protocol(record.protocol, m.subscription),) if record.protocol is not None else ()
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                             m.session_timeout_ms, record.protocol_type, protocols, m.assignment))
        if record.leader in group.members:
            group.leader = record.leader
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group
