"""The front doors' transaction coordinator (Kafka's `TransactionCoordinator`: the classic protocol and KIP-890's
transaction version 2): the rules are `validators.transaction_state`'s; this is their I/O.

Each transactional id has one coordinating node among the live doors' (`placement.transaction_coordinator`),
as Kafka places it on a `__transaction_state` partition's leader; a request sent to another node gets
NOT_COORDINATOR. A change is written to the transaction state topic (`store.py`) before it is answered, and
while that write is in flight the id answers CONCURRENT_TRANSACTIONS (Kafka's pending transition).

Ending a transaction (EndTxn, an InitProducerId that fences an open one, the expiry of its timeout): the
Prepare state is written, the client answered, then a marker goes to each of its partitions (`send_marker`,
through the same ingress path as the client's batches, so it lands after them), and once every partition has
its marker the Complete state is written. A door that takes over an id (its coordinator died) finds it in a
Prepare state in the topic and sends the markers again (`resume`); a partition that gets a marker twice
appends it twice, as Kafka's leaders do, and nothing else changes.

Transaction version 2: EndTxn v5 bumps the epoch (a new producer id when it would overflow, allocated here
before the rules run) and answers the producer id and epoch the next transaction uses; the markers carry the
bumped epoch and the transaction's version (`SendMarker`). A leader adds a TV_2 producer's partitions for it
(`add_partitions` with TV_2, `add_partitions_to_txn_manager.py`). The coordinator's own aborts (a fenced or
timed-out transaction) follow the finalized `transaction.version` (`TransactionSettings.transaction_version`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from contract.transaction_version import TransactionVersion
from front_door.features import FINALIZED_TRANSACTION_VERSION
from front_door.groups.placement import OFFSETS_TOPIC
from front_door.transactions.store import KafkaTransactionStore, TransactionStoreError
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from validators.errors import Errors
from validators.transaction_state import (
    DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS,
    DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
    DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    Transition,
    add_partitions,
    complete,
    end_transaction,
    expired,
    fence_and_abort,
    init_producer_id,
    is_epoch_exhausted,
    timed_out,
    verify_partitions,
)

log = logging.getLogger("gateway.front_door.transactions")
# The markers' coordinator epoch: the doors hand ids over without an epoch of their own (docs/kafka-compatibility.md).
COORDINATOR_EPOCH = 0
MARKER_RETRY_S = 0.2
# Answers to a marker after which sending it again cannot help: the partition or its producer moved on.
FINAL_MARKER_ERRORS = frozenset({Errors.NONE.code, Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                 Errors.INVALID_PRODUCER_EPOCH.code, Errors.TRANSACTION_COORDINATOR_FENCED.code,
                                 Errors.INVALID_RECORD.code, Errors.INVALID_TOPIC_EXCEPTION.code})

# (topic, partition, control batch, the transaction's version) -> the error code
SendMarker = Callable[[str, int, bytes, TransactionVersion], Awaitable[int]]
# (producer id, transaction start, commit): the end of a transaction with consumer offsets written to the groups
# topic (Kafka's marker on its offsets partitions); raises when the topic does not take it
EndOffsets = Callable[[int, int, bool], Awaitable[None]]


async def _no_offsets(_producer_id: int, _txn_start_ms: int, _commit: bool) -> None:
    return None


@dataclass(frozen=True)
class TransactionSettings:
    """Kafka's `transaction.max.timeout.ms`, `transaction.abort.timed.out.transaction.cleanup.interval.ms` and
    `transactional.id.expiration.ms`; `transaction_version`: the finalized `transaction.version`
    (`TransactionStateManager.transactionVersionLevel`)."""

    max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    abort_interval_ms: int = DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS
    expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    transaction_version: TransactionVersion = FINALIZED_TRANSACTION_VERSION


class TransactionCoordinator:
    def __init__(self, store: KafkaTransactionStore, new_producer_id: Callable[[], int], send_marker: SendMarker,
                 owns: Callable[[str], bool], settings: TransactionSettings = TransactionSettings(),
                 clock: Callable[[], float] = time.time, end_offsets: EndOffsets = _no_offsets) -> None:
        self.store, self._new_producer_id, self._send_marker = store, new_producer_id, send_marker
        self._end_offsets = end_offsets
        self.owns, self.settings, self._clock = owns, settings, clock
        self._pending: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None

    def _now(self) -> int:
        return int(self._clock() * 1000)

    # ------------------------------------------------------------------ requests

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[Errors, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        current = self.store.get(transactional_id)
        new_id: list[int] = []
        if current is None or is_epoch_exhausted(current.producer_epoch):  # the rules may ask for a new id
            new_id.append(await asyncio.to_thread(self._new_producer_id))
        transition = init_producer_id(current, transactional_id, timeout_ms, self._now(), new_id.pop,
                                      max_timeout_ms=self.settings.max_timeout_ms, expected=expected,
                                      pending=transactional_id in self._pending,
                                      transaction_version=self.settings.transaction_version)
        if transition.error is not Errors.NONE or transition.write is None:
            return transition.error, -1, -1
        meta = transition.write
        if meta.state is TransactionState.PREPARE_ABORT:  # an open transaction fenced: aborted first, then a retry
            error = await self._prepare_and_complete(meta)
            return (Errors.CONCURRENT_TRANSACTIONS if error is Errors.NONE else error), -1, -1
        error = await self._write(meta)
        if error is not Errors.NONE:
            return error, -1, -1
        log.info("Initialized transactionalId %s with producerId %d and producer epoch %d", transactional_id,
                 meta.producer_id, meta.producer_epoch)
        return Errors.NONE, meta.producer_id, meta.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition],
                             transaction_version: TransactionVersion = TransactionVersion.TV_0) -> Errors:
        """AddPartitionsToTxn (and AddOffsetsToTxn's partition); TV_2: a leader adding a producer's partition."""
        transition = add_partitions(self.store.get(transactional_id), producer_id, epoch, partitions, self._now(),
                                    pending=transactional_id in self._pending,
                                    transaction_version=transaction_version)
        return await self._apply(transition)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Errors]:
        """AddPartitionsToTxn v4+ with VerifyOnly: whether the open transaction holds each partition."""
        return verify_partitions(self.store.get(transactional_id), producer_id, epoch, partitions)

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                              transaction_version: TransactionVersion = TransactionVersion.TV_0,
                              ) -> tuple[Errors, int, int]:
        """EndTxn: answered once the Prepare state is durable; the markers follow. (error, producer id, epoch):
        under TV_2 the id and epoch of the producer's next transaction, else -1s (Kafka's answer)."""
        new_id: list[int] = []
        current = self.store.get(transactional_id)
        if transaction_version.supports_epoch_bump and current is not None and current.epoch_exhausted:
            new_id.append(await asyncio.to_thread(self._new_producer_id))
            current = self.store.get(transactional_id)
        transition = end_transaction(current, producer_id, epoch, commit, self._now(),
                                     pending=transactional_id in self._pending,
                                     transaction_version=transaction_version,
                                     new_producer_id=new_id.pop if new_id else None)
        if transition.error is not Errors.NONE:
            return transition.error, -1, -1
        answered = current
        if transition.write is not None:
            error = await self._prepare_and_complete(transition.write)
            if error is not Errors.NONE:
                return error, -1, -1
            answered = complete(transition.write, self._now())  # the id and epoch once it completes
        if not transaction_version.supports_epoch_bump or answered is None:
            return Errors.NONE, -1, -1
        return Errors.NONE, answered.producer_id, answered.producer_epoch

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.store.get(transactional_id)

    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.store.snapshot()

    # ------------------------------------------------------------------ writes and markers

    async def _apply(self, transition: Transition) -> Errors:
        if transition.error is not Errors.NONE or transition.write is None:
            return transition.error
        return await self._write(transition.write)

    async def _write(self, meta: TransactionMetadata) -> Errors:
        """The state durable; COORDINATOR_NOT_AVAILABLE (retriable) when the topic does not take it."""
        self._pending.add(meta.transactional_id)
        try:
            await self.store.write(meta)
        except TransactionStoreError as e:
            log.warning("transactional id %s: %s", meta.transactional_id, e)
            return Errors.COORDINATOR_NOT_AVAILABLE
        finally:
            self._pending.discard(meta.transactional_id)
        return Errors.NONE

    async def _prepare_and_complete(self, prepared: TransactionMetadata) -> Errors:
        error = await self._write(prepared)
        if error is Errors.NONE:
            self._pending.add(prepared.transactional_id)  # until `_complete` has written the Complete state
            self._spawn(self._complete(prepared))
        return error

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, prepared: TransactionMetadata) -> None:
        """Every partition's marker, then the Complete state (`TransactionMarkerChannelManager`); the id stays
        pending meanwhile, so its producer waits (CONCURRENT_TRANSACTIONS) until its transaction is over."""
        tid = prepared.transactional_id
        self._pending.add(tid)
        try:
            commit = prepared.state is TransactionState.PREPARE_COMMIT
            log.debug("transactional id %s: %s markers with producer id %d epoch %d", tid,
                      "commit" if commit else "abort", prepared.producer_id, prepared.producer_epoch)
            marker = EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                          COORDINATOR_EPOCH)
            # a data partition gets a control batch through the ingress path; a consumer group's offsets partition
            # (AddOffsetsToTxn) gets the end written to the groups topic, whose coordinator (on any door) ends the
            # offsets it holds when it sees the Complete state below
            await asyncio.gather(*(self._mark(prepared, marker, topic, partition)
                                   for topic, partition in sorted(prepared.partitions) if topic != OFFSETS_TOPIC))
            while any(topic == OFFSETS_TOPIC for topic, _ in prepared.partitions):
                try:
                    await self._end_offsets(prepared.producer_id, prepared.start_ms, commit)
                    break
                except Exception as e:  # noqa: BLE001 - the groups topic's failure: try again, as a marker
                    log.warning("transactional id %s: its end on the groups topic: %s; trying again", tid, e)
                    await asyncio.sleep(MARKER_RETRY_S)
            while True:
                try:
                    await self.store.write(complete(prepared, self._now()))
                    break
                except TransactionStoreError as e:
                    log.warning("transactional id %s: completing it: %s; trying again", tid, e)
                    await asyncio.sleep(MARKER_RETRY_S)
            log.debug("transactional id %s: %s on %d partition(s)", tid, "committed" if commit else "aborted",
                      len(prepared.partitions))
        finally:
            self._pending.discard(tid)

    async def _mark(self, prepared: TransactionMetadata, marker: EndTransactionMarker, topic: str,
                    partition: int) -> None:
        batch = build_end_txn_marker(marker, producer_id=prepared.producer_id, producer_epoch=prepared.producer_epoch,
                                     timestamp=self._now())
        while True:
            code = await self._send_marker(topic, partition, batch, prepared.client_transaction_version)
            if code in FINAL_MARKER_ERRORS:
                if code != Errors.NONE.code:
                    log.warning("transactional id %s: the %s marker for %s-%d was refused (%s)",
                                prepared.transactional_id, marker.control_type.name, topic, partition,
                                Errors.for_code(code).name)
                return
            await asyncio.sleep(MARKER_RETRY_S)  # a retriable answer (the ingress path busy or timed out)

    # ------------------------------------------------------------------ background

    def start(self) -> None:
        """Resume the ids this door coordinates that were being completed, and check timeouts periodically."""
        self.resume()
        self._timer = asyncio.ensure_future(self._expire_periodically())

    def resume(self) -> None:
        """Send again the markers of every id this door coordinates that is in a Prepare state (its coordinator
        died before it completed, or this door restarted)."""
        for tid, meta in self.store.snapshot().items():
            if (meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
                    and tid not in self._pending and self.owns(tid)):
                log.info("transactional id %s: resuming its %s", tid, meta.state.kafka_name)
                self._spawn(self._complete(meta))

    async def _expire_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.abort_interval_ms / 1000)
            try:
                await self.abort_timed_out()
                self.resume()
            except Exception:  # noqa: BLE001 — the timer must outlive one bad pass
                log.exception("transaction timeouts")

    async def abort_timed_out(self) -> None:
        """`abortTimedOutTransactions` and `transactional.id.expiration.ms` over the ids this door coordinates."""
        now = self._now()
        for tid, meta in self.store.snapshot().items():
            if tid in self._pending or not self.owns(tid):
                continue
            if timed_out(meta, now):
                log.info("transactional id %s: its transaction timed out after %d ms; aborting it", tid,
                         meta.timeout_ms)
                await self._prepare_and_complete(fence_and_abort(meta, now, self.settings.transaction_version))
            elif expired(meta, now, self.settings.expiration_ms):
                try:
                    await self.store.delete(tid)
                except TransactionStoreError as e:
                    log.warning("transactional id %s: expiring it: %s", tid, e)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
