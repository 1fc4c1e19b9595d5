"""Offsets committed inside a transaction (TxnOffsetCommit), held until the transaction ends: Kafka's
`pendingTransactionalOffsetCommits` (`OffsetMetadataManager`). The transaction's end makes them the group's
committed offsets (a commit) or drops them (an abort). While some are held, an OffsetFetch with `require_stable`
gets UNSTABLE_OFFSET_COMMIT for their partitions (KIP-447), so a consumer taking over waits for the outcome.

This is the group coordinator's memory of them; they are written to the groups topic first, as pending records
tagged with the transaction's start (`contract/group_records.py`), so a door that loads the group finds them
again. Each producer has at most one transaction open, so a producer's held offsets for a group belong to one
transaction, named by its start (`txnStartTimestamp`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from contract.group_records import OffsetAndMetadata, PendingOffsets

TopicPartition = tuple[str, int]


class PendingTransactionalOffsets:
    def __init__(self) -> None:
        self._pending: dict[int, dict[str, PendingOffsets]] = {}

    def add(self, producer_id: int, group_id: str, txn_start_ms: int,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        groups = self._pending.setdefault(producer_id, {})
        held = groups.get(group_id)
        if held is None or held.txn_start_ms != txn_start_ms:  # a later transaction of the producer
            held = groups[group_id] = PendingOffsets(txn_start_ms, {})
        held.offsets.update(offsets)

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with offsets held for an open transaction."""
        return {tp for groups in self._pending.values() if group_id in groups for tp in groups[group_id].offsets}

    def of_transaction(self, producer_id: int, txn_start_ms: int) -> dict[str, PendingOffsets]:
        """The offsets held for the producer's transaction that started at `txn_start_ms`, by group."""
        return {g: held for g, held in self._pending.get(producer_id, {}).items() if held.txn_start_ms == txn_start_ms}

    def held(self) -> Iterator[tuple[int, str, PendingOffsets]]:
        for producer_id, groups in list(self._pending.items()):
            for group_id, held in list(groups.items()):
                yield producer_id, group_id, held

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
