"""A door's view of the transactional ids' states on its event loop, fed by its transaction store in the topic's
order (its own writes and the followed ones): `states` holds a change when the `listeners` run, so code on the
loop that finds a state there knows every earlier change was seen (the group coordinator ends a transaction's
offsets on its Complete state; TxnOffsetCommit waits for its transaction's AddOffsetsToTxn). The outcome of each
transaction seen to complete is kept a while (`outcome`), after its id's state has moved on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from validators.transaction_state import TransactionMetadata, TransactionState

log = logging.getLogger("gateway.front_door.transactions")
OUTCOMES_KEPT = 100_000  # completed transactions remembered by (producer id, start)
COMPLETE = (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


class TransactionView:
    def __init__(self) -> None:
        self.states: dict[str, TransactionMetadata] = {}
        self.listeners: list[Callable[[TransactionMetadata], None]] = []
        self._outcomes: OrderedDict[tuple[int, int], bool] = OrderedDict()
        self._lock = threading.Lock()  # outcomes are remembered on the store's follower thread
        self._waiters: list[asyncio.Future[None]] = []

    def remember(self, meta: TransactionMetadata) -> None:
        """Any thread: a state the store applied (a completed transaction's outcome is kept)."""
        if meta.state in COMPLETE:
            with self._lock:
                self._outcomes[meta.transaction_producer_id, meta.start_ms] = meta.state is TransactionState.COMPLETE_COMMIT
                while len(self._outcomes) > OUTCOMES_KEPT:
                    self._outcomes.popitem(last=False)

    def outcome(self, producer_id: int, txn_start_ms: int) -> bool | None:
        """True (committed) or False (aborted) for a transaction seen to complete; None for one not (yet)."""
        with self._lock:
            return self._outcomes.get((producer_id, txn_start_ms))

    def seen(self, transactional_id: str, meta: TransactionMetadata | None) -> None:
        """On the loop: the change in `states`, then the listeners, then the waiters woken."""
        if meta is None:
            self.states.pop(transactional_id, None)
        else:
            self.states[transactional_id] = meta
            for listener in self.listeners:
                try:
                    listener(meta)
                except Exception:  # noqa: BLE001 - one listener's failure must not stop the others or the store
                    log.exception("transactional id %s: a listener failed", transactional_id)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_for(self, transactional_id: str, found: Callable[[TransactionMetadata | None], bool],
                       timeout_s: float) -> TransactionMetadata | None:
        """The id's state once `found` accepts it, or its state when `timeout_s` ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not found(self.states.get(transactional_id)) and (left := deadline - loop.time()) > 0:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                break
        return self.states.get(transactional_id)
