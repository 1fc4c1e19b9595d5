"""Transaction version 2 through the front door's APIs (KIP-890): ApiVersions' features, EndTxn v5, the brokers'
AddPartitionsToTxn v4+, and the partitions a leader adds on a producer's behalf before a Produce v12+ batch or a
TxnOffsetCommit v5 (`network/add_partitions_to_txn_manager.py`), at this door's coordinator or, over the wire,
at another door's."""

from __future__ import annotations

import asyncio
import struct
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from contract.transaction_version import TransactionVersion
from front_door.apis import add_partitions_to_txn, api_versions, end_txn, produce, txn_offset_commit
from front_door.apis.registry import READABLE
from front_door.cluster.leadership import leader, node_ids
from front_door.cluster.node import Node
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings
from front_door.groups.placement import OFFSETS_TOPIC, partition_for
from front_door.metrics import FrontDoorMetrics
from front_door.network.add_partitions_to_txn_manager import (
    ADD_PARTITIONS_RETRY_BACKOFF_MAX_MS,
    Added,
    AddPartitionsToTxnManager,
    leader_answer,
)
from front_door.network.wire import SIZE, encode_response, parse_request
from front_door.producer_id_manager import ProducerIdManager
from front_door.transactions.coordinator import TransactionCoordinator
from front_door.transactions.placement import transaction_coordinator
from tests.memory_group_store import MemoryGroupStore
from tests.memory_transaction_store import MemoryTransactionStore
from tests.unit.test_acl_enforcement import FakeBridge
from tests.unit.test_front_door import REGISTRY, _answer
from validators.codec.record_batch import build_record_batch
from validators.errors import Errors
from validators.transaction_state import TopicPartition, TransactionMetadata, TransactionState

NODES = 4
T0 = 1_700_000_000_000
TID = "orders-writer"
HOME = transaction_coordinator(TID, node_ids(NODES))
TV2 = TransactionVersion.TV_2
S = TransactionState


def _req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _door(tmp_path: Path, epoch: int = 3, state: TransactionState = S.EMPTY) -> tuple[Context, MemoryTransactionStore]:
    """A four-node door coordinating TID (producer 1000 at `epoch`), its leaders adding partitions here."""
    store = MemoryTransactionStore()
    store.states[TID] = TransactionMetadata(TID, 1000, epoch, 60_000, state, last_update_ms=T0)

    async def marked(_topic: str, _partition: int, _batch: bytes, _version: TransactionVersion) -> int:
        return 0

    ctx = Context(tuple(Node(n, "gw.example", 9092 + n) for n in node_ids(NODES)), lambda: REGISTRY,
                  bridge=FakeBridge(),  # type: ignore[arg-type]
                  segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                  groups=GroupCoordinator(MemoryGroupStore(), GroupSettings(initial_rebalance_delay_ms=0)))
    ctx.transactions = TransactionCoordinator(store, lambda: 5000, marked, lambda _tid: True)
    ctx.add_partitions_to_txn = AddPartitionsToTxnManager(node_ids(NODES), ctx.transactions, lambda _node: None)
    return ctx, store


def test_api_versions_reports_transaction_version_2_where_kafka_4_does(tmp_path: Path) -> None:
    ctx, _ = _door(tmp_path)
    m = _req(18, 4)
    v4 = _answer(ctx, api_versions.handle, 18, 4, m.ApiVersionsRequest(client_software_name="unit",
                                                                        client_software_version="1"))
    assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [("transaction.version", 0, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in v4.finalized_features] == [
        ("transaction.version", 2, 2)]
    assert v4.finalized_features_epoch >= 0  # Java's ApiVersions takes the features of the highest epoch
    # v3: a supported feature whose minimum is 0 is left out (older clients cannot read it), the finalized level is there
    v3 = _answer(ctx, api_versions.handle, 18, 3, _req(18, 3).ApiVersionsRequest(client_software_name="unit",
                                                                                 client_software_version="1"))
    assert (v3.supported_features, [f.name for f in v3.finalized_features]) == ((), ["transaction.version"])
    served = {k.api_key: (k.min_version, k.max_version) for k in v4.api_keys}
    # what Kafka's Java client needs to run transaction version 2
    assert served[0][1] >= 12 and served[26][1] >= 5 and served[24][1] >= 5 and served[28][1] >= 5


def _add(ctx: Context, version: int, *transactions: tuple[str, int, int, bool, list[TopicPartition]],
         node_id: int = HOME) -> dict[str, dict[TopicPartition, ErrorCode]]:
    m = _req(24, version)
    answer = _answer(ctx, add_partitions_to_txn.handle, 24, version, m.AddPartitionsToTxnRequest(transactions=tuple(
        m.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
            topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(p for tt, p in parts if tt == t))
                         for t in dict.fromkeys(t for t, _ in parts)))
        for tid, pid, epoch, verify, parts in transactions)), node_id=node_id)
    assert answer.error_code == ErrorCode.none
    return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code for t in r.topic_results
                                 for p in t.results_by_partition} for r in answer.results_by_transaction}


def test_the_brokers_add_partitions_adds_a_tv2_transaction_and_verifies(tmp_path: Path) -> None:
    ctx, store = _door(tmp_path)
    offsets = (OFFSETS_TOPIC, partition_for("etl"))
    assert _add(ctx, 5, (TID, 1000, 3, False, [("orders", 0), offsets])) == {
        TID: {("orders", 0): ErrorCode.none, offsets: ErrorCode.none}}
    meta = store.states[TID]
    assert (meta.state, meta.partitions, meta.client_transaction_version) == (
        S.ONGOING, {("orders", 0), offsets}, TV2)
    verified = _add(ctx, 5, (TID, 1000, 3, True, [("orders", 0), ("orders", 1)]),
                    ("other", 1, 0, True, [("orders", 0)]))
    assert verified == {TID: {("orders", 0): ErrorCode.none, ("orders", 1): ErrorCode.transaction_abortable},
                        "other": {("orders", 0): ErrorCode.not_coordinator}
                        if transaction_coordinator("other", node_ids(NODES)) != HOME
                        else {("orders", 0): ErrorCode.invalid_producer_id_mapping}}
    # an unknown partition is named and the others not attempted; a stale epoch is PRODUCER_FENCED
    assert _add(ctx, 4, (TID, 1000, 3, False, [("orders", 2), ("orders", 9)])) == {
        TID: {("orders", 2): ErrorCode.operation_not_attempted, ("orders", 9): ErrorCode.unknown_topic_or_partition}}
    assert _add(ctx, 5, (TID, 1000, 2, False, [("orders", 2)])) == {TID: {("orders", 2): ErrorCode.producer_fenced}}


def test_end_txn_v5_bumps_the_epoch_and_answers_it_v4_keeps_it(tmp_path: Path) -> None:
    ctx, store = _door(tmp_path)
    _add(ctx, 5, (TID, 1000, 3, False, [("orders", 0)]))
    m = _req(26, 5)
    ended = _answer(ctx, end_txn.handle, 26, 5, m.EndTxnRequest(transactional_id=TID, producer_id=1000,
                                                                 producer_epoch=3, committed=True), node_id=HOME)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (ErrorCode.none, 1000, 4)
    assert store.writes[-1].state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) and store.writes[-1].producer_epoch == 4
    fenced = _answer(ctx, end_txn.handle, 26, 5, m.EndTxnRequest(transactional_id=TID, producer_id=1000,
                                                                  producer_epoch=2, committed=True), node_id=HOME)
    assert (fenced.error_code, fenced.producer_id, fenced.producer_epoch) == (ErrorCode.producer_fenced, -1, -1)

    classic, classic_store = _door(tmp_path, epoch=3, state=S.ONGOING)
    classic_store.states[TID] = TransactionMetadata(TID, 1000, 3, 60_000, S.ONGOING, frozenset({("orders", 0)}), T0)
    v4 = _answer(classic, end_txn.handle, 26, 4, _req(26, 4).EndTxnRequest(
        transactional_id=TID, producer_id=1000, producer_epoch=3, committed=False), node_id=HOME)
    assert v4.error_code == ErrorCode.none and classic_store.writes[0].producer_epoch == 3


def _produce(ctx: Context, version: int, records: bytes, partition: int = 0) -> Any:
    m = _req(0, version)
    answer = _answer(ctx, produce.handle, 0, version, m.ProduceRequest(
        transactional_id=TID, acks=-1, timeout=__import__("datetime").timedelta(seconds=5), topic_data=(
            m.TopicProduceData(name="orders", partition_data=(
                m.PartitionProduceData(index=partition, records=records),)),)),
        node_id=leader("orders", partition, node_ids(NODES)))
    return answer.responses[0].partition_responses[0]


def _txn_batch(epoch: int, pid: int = 1000) -> bytes:
    return build_record_batch([(T0, b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                              is_transactional=True)


def test_produce_v12_adds_the_partition_to_the_transaction_before_the_batch_goes_on(tmp_path: Path) -> None:
    ctx, store = _door(tmp_path)
    bridge: FakeBridge = ctx.bridge  # type: ignore[assignment]
    assert _produce(ctx, 12, _txn_batch(3)).error_code == ErrorCode.none
    assert bridge.sent == [("orders", 0)]
    assert (store.states[TID].partitions, store.states[TID].client_transaction_version) == ({("orders", 0)}, TV2)
    # a fenced producer's batch is refused as Kafka's leader refuses it, and never reaches the gateway
    fenced = _produce(ctx, 12, _txn_batch(2), partition=1)
    assert fenced.error_code == ErrorCode.invalid_producer_epoch and bridge.sent == [("orders", 0)]
    # Produce v11 is a classic producer's: it added its partitions itself, nothing is asked here
    assert _produce(ctx, 11, _txn_batch(3), partition=2).error_code == ErrorCode.none
    assert bridge.sent[-1] == ("orders", 2) and ("orders", 2) not in store.states[TID].partitions


def test_produce_v12_answers_the_coordinators_refusal_as_kafkas_leader(tmp_path: Path) -> None:
    ctx, store = _door(tmp_path)
    store.states[TID] = TransactionMetadata(TID, 1000, 3, 60_000, S.PREPARE_COMMIT, frozenset({("x", 0)}), T0)
    busy = _produce(ctx, 12, _txn_batch(3))
    assert busy.error_code == ErrorCode.concurrent_transactions  # retried for 100 ms first, then answered
    ctx.add_partitions_to_txn = AddPartitionsToTxnManager((), None, lambda _node: None)  # another door's, unreachable
    away = _produce(ctx, 12, _txn_batch(3))
    assert (away.error_code, away.error_message) == (
        ErrorCode.not_enough_replicas,
        "Unable to verify the partition has been added to the transaction. Underlying error: COORDINATOR_NOT_AVAILABLE")
    assert ctx.bridge.sent == []  # type: ignore[attr-defined]


def test_the_leaders_answers_are_kafkas() -> None:
    assert leader_answer(Errors.NONE) == Added(Errors.NONE)
    assert leader_answer(Errors.PRODUCER_FENCED) == Added(Errors.INVALID_PRODUCER_EPOCH)
    assert leader_answer(Errors.INVALID_TXN_STATE) == Added(Errors.INVALID_TXN_STATE,
                                                            "Partition was not added to the transaction")
    for unverified in (Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR):
        assert leader_answer(unverified).error is Errors.NOT_ENOUGH_REPLICAS
    assert leader_answer(Errors.INVALID_PRODUCER_ID_MAPPING) == Added(Errors.INVALID_PRODUCER_ID_MAPPING)


class _Busy:
    """A coordinator whose previous transaction completes after `busy` asks."""

    def __init__(self, busy: int) -> None:
        self.busy, self.asked = busy, 0

    async def add_partitions(self, *_args: object) -> Errors:
        self.asked += 1
        return Errors.CONCURRENT_TRANSACTIONS if self.asked <= self.busy else Errors.NONE


def test_concurrent_transactions_is_asked_again_within_the_retry_window() -> None:
    soon = _Busy(2)
    manager = AddPartitionsToTxnManager((1,), soon, lambda _node: None)  # type: ignore[arg-type]
    assert asyncio.run(manager.add(1, TID, 1000, 3, [("orders", 0)])) == Added(Errors.NONE) and soon.asked == 3
    never = _Busy(10**6)
    manager = AddPartitionsToTxnManager((1,), never, lambda _node: None)  # type: ignore[arg-type]
    assert asyncio.run(manager.add(1, TID, 1000, 3, [("orders", 0)])).error is Errors.CONCURRENT_TRANSACTIONS
    assert 2 <= never.asked <= ADD_PARTITIONS_RETRY_BACKOFF_MAX_MS  # a few asks, not a busy loop


def test_another_doors_coordinator_is_asked_over_the_wire(tmp_path: Path) -> None:
    """A leader on one door, the transaction's coordinator on another: AddPartitionsToTxn v5 between them, read
    and answered by the coordinating door's own handler."""
    coordinating, store = _door(tmp_path)

    async def run() -> tuple[Added, Added, Added]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                try:
                    (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
                except asyncio.IncompleteReadError:
                    break
                request = parse_request(await reader.readexactly(size), READABLE, HOME)
                body = await add_partitions_to_txn.handle(coordinating, request)
                writer.write(encode_response(request.api_key, request.api_version, request.correlation_id, body))
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        leading = AddPartitionsToTxnManager((), None, lambda node: ("127.0.0.1", port) if node == HOME else None)
        try:
            added = await leading.add(HOME, TID, 1000, 3, [("orders", 0), ("orders", 1)])
            again = await leading.add(HOME, TID, 1000, 3, [("orders", 2)])  # the same connection, the next request
            fenced = await leading.add(HOME, TID, 1000, 1, [("orders", 2)])
        finally:
            leading.close()
            server.close()
            await server.wait_closed()
        return added, again, fenced

    added, again, fenced = asyncio.run(run())
    assert (added, again, fenced) == (Added(Errors.NONE), Added(Errors.NONE), Added(Errors.INVALID_PRODUCER_EPOCH))
    meta = store.states[TID]
    assert meta.partitions == {("orders", 0), ("orders", 1), ("orders", 2)} and meta.client_transaction_version is TV2


def test_adds_at_another_door_are_in_flight_side_by_side(tmp_path: Path) -> None:
    """Several producers' adds at one other door do not wait for each other: the coordinating door here answers
    only once three are in flight."""
    coordinating, store = _door(tmp_path)
    for tid in ("a", "b", "c"):
        store.states[tid] = TransactionMetadata(tid, 1000, 3, 60_000, S.EMPTY, last_update_ms=T0)

    async def run() -> list[Added]:
        arrived: list[int] = []
        all_in = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
            request = parse_request(await reader.readexactly(size), READABLE, HOME)
            arrived.append(request.correlation_id)
            if len(arrived) == 3:
                all_in.set()
            await all_in.wait()
            # read by the node coordinating the request's transactional id
            home = transaction_coordinator(request.body.transactions[0].transactional_id, node_ids(NODES))
            writer.write(encode_response(request.api_key, request.api_version, request.correlation_id,
                                         await add_partitions_to_txn.handle(coordinating,
                                                                            replace(request, node_id=home))))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        leading = AddPartitionsToTxnManager((), None, lambda _node: ("127.0.0.1", port))
        try:
            return await asyncio.wait_for(asyncio.gather(*(
                leading.add(HOME, tid, 1000, 3, [("orders", 0)]) for tid in ("a", "b", "c"))), 30)
        finally:
            leading.close()
            server.close()

    assert asyncio.run(run()) == [Added(Errors.NONE)] * 3
    assert all(("orders", 0) in store.states[tid].partitions for tid in ("a", "b", "c"))


def test_a_door_that_cannot_reach_the_coordinator_answers_network_exception_as_kafka_does() -> None:
    async def run() -> Added:
        server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)  # closes at once
        port = server.sockets[0].getsockname()[1]
        manager = AddPartitionsToTxnManager((), None, lambda _node: ("127.0.0.1", port))
        try:
            return await manager.add(7, TID, 1000, 3, [("orders", 0)])
        finally:
            server.close()

    assert asyncio.run(run()) == Added(Errors.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added "
                                                                   "to the transaction. Underlying error: "
                                                                   "NETWORK_EXCEPTION")


@pytest.mark.parametrize(("epoch", "expected"), [(3, ErrorCode.none), (2, ErrorCode.invalid_producer_epoch)])
def test_txn_offset_commit_v5_adds_the_groups_offsets_partition(tmp_path: Path, epoch: int,
                                                                expected: ErrorCode) -> None:
    ctx, store = _door(tmp_path)
    m = _req(28, 5)
    group = "etl"
    home = ctx.coordinator(group)
    answer = _answer(ctx, txn_offset_commit.handle, 28, 5, m.TxnOffsetCommitRequest(
        transactional_id=TID, group_id=group, producer_id=1000, producer_epoch=epoch, topics=(
            m.TxnOffsetCommitRequestTopic(name="orders", partitions=(m.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_metadata=""),)),)), node_id=home)
    assert answer.topics[0].partitions[0].error_code == expected
    added = (OFFSETS_TOPIC, partition_for(group)) in store.states[TID].partitions
    assert added is (expected == ErrorCode.none)


def test_the_size_of_a_request_frame_is_what_kafka_reads() -> None:
    from front_door.network.client import encode_request

    frame = encode_request(24, 5, 9, "door", _req(24, 5).AddPartitionsToTxnRequest(transactions=()))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    request = parse_request(frame[4:], READABLE, 1)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (24, 5, 9, "door")
