"""The records of the groups topic (`groups_topic`), in Kafka's own `__consumer_offsets` layout
(group-coordinator module, `OffsetCommitKey`/`OffsetCommitValue`, `GroupMetadataKey`/`GroupMetadataValue`),
so Kafka's tooling reads the topic too (`kafka-console-consumer --formatter
org.apache.kafka.tools.consumer.OffsetsMessageFormatter` / `GroupMetadataMessageFormatter`):

    key   = int16 version, then: version 0/1 OffsetCommitKey (group, topic, partition int32)
                                  version 2   GroupMetadataKey (group)
    value = int16 version, then the value of that version; null is a tombstone (compaction drops the key)

and two layouts of the gateway's own, for offsets committed inside a transaction (TxnOffsetCommit). Kafka writes
those as OffsetCommit records in the producer's transactional batches, made the group's (or dropped) by the
transaction's marker in the same partition; a record on the groups topic cannot carry a producer id, so the
gateway keys them by one and writes the marker as a record too:

    pending offset: key   = int16 32001, int64 producer id, group, topic, partition int32
                    value = int16 0, int64 the transaction's start (txnStartTimestamp), then OffsetCommitValue v3's
                            fields (offset, leader epoch, metadata, commit timestamp)
    transaction end: key   = int16 32002, int64 producer id
                     value = int16 0, int64 the transaction's start, int8 1 commit / 0 abort

The transaction's start tells one transaction of a producer from its next. The coordinator writes the end to
every partition of the topic (wherever the transaction's groups are) before the transaction is complete; the group's coordinator then
writes the committed offsets as ordinary OffsetCommit records and tombstones the pending keys and the end, in one
write. A load applies an end to the pending offsets of its transaction read before it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from kio.serial import readers as r
from kio.serial import writers as w


@dataclass(frozen=True)
class OffsetAndMetadata:
    """`OffsetAndMetadata` / OffsetCommitValue."""

    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True)
class StoredMember:
    """GroupMetadataValue.MemberMetadata."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """GroupMetadataValue."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


@dataclass(frozen=True)
class PendingOffsets:
    """Offsets a producer's transaction (told by its start, `txnStartTimestamp`) committed for one group."""

    txn_start_ms: int
    offsets: dict[tuple[str, int], OffsetAndMetadata]


@dataclass(frozen=True)
class EndedOffsets:
    """A transaction's pending offsets for a group, and how it ended."""

    group: str
    producer_id: int
    pending: PendingOffsets
    commit: bool


@dataclass(frozen=True)
class StoredGroups:
    """What a load of the groups topic found."""

    groups: dict[str, StoredGroup]
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]]  # group -> (topic, partition) -> offset
    # producer id -> group -> offsets committed inside a transaction whose end the topic does not hold
    pending: dict[int, dict[str, PendingOffsets]] = field(default_factory=dict)
    # transactions whose end the load applied: their records to tombstone (and commits to write as the group's)
    ended: tuple[EndedOffsets, ...] = ()


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class PendingOffsetKey:
    """An offset committed by `producer_id`'s open transaction (the gateway's own key version, above)."""

    producer_id: int
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class TxnEndKey:
    """The end of `producer_id`'s transaction on this offsets partition (the gateway's own key version, above)."""

    producer_id: int


@dataclass(frozen=True)
class TxnEnd:
    txn_start_ms: int
    commit: bool


class GroupRecordError(ValueError):
    """A record of the groups topic that is not one of Kafka's layouts (the message says what is wrong)."""


OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2
PENDING_OFFSET_KEY_VERSION = 32001  # the gateway's own: far above every version Kafka's coordinators write
TXN_END_KEY_VERSION = 32002
GATEWAY_VALUE_VERSION = 0
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


GroupsKey = OffsetKey | GroupKey | PendingOffsetKey | TxnEndKey


def encode_key(key: GroupsKey) -> bytes:
    b = io.BytesIO()
    if isinstance(key, TxnEndKey):
        w.write_int16(b, TXN_END_KEY_VERSION)
        w.write_int64(b, key.producer_id)
    elif isinstance(key, PendingOffsetKey):
        w.write_int16(b, PENDING_OFFSET_KEY_VERSION)
        w.write_int64(b, key.producer_id)
        w.write_legacy_string(b, key.group)
        w.write_legacy_string(b, key.topic)
        w.write_int32(b, key.partition)
    elif isinstance(key, OffsetKey):
        w.write_int16(b, OFFSET_KEY_VERSIONS[1])
        w.write_legacy_string(b, key.group)
        w.write_legacy_string(b, key.topic)
        w.write_int32(b, key.partition)
    else:
        w.write_int16(b, GROUP_KEY_VERSION)
        w.write_legacy_string(b, key.group)
    return b.getvalue()


def encode_offset(value: OffsetAndMetadata) -> bytes:
    b = io.BytesIO()
    w.write_int16(b, OFFSET_VALUE_VERSION)
    w.write_int64(b, value.offset)
    w.write_int32(b, value.leader_epoch)
    w.write_legacy_string(b, value.metadata)
    w.write_int64(b, value.commit_timestamp_ms)
    return b.getvalue()


def encode_pending_offset(txn_start_ms: int, value: OffsetAndMetadata) -> bytes:
    b = io.BytesIO()
    w.write_int16(b, GATEWAY_VALUE_VERSION)
    w.write_int64(b, txn_start_ms)
    w.write_int64(b, value.offset)
    w.write_int32(b, value.leader_epoch)
    w.write_legacy_string(b, value.metadata)
    w.write_int64(b, value.commit_timestamp_ms)
    return b.getvalue()


def encode_txn_end(value: TxnEnd) -> bytes:
    b = io.BytesIO()
    w.write_int16(b, GATEWAY_VALUE_VERSION)
    w.write_int64(b, value.txn_start_ms)
    w.write_int8(b, 1 if value.commit else 0)
    return b.getvalue()


def encode_group(value: StoredGroup) -> bytes:
    b = io.BytesIO()
    w.write_int16(b, GROUP_VALUE_VERSION)
    w.write_legacy_string(b, value.protocol_type)
    w.write_int32(b, value.generation)
    w.write_nullable_legacy_string(b, value.protocol)
    w.write_nullable_legacy_string(b, value.leader)
    w.write_int64(b, value.current_state_timestamp_ms)
    w.write_legacy_array_length(b, len(value.members))
    for m in value.members:
        w.write_legacy_string(b, m.member_id)
        w.write_nullable_legacy_string(b, m.group_instance_id)
        w.write_legacy_string(b, m.client_id)
        w.write_legacy_string(b, m.client_host)
        w.write_int32(b, m.rebalance_timeout_ms)
        w.write_int32(b, m.session_timeout_ms)
        w.write_legacy_bytes(b, m.subscription)
        w.write_legacy_bytes(b, m.assignment)
    return b.getvalue()


def _next(read: Any, buf: bytes, at: int) -> tuple[Any, int]:
    """One field at `at` and the offset after it (kio's readers return the value and its size)."""
    value, size = read(buf, at)
    return value, at + size


def _read(what: str, data: bytes, parse: object) -> object:
    try:
        value, used = parse(data, 0)  # type: ignore[operator]
    except GroupRecordError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the readers is a damaged record
        raise GroupRecordError(f"unreadable {what} ({len(data)} bytes): {type(e).__name__}: {e}") from None
    if used != len(data):
        raise GroupRecordError(f"{what}: {len(data) - used} bytes after the end")
    return value


def decode_key(data: bytes) -> GroupsKey:
    def parse(buf: bytes, at: int) -> tuple[GroupsKey, int]:
        version, at = _next(r.read_int16, buf, at)
        if version not in (*OFFSET_KEY_VERSIONS, GROUP_KEY_VERSION, PENDING_OFFSET_KEY_VERSION, TXN_END_KEY_VERSION):
            raise GroupRecordError(f"key version {version} is neither an offset (0, 1), a group (2), a pending "
                                   f"transactional offset ({PENDING_OFFSET_KEY_VERSION}) nor a transaction end "
                                   f"({TXN_END_KEY_VERSION}) key")
        producer_id = -1
        if version in (PENDING_OFFSET_KEY_VERSION, TXN_END_KEY_VERSION):
            producer_id, at = _next(r.read_int64, buf, at)
        if version == TXN_END_KEY_VERSION:
            return TxnEndKey(producer_id), at
        group, at = _next(r.read_legacy_string, buf, at)
        if version == PENDING_OFFSET_KEY_VERSION:
            topic, at = _next(r.read_legacy_string, buf, at)
            partition, at = _next(r.read_int32, buf, at)
            return PendingOffsetKey(producer_id, group, topic, partition), at
        if version in OFFSET_KEY_VERSIONS:
            topic, at = _next(r.read_legacy_string, buf, at)
            partition, at = _next(r.read_int32, buf, at)
            return OffsetKey(group, topic, partition), at
        return GroupKey(group), at

    return _read("key", data, parse)  # type: ignore[return-value]


def decode_offset(data: bytes) -> OffsetAndMetadata:
    def parse(buf: bytes, at: int) -> tuple[OffsetAndMetadata, int]:
        version, at = _next(r.read_int16, buf, at)
        if version not in (1, 3):
            raise GroupRecordError(f"offset value version {version} is not 1 or 3")
        offset, at = _next(r.read_int64, buf, at)
        epoch = -1
        if version == 3:
            epoch, at = _next(r.read_int32, buf, at)
        metadata, at = _next(r.read_legacy_string, buf, at)
        timestamp, at = _next(r.read_int64, buf, at)
        if version == 1:
            _expire, at = _next(r.read_int64, buf, at)
        return OffsetAndMetadata(offset, epoch, metadata, timestamp), at

    return _read("offset value", data, parse)  # type: ignore[return-value]


def _gateway_version(what: str, buf: bytes, at: int) -> int:
    version, at = _next(r.read_int16, buf, at)
    if version != GATEWAY_VALUE_VERSION:
        raise GroupRecordError(f"{what} version {version} is not {GATEWAY_VALUE_VERSION}")
    return at


def decode_pending_offset(data: bytes) -> tuple[int, OffsetAndMetadata]:
    """(the transaction's start, the offset)."""
    def parse(buf: bytes, at: int) -> tuple[tuple[int, OffsetAndMetadata], int]:
        at = _gateway_version("pending offset value", buf, at)
        start, at = _next(r.read_int64, buf, at)
        offset, at = _next(r.read_int64, buf, at)
        epoch, at = _next(r.read_int32, buf, at)
        metadata, at = _next(r.read_legacy_string, buf, at)
        timestamp, at = _next(r.read_int64, buf, at)
        return (start, OffsetAndMetadata(offset, epoch, metadata, timestamp)), at

    return _read("pending offset value", data, parse)  # type: ignore[return-value]


def decode_txn_end(data: bytes) -> TxnEnd:
    def parse(buf: bytes, at: int) -> tuple[TxnEnd, int]:
        at = _gateway_version("transaction end value", buf, at)
        start, at = _next(r.read_int64, buf, at)
        commit, at = _next(r.read_int8, buf, at)
        if commit not in (0, 1):
            raise GroupRecordError(f"transaction end value: result {commit} is neither 1 (commit) nor 0 (abort)")
        return TxnEnd(start, commit == 1), at

    return _read("transaction end value", data, parse)  # type: ignore[return-value]


def decode_group(data: bytes) -> StoredGroup:
    def parse(buf: bytes, at: int) -> tuple[StoredGroup, int]:
        version, at = _next(r.read_int16, buf, at)
        if version != GROUP_VALUE_VERSION:
            raise GroupRecordError(f"group value version {version} is not {GROUP_VALUE_VERSION}")
        protocol_type, at = _next(r.read_legacy_string, buf, at)
        generation, at = _next(r.read_int32, buf, at)
        protocol, at = _next(r.read_nullable_legacy_string, buf, at)
        leader, at = _next(r.read_nullable_legacy_string, buf, at)
        timestamp, at = _next(r.read_int64, buf, at)
        count, at = _next(r.read_legacy_array_length, buf, at)
        if count < 0 or count > len(buf):
            raise GroupRecordError(f"group value: {count} members in {len(buf)} bytes")
        members = []
        for _ in range(count):
            member_id, at = _next(r.read_legacy_string, buf, at)
            instance, at = _next(r.read_nullable_legacy_string, buf, at)
            client_id, at = _next(r.read_legacy_string, buf, at)
            client_host, at = _next(r.read_legacy_string, buf, at)
            rebalance, at = _next(r.read_int32, buf, at)
            session, at = _next(r.read_int32, buf, at)
            subscription, at = _next(r.read_legacy_bytes, buf, at)
            assignment, at = _next(r.read_legacy_bytes, buf, at)
            members.append(StoredMember(member_id, instance, client_id, client_host, rebalance, session,
                                        bytes(subscription), bytes(assignment)))
        return StoredGroup(protocol_type, generation, protocol, leader, timestamp, tuple(members)), at

    return _read("group value", data, parse)  # type: ignore[return-value]
