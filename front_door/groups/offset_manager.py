"""Kafka's `OffsetMetadataManager` for classic groups: OffsetCommit, TxnOffsetCommit and the end of its
transactions, OffsetFetch, OffsetDelete and the expiry of offsets (`offsets.retention.minutes`). It shares the
group coordinator's state (`coordinator_runtime.py`: the groups, their committed offsets, the store) as Kafka's
two managers share a shard, runs on the same event loop, and checks a committing member as the classic groups'
`GroupMetadataManager` does (`classic_group_membership.py`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata, PendingOffsets
from front_door.groups.classic_group import ClassicGroup, GroupState
from front_door.groups.classic_group_membership import ClassicGroupMembership
from front_door.groups.coordinator_api import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    FetchedOffset,
    TopicPartition,
)

log = logging.getLogger("gateway.front_door.groups")


class OffsetMetadataManager(ClassicGroupMembership):
    """The offsets APIs and offset expiry of the groups in `GroupCoordinatorRuntime`."""

    async def commit(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                     offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        """`classicGroupOffsetCommit`: from a member of the current generation, or with generation -1 and
        no member id from a consumer outside group management into an empty (or new) group."""
        group, error = self._committing(group_id, generation, member_id, group_instance_id)
        if error is not None or group is None:
            return dict.fromkeys(offsets, error or ErrorCode.unknown_member_id)
        self._heartbeat_seen(group, member_id)
        results, accepted = self._sized(offsets)
        if accepted:
            results.update(await self._store_offsets(group, accepted))
        return results

    async def commit_transactional(self, producer_id: int, txn_start_ms: int, group_id: str, generation: int,
                                   member_id: str, group_instance_id: str | None,
                                   offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (`commitTransactionalOffset`): validated as a commit, written to the store as pending
        (`contract/group_records.py`) and held for the producer's transaction, told by its start
        (`transactional_offsets.py`), until it ends (`transaction_ended`)."""
        group, error = self._committing(group_id, generation, member_id, group_instance_id)
        if error is not None or group is None:
            return dict.fromkeys(offsets, error or ErrorCode.unknown_member_id)
        results, accepted = self._sized(offsets)
        if accepted:
            pending = PendingOffsets(txn_start_ms, dict(accepted))
            try:
                await self._spawn(self.store.write_pending_offsets(group_id, producer_id, pending), group_id)
            except Exception as e:  # noqa: BLE001 - the store's failure is the client's retriable error
                log.warning("group %s: transactional offsets not stored: %s", group_id, e)
                return {**results, **dict.fromkeys(accepted, ErrorCode.coordinator_not_available)}
            self.transactional.add(producer_id, group_id, txn_start_ms, accepted)
        results.update(dict.fromkeys(accepted, ErrorCode.none))
        return results

    def transaction_ended(self, producer_id: int, txn_start_ms: int, commit: bool) -> None:
        """The producer's transaction that started at `txn_start_ms` completed (its Complete state seen, or its end
        read from the groups topic: `replayEndTransactionMarker`): the offsets held for it become the groups'
        committed offsets, or are dropped, at once; the store gets the commits and the tombstones of the pending
        records and of the end in one write per group (a failed write leaves them to the next load, which applies
        the end again)."""
        for group_id, held in self.transactional.of_transaction(producer_id, txn_start_ms).items():
            self.transactional.drop(producer_id, group_id)
            group = self.groups.get(group_id)
            committed = held.offsets if commit and group is not None and not group.in_state(GroupState.DEAD) else {}
            self._spawn(self.store.end_pending_offsets(group_id, producer_id, held.offsets, committed), group_id)
            if committed:
                self.offsets.setdefault(group_id, {}).update(committed)
                self._on_commit(group_id, len(committed))

    def end_completed(self) -> None:
        """Every held transaction `transaction_outcome` knows to be over, ended (after a load, which may find the
        pending offsets of a transaction whose Complete state was seen before)."""
        for producer_id, _group_id, held in list(self.transactional.held()):
            outcome = self.transaction_outcome(producer_id, held.txn_start_ms)
            if outcome is not None:
                self.transaction_ended(producer_id, held.txn_start_ms, outcome)

    def _sized(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> tuple[
            dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        """OFFSET_METADATA_TOO_LARGE for metadata past `offset.metadata.max.bytes`; the rest to store."""
        results: dict[TopicPartition, ErrorCode] = {}
        accepted = {}
        for tp, offset in offsets.items():
            if len(offset.metadata.encode()) > self.settings.offset_metadata_max_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = offset
        return results, accepted

    async def _store_offsets(self, group: ClassicGroup, accepted: Mapping[TopicPartition, OffsetAndMetadata],
                             ) -> dict[TopicPartition, ErrorCode]:
        group_id = group.group_id
        try:
            await self._spawn(self.store.write_offsets(group_id, accepted), group_id)
        except Exception as e:  # noqa: BLE001 - the store's failure is the client's retriable error
            log.warning("group %s: offsets not stored: %s", group_id, e)
            return dict.fromkeys(accepted, ErrorCode.coordinator_not_available)
        if not group.in_state(GroupState.DEAD):
            self.offsets.setdefault(group_id, {}).update(accepted)
        self._on_commit(group_id, len(accepted))
        return dict.fromkeys(accepted, ErrorCode.none)

    def _committing(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                    ) -> tuple[ClassicGroup | None, ErrorCode | None]:
        """The group a commit goes to (created for a consumer outside group management), or why it may not."""
        group = self.groups.get(group_id)
        error: ErrorCode | None = None
        if group is None:
            if generation >= 0:  # a member of a group that no longer exists
                error = ErrorCode.illegal_generation
            else:
                group = self._create(group_id)
        elif group.in_state(GroupState.DEAD):
            error = ErrorCode.coordinator_not_available
        elif generation < 0 and group.in_state(GroupState.EMPTY):
            pass
        elif generation < 0 and member_id == UNKNOWN_MEMBER_ID and group_instance_id is None:
            error = ErrorCode.unknown_member_id  # an outsider's commit into a group with members
        else:  # `ClassicGroup.validateOffsetCommit`: the member first, then the phase
            error = self._validate_member(group, member_id, group_instance_id, generation)
            if error is None and group.in_state(GroupState.COMPLETING_REBALANCE):
                error = ErrorCode.rebalance_in_progress
        return group, error

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, FetchedOffset]:
        """`classicGroupOffsetFetch`: every partition asked (-1 where nothing is committed), or everything
        the group committed when none is named."""
        committed = self.offsets.get(group_id, {})
        wanted = sorted(committed) if partitions is None else list(partitions)
        out = {}
        for tp in wanted:
            o = committed.get(tp)
            out[tp] = FetchedOffset() if o is None else FetchedOffset(o.offset, o.leader_epoch, o.metadata)
        return out

    async def delete_committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], subscribed: Callable[[bytes], set[str]],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """`GroupMetadataManager.deleteOffsets` (OffsetDelete): the group's error, or each partition's. A group
        with members keeps the offsets of the topics a member subscribes to (`subscribed` reads a member's
        subscription), and only a `consumer` group may lose offsets while it has members."""
        group = self.groups.get(group_id)
        committed = self.offsets.get(group_id, {})
        if (group is None and not committed) or (group is not None and group.in_state(GroupState.DEAD)):
            return ErrorCode.group_id_not_found, {}
        topics: set[str] = set()
        if group is not None and not group.in_state(GroupState.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.non_empty_group, {}
            for member in group.members.values():
                for protocol in member.protocols:
                    topics |= subscribed(protocol.metadata)
        results = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions if tp[0] in topics}
        going = [tp for tp in partitions if tp[0] not in topics]
        stored = [tp for tp in going if tp in committed]
        if stored:
            try:
                await self._spawn(self.store.delete_offsets(group_id, stored), group_id)
            except Exception as e:  # noqa: BLE001 - the store's failure is the client's retriable error
                log.warning("group %s: offsets not deleted: %s", group_id, e)
                return ErrorCode.coordinator_not_available, {}
            for tp in stored:
                committed.pop(tp, None)
        results.update(dict.fromkeys(going, ErrorCode.none))
        return ErrorCode.none, results

    # ------------------------------------------------------------------ offset expiry

    def start_expiry(self) -> None:
        """Run `expire_offsets` every `offsets.retention.check.interval.ms`, as Kafka's coordinator does."""
        def tick() -> None:
            self._spawn(self.expire_offsets(), "*")
            self._expiry = asyncio.get_running_loop().call_later(interval, tick)

        interval = self.settings.offsets_retention_check_interval_ms / 1000
        self._expiry = asyncio.get_running_loop().call_later(interval, tick)

    async def expire_offsets(self) -> None:
        """`GroupMetadataManager.cleanupGroupMetadata` for classic groups (`OffsetExpirationConditionImpl`):
        an Empty group's offsets expire `offsets.retention.minutes` after it became empty (after each commit
        for a group that never had members); a group left Empty with no offsets is deleted, its record with
        it. Groups with members keep their offsets."""
        now, retention = self._now_ms(), self.settings.offsets_retention_ms
        for group_id, group in list(self.groups.items()):
            if not group.in_state(GroupState.EMPTY) or group.pending_members:  # a join on its way
                continue
            offsets = self.offsets.get(group_id, {})
            managed = group.protocol_type is not None and group.state_timestamp_ms >= 0
            expired = [tp for tp, o in offsets.items()
                       if (group.state_timestamp_ms if managed else o.commit_timestamp_ms) + retention <= now]
            try:
                if len(expired) == len(offsets):
                    group.transition(GroupState.DEAD, now)
                    await self._spawn(self.store.delete_group(group_id, expired), group_id)
                    if self.groups.get(group_id) is group:
                        del self.groups[group_id]
                        self._runtime.pop(group_id, None)
                        self.offsets.pop(group_id, None)
                    log.info("group %s: expired with %d offsets (empty for offsets.retention.minutes)", group_id,
                             len(expired))
                elif expired:
                    await self._spawn(self.store.delete_offsets(group_id, expired), group_id)
                    for tp in expired:
                        offsets.pop(tp, None)
            except Exception as e:  # noqa: BLE001 - the next check retries
                log.warning("group %s: expired offsets not removed: %s", group_id, e)
                if group.in_state(GroupState.DEAD):
                    group.state = GroupState.EMPTY
