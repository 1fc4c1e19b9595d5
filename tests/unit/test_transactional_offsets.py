"""Consumer offsets inside a transaction at the group coordinator (front_door/groups/transactional_offsets.py,
`GroupCoordinator.commit_transactional` / `complete_transaction`, TxnOffsetCommit and OffsetFetch's
`require_stable`): held until the transaction ends, committed or dropped then, unstable meanwhile."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import ModuleType

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door import offset_fetch, txn_offset_commit
from front_door.groups.coordinator import GroupCoordinator, GroupSettings
from front_door.groups.placement import coordinator, partition_for
from front_door.leadership import node_ids
from tests.memory_group_store import MemoryGroupStore
from tests.unit.test_front_door import _answer
from tests.unit.test_transaction_apis import NODES, _context

GROUP = "etl"
HOME = coordinator(GROUP, node_ids(NODES))


def _req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def test_held_offsets_are_committed_or_dropped_with_their_transaction() -> None:
    async def scenario() -> None:
        store = MemoryGroupStore()
        groups = GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))
        offset = OffsetAndMetadata(42, -1, "", 1)
        assert await groups.commit_transactional(7, GROUP, -1, "", None, {("orders", 0): offset}) == {
            ("orders", 0): ErrorCode.none}
        assert groups.transactional.partitions(GROUP) == {("orders", 0)}
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == -1  # not before the end
        await groups.complete_transaction(7, partition_for(GROUP) + 1, True)  # another offsets partition's marker
        assert groups.transactional.partitions(GROUP) == {("orders", 0)}
        await groups.complete_transaction(7, partition_for(GROUP), True)
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        assert groups.transactional.partitions(GROUP) == set()
        await groups.commit_transactional(8, GROUP, -1, "", None, {("orders", 0): OffsetAndMetadata(99, -1, "", 2)})
        await groups.complete_transaction(8, partition_for(GROUP), False)  # aborted: dropped
        assert groups.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        # a member of a generation that is not the group's is refused as an OffsetCommit is
        assert await groups.commit_transactional(9, "other", 3, "m-1", None, {("orders", 1): offset}) == {
            ("orders", 1): ErrorCode.illegal_generation}

    asyncio.run(scenario())


def test_held_offsets_survive_a_reload_and_end_with_the_resumed_transaction() -> None:
    """Written to the store as pending before they are answered: a coordinator that loads the group (a door
    started again, or taking the group over) holds them too, and the transaction's end, resumed there, commits
    them and tombstones the pending records."""
    async def scenario() -> None:
        store = MemoryGroupStore()
        first = GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))
        offset = OffsetAndMetadata(42, -1, "", 1)
        await first.commit_transactional(7, GROUP, -1, "", None, {("orders", 0): offset})
        await first.commit_transactional(8, GROUP, -1, "", None, {("orders", 1): offset})
        assert store.writes == [("pending-offsets", GROUP)] * 2
        again = GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))
        again.load(store.load())
        assert again.transactional.partitions(GROUP) == {("orders", 0), ("orders", 1)}
        assert again.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == -1
        await again.complete_transaction(7, partition_for(GROUP), True)
        await again.complete_transaction(8, partition_for(GROUP), False)
        assert again.fetch_offsets(GROUP, [("orders", 0)])[("orders", 0)].offset == 42
        assert again.fetch_offsets(GROUP, [("orders", 1)])[("orders", 1)].offset == -1  # aborted
        assert store.load().pending == {}  # every pending record tombstoned
        assert store.load().offsets[GROUP] == {("orders", 0): offset}
        third = GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))
        third.load(store.load())
        assert third.transactional.partitions(GROUP) == set()

    asyncio.run(scenario())


def test_a_store_that_refuses_pending_offsets_holds_nothing() -> None:
    async def scenario() -> None:
        store = MemoryGroupStore()
        groups = GroupCoordinator(store, GroupSettings(initial_rebalance_delay_ms=0))
        store.fail = True
        assert await groups.commit_transactional(7, GROUP, -1, "", None, {("orders", 0): OffsetAndMetadata(
            1, -1, "", 1)}) == {("orders", 0): ErrorCode.coordinator_not_available}
        assert groups.transactional.partitions(GROUP) == set()

    asyncio.run(scenario())


def test_txn_offset_commit_and_a_stable_offset_fetch_at_the_front_door(tmp_path: Path) -> None:
    ctx = _context(tmp_path, None)
    m = _req(28, 3)
    request = m.TxnOffsetCommitRequest(
        transactional_id="tx", group_id=GROUP, producer_id=7, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=(m.TxnOffsetCommitRequestTopic(name="orders", partitions=(
            m.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                              committed_metadata=""),)),))
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
    asyncio.run(ctx.groups.complete_transaction(7, partition_for(GROUP), True))
    assert fetch(stable=True) == (ErrorCode.none, 5)
