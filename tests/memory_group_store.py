"""A `GroupStore` in memory, for the coordinator's unit tests (the Kafka-backed one is
`front_door/groups/store.py`, tested against the real broker): it keeps what was written, in order, and
can be told to fail the next writes. A load applies a transaction's end to its pending offsets as a load of the
groups topic does (`contract/group_records.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from contract.group_records import (
    EndedOffsets,
    OffsetAndMetadata,
    PendingOffsets,
    StoredGroup,
    StoredGroups,
    TxnEnd,
)


class MemoryGroupStore:
    def __init__(self) -> None:
        self.groups: dict[str, StoredGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.pending: dict[int, dict[str, PendingOffsets]] = {}
        self.ends: dict[int, TxnEnd] = {}  # producer id -> its last end
        self.writes: list[tuple[str, str]] = []  # (kind, group) in the order written
        self.fail = False

    async def _written(self, kind: str, group: str) -> None:
        await asyncio.sleep(0)  # a write completes later than it starts, as a broker's ack does
        if self.fail:
            raise OSError("the store is down")
        self.writes.append((kind, group))

    async def write_offsets(self, group: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        await self._written("offsets", group)
        self.offsets.setdefault(group, {}).update(offsets)

    async def write_pending_offsets(self, group: str, producer_id: int, pending: PendingOffsets) -> None:
        await self._written("pending-offsets", group)
        held = self.pending.setdefault(producer_id, {}).get(group)
        if held is None or held.txn_start_ms != pending.txn_start_ms:
            held = self.pending[producer_id][group] = PendingOffsets(pending.txn_start_ms, {})
        held.offsets.update(pending.offsets)

    async def write_txn_end(self, producer_id: int, end: TxnEnd) -> None:
        await self._written("txn-end", str(producer_id))
        self.ends[producer_id] = end

    async def end_pending_offsets(self, group: str, producer_id: int, pending: Iterable[tuple[str, int]],
                                  committed: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        await self._written("end-pending-offsets", group)
        self.offsets.setdefault(group, {}).update(committed)
        held = self.pending.get(producer_id, {}).get(group)
        for tp in pending:
            if held is not None:
                held.offsets.pop(tp, None)
        self.ends.pop(producer_id, None)

    async def write_group(self, group: str, group_record: StoredGroup) -> None:
        await self._written("group", group)
        self.groups[group] = group_record

    async def delete_group(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        await self._written("delete", group)
        self.groups.pop(group, None)
        for tp in partitions:
            self.offsets.get(group, {}).pop(tp, None)

    async def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        await self._written("delete-offsets", group)
        for tp in partitions:
            self.offsets.get(group, {}).pop(tp, None)

    def load(self) -> StoredGroups:
        offsets = {g: dict(o) for g, o in self.offsets.items() if o}
        pending: dict[int, dict[str, PendingOffsets]] = {}
        ended = []
        for producer_id, groups in self.pending.items():
            for group, held in groups.items():
                if not held.offsets:
                    continue
                end = self.ends.get(producer_id)
                if end is not None and end.txn_start_ms == held.txn_start_ms:
                    if end.commit:
                        offsets.setdefault(group, {}).update(held.offsets)
                    ended.append(EndedOffsets(group, producer_id, PendingOffsets(held.txn_start_ms,
                                                                                dict(held.offsets)), end.commit))
                else:
                    pending.setdefault(producer_id, {})[group] = PendingOffsets(held.txn_start_ms, dict(held.offsets))
        return StoredGroups(dict(self.groups), offsets, pending, tuple(ended))
