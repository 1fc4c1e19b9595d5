"""The front door's transaction APIs as `kafka-transactions.sh` and producers ask them (DescribeTransactions,
ListTransactions, the coordinator checks of InitProducerId, AddPartitionsToTxn and EndTxn), over a coordinator
with an in-memory store: which node answers, with which of Kafka's errors."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from front_door import (
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
)
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator, GroupSettings
from front_door.leadership import node_ids
from front_door.metrics import FrontDoorMetrics
from front_door.node import Node
from front_door.producer_id_manager import ProducerIdManager
from front_door.transactions.coordinator import TransactionCoordinator
from front_door.transactions.placement import transaction_coordinator
from front_door.wire import encode_response
from tests.memory_group_store import MemoryGroupStore
from tests.memory_transaction_store import MemoryTransactionStore
from tests.unit.test_front_door import REGISTRY, _answer, _handled
from validators.transaction_state import TransactionMetadata, TransactionState

NODES = 4
T0 = 1_700_000_000_000


def _req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _context(tmp_path: Path, store: MemoryTransactionStore | None) -> Context:
    ctx = Context(tuple(Node(n, "gw.example", 9092 + n) for n in node_ids(NODES)), lambda: REGISTRY,
                  bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                  segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                  groups=GroupCoordinator(MemoryGroupStore(), GroupSettings(initial_rebalance_delay_ms=0)))
    if store is not None:
        ctx.transactions = TransactionCoordinator(store, lambda: 1, None, lambda _tid: True)  # type: ignore[arg-type]
    return ctx


def _store() -> MemoryTransactionStore:
    store = MemoryTransactionStore()
    store.states["orders-writer"] = TransactionMetadata(
        "orders-writer", 1000, 3, 60_000, TransactionState.ONGOING, frozenset({("orders", 0), ("orders", 1)}),
        T0, T0 + 5)
    store.states["idle"] = TransactionMetadata("idle", 2000, 0, 30_000, TransactionState.EMPTY, last_update_ms=T0)
    return store


def test_describe_transactions_at_the_coordinator_and_not_coordinator_elsewhere(tmp_path: Path) -> None:
    ctx = _context(tmp_path, _store())
    home = transaction_coordinator("orders-writer", node_ids(NODES))
    m = _req(65, 0)
    # kio reads no negative timestamp (Kafka's -1 of an id that is not found): the answer before its encoding
    answer = _handled(ctx, describe_transactions.handle, 65, 0,
                      m.DescribeTransactionsRequest(transactional_ids=("orders-writer", "missing", "")), node_id=home)
    assert encode_response(65, 0, 7, answer)
    found, missing, empty = answer.transaction_states
    assert (found.error_code, found.transaction_state, found.producer_id, found.producer_epoch) == (
        ErrorCode.none, "Ongoing", 1000, 3)
    assert [(t.topic, t.partitions) for t in found.topics] == [("orders", (0, 1))]
    assert found.transaction_start_time.timestamp() * 1000 == T0
    assert found.transaction_timeout.total_seconds() == 60
    assert missing.error_code in (ErrorCode.transactional_id_not_found, ErrorCode.not_coordinator)
    assert empty.error_code == ErrorCode.invalid_request
    other = next(n for n in node_ids(NODES) if n != home)
    elsewhere = _handled(ctx, describe_transactions.handle, 65, 0,
                        m.DescribeTransactionsRequest(transactional_ids=("orders-writer",)), node_id=other)
    assert elsewhere.transaction_states[0].error_code == ErrorCode.not_coordinator


def test_list_transactions_across_the_nodes_with_kafkas_filters(tmp_path: Path) -> None:
    ctx = _context(tmp_path, _store())
    m = _req(66, 1)
    listed = {}
    for node in node_ids(NODES):
        answer = _answer(ctx, list_transactions.handle, 66, 1, m.ListTransactionsRequest(
            state_filters=(), producer_id_filters=(), duration_filter=-1), node_id=node)
        listed.update({t.transactional_id: (t.producer_id, t.transaction_state, node) for t in answer.transaction_states})
    assert listed == {"orders-writer": (1000, "Ongoing", transaction_coordinator("orders-writer", node_ids(NODES))),
                      "idle": (2000, "Empty", transaction_coordinator("idle", node_ids(NODES)))}
    home = transaction_coordinator("orders-writer", node_ids(NODES))
    filtered = _answer(ctx, list_transactions.handle, 66, 1, m.ListTransactionsRequest(
        state_filters=("Ongoing", "Bogus"), producer_id_filters=(1000,), duration_filter=-1), node_id=home)
    assert [t.transactional_id for t in filtered.transaction_states] == ["orders-writer"]
    assert filtered.unknown_state_filters == ("Bogus",)


def test_transactional_requests_go_to_the_coordinator_of_a_door_with_transactions(tmp_path: Path) -> None:
    ctx = _context(tmp_path, _store())
    home = transaction_coordinator("orders-writer", node_ids(NODES))
    other = next(n for n in node_ids(NODES) if n != home)
    end = _answer(ctx, end_txn.handle, 26, 3, _req(26, 3).EndTxnRequest(
        transactional_id="orders-writer", producer_id=1000, producer_epoch=3, committed=True), node_id=other)
    assert end.error_code == ErrorCode.not_coordinator
    m = _req(24, 3)
    added = _answer(ctx, add_partitions_to_txn.handle, 24, 3, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="orders-writer", v3_and_below_producer_id=1000, v3_and_below_producer_epoch=2,
        v3_and_below_topics=(m.AddPartitionsToTxnTopic(name="orders", partitions=(0,)),
                             m.AddPartitionsToTxnTopic(name="nope", partitions=(0,)))), node_id=home)
    codes = {(t.name, p.partition_index): p.partition_error_code for t in added.results_by_topic_v3_and_below
             for p in t.results_by_partition}
    # an unknown topic's partition is named, the others are not attempted (Kafka's order)
    assert codes == {("orders", 0): ErrorCode.operation_not_attempted, ("nope", 0): ErrorCode.unknown_topic_or_partition}
    without = _context(tmp_path, None)
    import datetime
    init = _answer(without, init_producer_id.handle, 22, 4, _req(22, 4).InitProducerIdRequest(
        transactional_id="orders-writer", transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
        producer_epoch=-1), node_id=home)
    assert (init.error_code, init.producer_id) == (ErrorCode.coordinator_not_available, -1)
