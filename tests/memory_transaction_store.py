"""A transaction store in memory, for the coordinator's unit tests (the Kafka-backed one is
`front_door/transactions/store.py`, tested against the real broker): it keeps what was written, in order, and
can be told to fail the next writes."""

from __future__ import annotations

import asyncio

from front_door.transactions.store import TransactionStoreError
from front_door.transactions.view import TransactionView
from validators.transaction_state import TransactionMetadata


class MemoryTransactionStore:
    def __init__(self) -> None:
        self.states: dict[str, TransactionMetadata] = {}
        self.writes: list[TransactionMetadata] = []
        self.fail = False
        self.view = TransactionView()

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.states.get(transactional_id)

    def snapshot(self) -> dict[str, TransactionMetadata]:
        return dict(self.states)

    async def write(self, meta: TransactionMetadata) -> None:
        await asyncio.sleep(0)  # a write completes later than it starts, as a broker's ack does
        if self.fail:
            raise TransactionStoreError("the store is down")
        self.writes.append(meta)
        self.states[meta.transactional_id] = meta
        self.view.remember(meta)
        self.view.seen(meta.transactional_id, meta)

    async def delete(self, transactional_id: str) -> None:
        await asyncio.sleep(0)
        self.states.pop(transactional_id, None)
        self.view.seen(transactional_id, None)
