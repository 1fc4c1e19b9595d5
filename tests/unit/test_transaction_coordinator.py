"""The front doors' transaction coordinator (front_door/transactions/coordinator.py): what it writes, in which
order, and which markers it sends, over an in-memory store (the rules themselves: test_transaction_state.py)."""

from __future__ import annotations

import asyncio
from itertools import count

from contract.transaction_version import TransactionVersion
from front_door.transactions.coordinator import TransactionCoordinator, TransactionSettings
from tests.memory_transaction_store import MemoryTransactionStore
from validators.codec.control_batch import ControlRecordType, parse_end_txn_marker
from validators.codec.record_batch import parse_header
from validators.errors import Errors
from validators.transaction_state import TransactionState

S = TransactionState


class Harness:
    def __init__(self, owns: bool = True) -> None:
        self.store = MemoryTransactionStore()
        self.markers: list[tuple[str, int, bytes]] = []
        self.versions: list[TransactionVersion] = []  # each marker's transaction version
        self.release = asyncio.Event()
        self.release.set()
        self.answer = Errors.NONE.code
        ids = count(5000)
        self.clock = [1_700_000_000.0]
        self.coordinator = TransactionCoordinator(
            self.store, lambda: next(ids), self.send_marker, lambda _tid: owns,  # type: ignore[arg-type]
            TransactionSettings(abort_interval_ms=3_600_000), clock=lambda: self.clock[0])

    async def send_marker(self, topic: str, partition: int, batch: bytes, version: TransactionVersion) -> int:
        await self.release.wait()
        self.markers.append((topic, partition, batch))
        self.versions.append(version)
        return self.answer

    async def drain(self) -> None:
        while self.coordinator._tasks:
            await asyncio.gather(*self.coordinator._tasks)


def run(test):  # type: ignore[no-untyped-def]
    return lambda: asyncio.run(test())


@run
async def test_a_transaction_committed_sends_a_commit_marker_to_each_partition_then_completes() -> None:
    h = Harness()
    c = h.coordinator
    error, pid, epoch = await c.init_producer_id("tx", 60_000, None)
    assert (error, pid, epoch) == (Errors.NONE, 5000, 0)
    assert await c.add_partitions("tx", pid, epoch, [("a", 0), ("b", 1)]) is Errors.NONE
    assert await c.end_transaction("tx", pid, epoch, True) == (Errors.NONE, -1, -1)  # the classic EndTxn
    await h.drain()
    assert [m[:2] for m in sorted(h.markers)] == [("a", 0), ("b", 1)]
    for _, _, batch in h.markers:
        header = parse_header(batch)
        assert (header.producer_id, header.producer_epoch, header.is_control_batch) == (5000, 0, True)
        assert parse_end_txn_marker(batch).control_type is ControlRecordType.COMMIT
    assert [w.state for w in h.store.writes] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


@run
async def test_while_markers_are_in_flight_the_id_answers_concurrent_transactions() -> None:
    h = Harness()
    c = h.coordinator
    _, pid, epoch = await c.init_producer_id("tx", 60_000, None)
    await c.add_partitions("tx", pid, epoch, [("a", 0)])
    h.release.clear()
    assert (await c.end_transaction("tx", pid, epoch, False))[0] is Errors.NONE
    await asyncio.sleep(0.01)
    assert await c.add_partitions("tx", pid, epoch, [("a", 1)]) is Errors.CONCURRENT_TRANSACTIONS
    assert (await c.init_producer_id("tx", 60_000, None))[0] is Errors.CONCURRENT_TRANSACTIONS
    h.release.set()
    await h.drain()
    assert h.store.get("tx").state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert (await c.init_producer_id("tx", 60_000, None))[2] == 1


@run
async def test_a_new_producer_fences_an_open_transaction_which_is_aborted_first() -> None:
    h = Harness()
    c = h.coordinator
    _, pid, epoch = await c.init_producer_id("tx", 60_000, None)
    await c.add_partitions("tx", pid, epoch, [("a", 0)])
    assert (await c.init_producer_id("tx", 60_000, None))[0] is Errors.CONCURRENT_TRANSACTIONS
    await h.drain()
    ((_, _, batch),) = h.markers
    assert parse_end_txn_marker(batch).control_type is ControlRecordType.ABORT
    assert parse_header(batch).producer_epoch == 1  # the fenced epoch: the old producer's batches are refused
    assert await c.init_producer_id("tx", 60_000, None) == (Errors.NONE, 5000, 2)
    assert (await c.end_transaction("tx", pid, epoch, True))[0] is Errors.PRODUCER_FENCED


@run
async def test_a_timed_out_transaction_is_aborted_and_a_prepared_one_resumed() -> None:
    h = Harness()
    c = h.coordinator
    _, pid, epoch = await c.init_producer_id("tx", 1_000, None)
    await c.add_partitions("tx", pid, epoch, [("a", 0)])
    h.clock[0] += 2
    await c.abort_timed_out()
    await h.drain()
    assert h.store.get("tx").state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert len(h.markers) == 1
    # a coordinator that finds an id in a Prepare state (its previous coordinator died) sends the markers again
    other = Harness()
    prepared = h.store.writes[-2]
    assert prepared.state is S.PREPARE_ABORT
    other.store.states["tx"] = prepared
    other.coordinator.resume()
    await other.drain()
    assert len(other.markers) == 1 and other.store.get("tx").state is S.COMPLETE_ABORT  # type: ignore[union-attr]


@run
async def test_a_store_that_does_not_take_the_write_answers_coordinator_not_available() -> None:
    h = Harness()
    h.store.fail = True
    assert (await h.coordinator.init_producer_id("tx", 60_000, None))[0] is Errors.COORDINATOR_NOT_AVAILABLE
    assert h.store.get("tx") is None


@run
async def test_a_retriable_marker_answer_is_sent_again() -> None:
    h = Harness()
    c = h.coordinator
    _, pid, epoch = await c.init_producer_id("tx", 60_000, None)
    await c.add_partitions("tx", pid, epoch, [("a", 0)])
    h.answer = 7  # REQUEST_TIMED_OUT

    async def recover() -> None:
        while len(h.markers) < 2:
            await asyncio.sleep(0.01)
        h.answer = Errors.NONE.code

    await asyncio.gather(c.end_transaction("tx", pid, epoch, True), recover())
    await h.drain()
    assert len(h.markers) >= 3 and h.store.get("tx").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]


@run
async def test_a_consumer_groups_offsets_partition_gets_the_end_on_the_groups_topic_not_a_marker() -> None:
    """Before the Complete state: the end written to the groups topic, once for the transaction's offsets
    partitions (retried until the topic takes it)."""
    ended: list[tuple[int, int, bool]] = []
    refusals = [OSError("the groups topic is down")]

    async def end_offsets(producer_id: int, txn_start_ms: int, commit: bool) -> None:
        if refusals:
            raise refusals.pop()
        ended.append((producer_id, txn_start_ms, commit))

    h = Harness()
    c = TransactionCoordinator(h.store, lambda: 77, h.send_marker, lambda _tid: True,  # type: ignore[arg-type]
                               TransactionSettings(abort_interval_ms=3_600_000), end_offsets=end_offsets)
    _, pid, epoch = await c.init_producer_id("tx", 60_000, None)
    await c.add_partitions("tx", pid, epoch, [("a", 0), ("__consumer_offsets", 12), ("__consumer_offsets", 31)])
    start = h.store.get("tx").start_ms  # type: ignore[union-attr]
    await c.end_transaction("tx", pid, epoch, True)
    while c._tasks:
        await asyncio.gather(*c._tasks)
    assert [m[:2] for m in h.markers] == [("a", 0)] and ended == [(77, start, True)]
    assert h.store.get("tx").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
