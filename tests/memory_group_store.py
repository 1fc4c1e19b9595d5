"""A `GroupStore` in memory, for the coordinator's unit tests (the Kafka-backed one is
`front_door/groups/store.py`, tested against the real broker): it keeps what was written, in order, and
can be told to fail the next writes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from contract.group_records import OffsetAndMetadata, StoredGroup, StoredGroups


class MemoryGroupStore:
    def __init__(self) -> None:
        self.groups: dict[str, StoredGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
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

    async def write_pending_offsets(self, group: str, producer_id: int,
                                    offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        await self._written("pending-offsets", group)
        self.pending.setdefault(producer_id, {}).setdefault(group, {}).update(offsets)

    async def end_pending_offsets(self, group: str, producer_id: int, pending: Iterable[tuple[str, int]],
                                  committed: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        await self._written("end-pending-offsets", group)
        self.offsets.setdefault(group, {}).update(committed)
        held = self.pending.get(producer_id, {}).get(group, {})
        for tp in pending:
            held.pop(tp, None)

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
        return StoredGroups(dict(self.groups), {g: dict(o) for g, o in self.offsets.items() if o},
                            {p: {g: dict(o) for g, o in by_group.items() if o} for p, by_group in self.pending.items()
                             if any(by_group.values())})
