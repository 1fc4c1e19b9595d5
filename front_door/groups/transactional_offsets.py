"""Offsets committed inside a transaction (TxnOffsetCommit), held until the transaction ends: Kafka's
`pendingTransactionalOffsetCommits` (`OffsetMetadataManager`). A commit marker for the group's offsets
partition makes them the group's committed offsets; an abort drops them. While some are held, an OffsetFetch
with `require_stable` gets UNSTABLE_OFFSET_COMMIT for their partitions (KIP-447), so a consumer taking over
waits for the transaction's outcome.

This is the coordinator's memory of them; they are written to the groups topic first, as pending records
(`contract/group_records.py`), so a door that loads the group finds them again and the transaction's end, resumed
by its next coordinator, still commits or drops them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from contract.group_records import OffsetAndMetadata

TopicPartition = tuple[str, int]


class PendingTransactionalOffsets:
    def __init__(self) -> None:
        self._pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    def add(self, producer_id: int, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with offsets held for an open transaction."""
        return {tp for groups in self._pending.values() for tp in groups.get(group_id, {})}

    def held(self, producer_id: int, placed: Callable[[str], bool]) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """The producer's held offsets of the groups `placed` selects."""
        return {g: dict(o) for g, o in self._pending.get(producer_id, {}).items() if placed(g)}

    def drop(self, producer_id: int, group_id: str) -> None:
        groups = self._pending.get(producer_id, {})
        groups.pop(group_id, None)
        if not groups:
            self._pending.pop(producer_id, None)

    def forget(self, which: Callable[[str], bool]) -> None:
        """The groups `which` names handed over to another door (which loads their pending records)."""
        for producer_id in list(self._pending):
            for group_id in [g for g in self._pending[producer_id] if which(g)]:
                self.drop(producer_id, group_id)
