"""What the classic group coordinator (`coordinator.py`) is given and answers: its store's protocol, its settings
(Kafka's broker settings for classic groups) and the requests and results of its calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol as TypingProtocol

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata, PendingOffsets, StoredGroup, TxnEnd
from front_door.groups.classic_group import GroupState, Protocol

TopicPartition = tuple[str, int]
NO_GENERATION = -1  # OffsetCommit from a consumer outside group management (assign())
UNKNOWN_MEMBER_ID = ""
CONSUMER_PROTOCOL_TYPE = "consumer"  # the Java consumer's (ConsumerProtocol.PROTOCOL_TYPE): members with subscriptions


class GroupStore(TypingProtocol):
    """Where groups and offsets last (`store.py`); a failed write raises."""

    async def write_offsets(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...

    async def write_group(self, group: str, group_record: StoredGroup) -> None: ...

    async def delete_group(self, group: str, partitions: Iterable[TopicPartition]) -> None: ...

    async def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None: ...

    async def write_pending_offsets(self, group: str, producer_id: int, pending: PendingOffsets) -> None: ...

    async def end_pending_offsets(self, group: str, producer_id: int, pending: Iterable[TopicPartition],
                                  committed: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...

    async def write_txn_end(self, producer_id: int, end: TxnEnd) -> None: ...


@dataclass(frozen=True)
class GroupSettings:
    """Kafka's broker settings for classic groups, with Kafka's defaults."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()  # the leader's answer: every member with its subscription
    skip_assignment: bool = False  # KIP-814: a static leader's rejoin that keeps the assignment


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    client_id: str
    client_host: str
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394)


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True)
class FetchedOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True)
class GroupSnapshot:
    group_id: str
    state: GroupState
    members: int
    offsets: dict[TopicPartition, int]


@dataclass(frozen=True)
class GroupsSnapshot:
    groups: tuple[GroupSnapshot, ...]
