"""Offsets committed inside a transaction (TxnOffsetCommit), held until the transaction ends: Kafka's
`pendingTransactionalOffsetCommits` (`OffsetMetadataManager`). A commit marker for the group's offsets
partition makes them the group's committed offsets; an abort drops them. While some are held, an OffsetFetch
with `require_stable` gets UNSTABLE_OFFSET_COMMIT for their partitions (KIP-447), so a consumer taking over
waits for the transaction's outcome.

They are held in the coordinating door's memory, not written ahead to the groups topic as Kafka writes them:
a door that restarts before the transaction ends forgets them, and the transaction then commits without them
(its consumer resumes from the offsets committed before, at least once; docs/kafka-compatibility.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

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

    def take(self, producer_id: int, placed: Callable[[str], bool],
             ) -> Iterator[tuple[str, dict[TopicPartition, OffsetAndMetadata]]]:
        """The producer's held offsets of the groups `placed` selects, removed."""
        groups = self._pending.get(producer_id, {})
        for group_id in [g for g in groups if placed(g)]:
            yield group_id, groups.pop(group_id)
        if not groups:
            self._pending.pop(producer_id, None)
