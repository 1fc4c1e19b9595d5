"""Consumer offsets inside a transaction at the group coordinator (front_door/groups/transactional_offsets.py,
`GroupCoordinator.commit_transactional` / `transaction_ended`, TxnOffsetCommit and OffsetFetch's
`require_stable`): written as pending and held until the transaction ends, committed or dropped then, unstable
meanwhile; a load finds them again, and applies a transaction's end read from the groups topic."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata, TxnEnd
from front_door.apis import offset_fetch, txn_offset_commit
from front_door.cluster.leadership import node_ids
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings
from front_door.groups.placement import OFFSETS_TOPIC, coordinator, partition_for
from front_door.network.wire import parse_request
from tests.memory_group_store import MemoryGroupStore
from tests.memory_transaction_store import MemoryTransactionStore
from tests.unit.test_front_door import READABLE, _answer, _frame
from tests.unit.test_transaction_apis import NODES, _context
from validators.transaction_state import TransactionMetadata, TransactionState

GROUP = "etl"
HOME = coordinator(GROUP, node_ids(NODES))


def _req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


T1, T2 = 1_700_000_000_000, 1_700_000_000_500  # two transactions' starts


def _groups(store: MemoryGroupStore) -> GroupCoordinator:
    return GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))


def test_held_offsets_are_committed_or_dropped_with_their_transaction() -> None:
    async def scenario() -> None:
        groups = _groups(MemoryGroupStore())
        offset = OffsetAndMetadata(42, -1, "", 1)
        assert await groups.commit_transactional(7, T1, GROUP, -1, "", None, {("orders", 0): offset}) == {
            ("orders", 0): ErrorCode.none}
        assert groups.transactional.partitions(GROUP) == {("orders", 0)}
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == -1  # not before the end
        groups.transaction_ended(7, T2, True)  # another transaction of the producer
        groups.transaction_ended(8, T1, True)  # another producer's
        assert groups.transactional.partitions(GROUP) == {("orders", 0)}
        groups.transaction_ended(7, T1, True)
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        assert groups.transactional.partitions(GROUP) == set()
        await groups.commit_transactional(7, T2, GROUP, -1, "", None, {("orders", 0): OffsetAndMetadata(99, -1, "", 2)})
        groups.transaction_ended(7, T2, False)  # aborted: dropped
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        # a member of a generation that is not the group's is refused as an OffsetCommit is
        assert await groups.commit_transactional(9, T1, "other", 3, "m-1", None, {("orders", 1): offset}) == {
            ("orders", 1): ErrorCode.illegal_generation}

    asyncio.run(scenario())


def test_held_offsets_survive_a_reload_and_end_with_their_transaction_there() -> None:
    """Written to the store as pending before they are answered: a coordinator that loads the group (a door
    started again, or taking the group over) holds them too and ends them when it sees the transaction's end; its
    commits and the tombstones reach the store."""
    async def scenario() -> None:
        store = MemoryGroupStore()
        first = _groups(store)
        offset = OffsetAndMetadata(42, -1, "", 1)
        await first.commit_transactional(7, T1, GROUP, -1, "", None, {("orders", 0): offset})
        await first.commit_transactional(8, T1, GROUP, -1, "", None, {("orders", 1): offset})
        assert store.writes == [("pending-offsets", GROUP)] * 2
        again = _groups(store)
        again.load(store.load())
        assert again.transactional.partitions(GROUP) == {("orders", 0), ("orders", 1)}
        assert again.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == -1
        again.transaction_ended(7, T1, True)
        again.transaction_ended(8, T1, False)
        await asyncio.gather(*again._writes)
        assert again.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        assert again.fetch_offsets(GROUP, [("orders", 1)])[("orders", 1)].offset == -1  # aborted
        assert store.load().pending == {}  # every pending record tombstoned
        assert store.load().offsets[GROUP] == {("orders", 0): offset}

    asyncio.run(scenario())


def test_a_load_applies_the_end_the_groups_topic_holds_and_the_one_its_transaction_view_knows() -> None:
    """The coordinator wrote the transaction's end to the offsets partition before its Complete state, so a door
    loading the group after that finds the end with the pending offsets; an end seen only in the transaction
    view (its Complete state, before the group was loaded here) is applied once the offsets are loaded."""
    async def scenario() -> None:
        store = MemoryGroupStore()
        first = _groups(store)
        offset = OffsetAndMetadata(42, -1, "", 1)
        await first.commit_transactional(7, T1, GROUP, -1, "", None, {("orders", 0): offset})
        await first.commit_transactional(8, T1, GROUP, -1, "", None, {("orders", 1): offset})
        await store.write_txn_end(7, TxnEnd(T1, True))
        loaded = _groups(store)
        loaded.transaction_outcome = lambda producer_id, start: False if (producer_id, start) == (8, T1) else None
        loaded.load(store.load())
        await asyncio.gather(*loaded._writes)
        assert loaded.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42  # the topic's end
        assert loaded.fetch_offsets(GROUP, [("orders", 1)])[("orders", 1)].offset == -1  # the view's abort
        assert loaded.transactional.partitions(GROUP) == set()
        assert store.load().pending == {} and store.ends == {}  # pending records and the end tombstoned

    asyncio.run(scenario())


def test_a_store_that_refuses_pending_offsets_holds_nothing() -> None:
    async def scenario() -> None:
        store = MemoryGroupStore()
        groups = _groups(store)
        store.fail = True
        assert await groups.commit_transactional(7, T1, GROUP, -1, "", None, {("orders", 0): OffsetAndMetadata(
            1, -1, "", 1)}) == {("orders", 0): ErrorCode.coordinator_not_available}
        assert groups.transactional.partitions(GROUP) == set()

    asyncio.run(scenario())


def _txn_offset_commit(offset: int) -> Any:
    m = _req(28, 3)
    return m.TxnOffsetCommitRequest(
        transactional_id="tx", group_id=GROUP, producer_id=7, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=(m.TxnOffsetCommitRequestTopic(name="orders", partitions=(
            m.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                              committed_metadata=""),)),))


def _ongoing(start_ms: int) -> TransactionMetadata:
    """Producer 7's transaction with GROUP's offsets partition in it (AddOffsetsToTxn)."""
    return TransactionMetadata("tx", 7, 0, 60_000, TransactionState.ONGOING,
                               frozenset({(OFFSETS_TOPIC, partition_for(GROUP))}), start_ms, start_ms)


def test_txn_offset_commit_and_a_stable_offset_fetch_at_the_front_door(tmp_path: Path) -> None:
    store = MemoryTransactionStore()
    ctx = _context(tmp_path, store)
    store.view.seen("tx", _ongoing(T1))
    request = _txn_offset_commit(5)
    elsewhere = next(n for n in node_ids(NODES) if n != HOME)
    moved = _answer(ctx, txn_offset_commit.handle, 28, 3, request, node_id=elsewhere)
    assert moved.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
    answer = _answer(ctx, txn_offset_commit.handle, 28, 3, request, node_id=HOME)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    f = _req(9, 8)

    def fetch(stable: bool) -> tuple[ErrorCode, int]:
        got = _answer(ctx, offset_fetch.handle, 9, 8, f.OffsetFetchRequest(require_stable=stable, groups=(
            f.OffsetFetchRequestGroup(group_id=GROUP, topics=(
                f.OffsetFetchRequestTopics(name="orders", partition_indexes=(0,)),)),)), node_id=HOME)
        p = got.groups[0].topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert fetch(stable=True) == (ErrorCode.unstable_offset_commit, -1)
    assert fetch(stable=False) == (ErrorCode.none, -1)  # nothing committed yet
    async def ended() -> None:  # on the loop, as the transaction view's listener runs
        ctx.groups.transaction_ended(7, T1, True)
        await asyncio.gather(*ctx.groups._writes)

    asyncio.run(ended())
    assert fetch(stable=True) == (ErrorCode.none, 5)


def test_a_txn_offset_commit_waits_until_its_door_has_seen_the_transaction_add_the_offsets(tmp_path: Path) -> None:
    """AddOffsetsToTxn went to the transaction's coordinator, perhaps another door: this door answers the offsets
    once its view holds the transaction with the group's offsets partition, so every earlier transaction of the
    producer was seen to end first, and the offsets are held for the transaction that start names."""
    store = MemoryTransactionStore()
    ctx = _context(tmp_path, store)
    store.view.seen("tx", replace(_ongoing(T1), state=TransactionState.COMPLETE_COMMIT, partitions=frozenset()))

    async def scenario() -> Any:
        commit = asyncio.ensure_future(txn_offset_commit.handle(ctx, parse_request(
            _frame(28, 3, _txn_offset_commit(6)), READABLE, HOME)))
        await asyncio.sleep(0)  # the handler waits: the view shows the earlier transaction complete
        assert not commit.done()
        store.view.seen("tx", _ongoing(T2))  # the next transaction's AddOffsetsToTxn, followed here
        return await commit

    answer = asyncio.run(scenario())
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    assert ctx.groups.transactional.of_transaction(7, T2)[GROUP].offsets[("orders", 0)].offset == 6
