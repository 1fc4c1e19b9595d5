"""Placeholder: replaced by the group-store branch (records of the groups topic)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


@dataclass(frozen=True)
class StoredGroups:
    groups: dict[str, StoredGroup]
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]]
