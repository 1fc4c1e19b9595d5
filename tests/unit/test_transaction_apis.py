"""The front door's transaction APIs as `kafka-transactions.sh` and producers ask them (DescribeTransactions,
ListTransactions, the coordinator checks of InitProducerId, AddPartitionsToTxn and EndTxn), over a coordinator
with an in-memory store: which node answers, with which of Kafka's errors; and DescribeProducers over segment
storage the stage's decisions were appended to."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import ModuleType

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from front_door.apis import (
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
)
from front_door.apis.describe_producers import Described, describe
from front_door.cluster.leadership import leader, node_ids
from front_door.cluster.node import Node
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings
from front_door.metrics import FrontDoorMetrics
from front_door.network.wire import encode_response
from front_door.producer_id_manager import ProducerIdManager
from front_door.transactions.coordinator import TransactionCoordinator
from front_door.transactions.placement import transaction_coordinator
from sinks.partition_task import append_partition
from storage.file_names import partition_dir
from streaming.stage import IngressBatch, decide_group
from tests.memory_group_store import MemoryGroupStore
from tests.memory_transaction_store import MemoryTransactionStore
from tests.unit.test_front_door import REGISTRY, _answer, _handled
from validators.append_result import PartitionState
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config
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


def _stored(root: Path, topic: str, partition: int, batches: list[tuple[bytes, str | None, str | None]],
            now_ms: int = T0, *, registry: TopicRegistry = REGISTRY, state: PartitionState | None = None,
            batch_id: int = 0) -> PartitionState:
    """The stage's decisions of `batches` (bytes, transactional id, origin) in micro-batch `batch_id` at `now_ms`,
    appended to segment storage as the sink appends them; the stage's state after them."""
    items = [IngressBatch(0, i, now_ms, data, f"r{i}", None, -1, str(partition), transactional_id=tid, origin=origin)
             for i, (data, tid, origin) in enumerate(batches)]
    rows, after = decide_group(topic, partition, items, registry, state or PartitionState(), now_ms)
    assert all(r.error_code == 0 for r in rows), [r.error_message for r in rows]
    append_partition(root, batch_id, rows, registry)
    return after


def _batch(pid: int, seq: int, count: int = 1, txn: bool = False, ts: int = T0) -> tuple[bytes, str | None, None]:
    data = build_record_batch([(ts, b"k", b"v")] * count, producer_id=pid, producer_epoch=0, base_sequence=seq,
                              is_transactional=txn)
    return data, f"tx-{pid}" if txn else None, None


def _end(pid: int, commit: bool, ts: int = T0 + 1) -> tuple[bytes, None, str]:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    marker = build_end_txn_marker(EndTransactionMarker(kind, 0), producer_id=pid, producer_epoch=0, timestamp=ts)
    return marker, None, "coordinator"


def test_describe_producers_rebuilds_each_partition_s_producers_from_storage(tmp_path: Path) -> None:
    ctx = _context(tmp_path, None)
    nodes = node_ids(NODES)
    home = leader("orders", 1, nodes)
    now = int(time.time() * 1000)  # the door expires producers by its wall clock
    state = _stored(tmp_path, "orders", 1, [
        _batch(5, 0, count=3, ts=now),  # offsets 0-2: an idempotent producer
        _batch(7, 0, txn=True, ts=now), _end(7, commit=False, ts=now + 1),  # 3, 4: aborted
        _batch(7, 1, txn=True, ts=now), _end(7, commit=True, ts=now + 1),  # 5, 6: committed
        _batch(8, 0, count=2, txn=True, ts=now), _batch(8, 2, txn=True, ts=now),  # 7-9: open since 7
    ], now)
    m = _req(61, 0)
    answer = _answer(ctx, describe_producers.handle, 61, 0, m.DescribeProducersRequest(topics=(
        m.TopicRequest(name="orders", partition_indexes=(1, 9)),
        m.TopicRequest(name="nope", partition_indexes=(0,)), m.TopicRequest(name="a/b", partition_indexes=(0,)))),
        node_id=home)
    (found, beyond), (unknown,), (invalid,) = (t.partitions for t in answer.topics)
    assert (found.partition_index, found.error_code, found.error_message) == (1, ErrorCode.none, None)
    # DescribeProducers' last timestamp is the stored batch's (Kafka's); the rest is what the stage itself holds
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch,
             p.current_txn_start_offset) for p in found.active_producers] == [
        (5, 0, 2, now, -1, -1), (7, 0, 1, now + 1, 0, -1), (8, 0, 2, now, -1, 7)]
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
            for p in found.active_producers] == [
        (e.producer_id, e.producer_epoch, e.last_seq, e.coordinator_epoch, e.current_txn_first_offset)
        for e in sorted(state.producers, key=lambda e: e.producer_id)]
    assert (beyond.error_code, beyond.error_message, beyond.active_producers) == (
        ErrorCode.unknown_topic_or_partition, None, ())
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
    assert invalid.error_code == ErrorCode.invalid_topic_exception and "a/b" in (invalid.error_message or "")

    other = next(n for n in nodes if n != home)
    elsewhere = _answer(ctx, describe_producers.handle, 61, 0, m.DescribeProducersRequest(topics=(
        m.TopicRequest(name="orders", partition_indexes=(1,)),)), node_id=other)
    assert elsewhere.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower


def test_describe_producers_lists_producers_not_expired_and_names_a_damaged_segment(tmp_path: Path) -> None:
    _stored(tmp_path, "orders", 1, [_batch(5, 0), _batch(6, 0, txn=True), _batch(7, 0, txn=True), _end(7, True)])
    expiration = REGISTRY.get("orders").producer_id_expiration_ms
    assert [e.producer_id for e in describe(tmp_path, "orders", 1, T0 + 1, expiration).producers] == [5, 6, 7]
    # a day on, only the open transaction's producer is left (Kafka: now - lastTimestamp >= expiration)
    assert [e.producer_id for e in describe(tmp_path, "orders", 1, T0 + 1 + expiration, expiration).producers] == [6]
    assert describe(tmp_path, "orders", 2, T0, expiration) == Described(ErrorCode.none)  # nothing stored

    log = partition_dir(tmp_path, "orders", 1) / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # the commit marker's last byte: it fails its CRC
    log.write_bytes(bytes(data))
    damaged = describe(tmp_path, "orders", 1, T0 + 1, expiration)
    assert damaged.error == ErrorCode.kafka_storage_error and damaged.producers == ()
    assert str(log) in (damaged.message or "") and "fails its CRC" in (damaged.message or "")


def test_describe_producers_reads_from_the_first_segment_a_live_producer_or_open_transaction_can_be_in(
        tmp_path: Path) -> None:
    """Segments rolled by event time (segment.ms 1 h): a day-old segment is read only when it holds the first
    unstable offset; one that is not read cannot fail the answer."""
    day = 86_400_000
    registry = TopicRegistry({"t": topic_config("t", 2, {"message.timestamp.type": "CreateTime",
                                                         "segment.ms": "3600000"}, {})})
    for partition, open_txn in ((0, False), (1, True)):
        old = [_batch(5, 0), _batch(7, 0, txn=True), _end(7, commit=True, ts=T0)]
        state = _stored(tmp_path, "t", partition, old + ([_batch(8, 0, txn=True)] if open_txn else []),
                        registry=registry)
        _stored(tmp_path, "t", partition, [_batch(6, 0, ts=T0 + 2 * day)], T0 + 2 * day, registry=registry,
                state=state, batch_id=1)
        assert len(list(partition_dir(tmp_path, "t", partition).glob("*.log"))) == 2
    now = T0 + 2 * day + 1
    assert [e.producer_id for e in describe(tmp_path, "t", 0, now, day).producers] == [6]
    open_since = [(e.producer_id, e.current_txn_first_offset) for e in describe(tmp_path, "t", 1, now, day).producers]
    assert open_since == [(6, -1), (8, 3)]  # 5 and 7 expired with the first segment; 8's transaction keeps it

    log = partition_dir(tmp_path, "t", 0) / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # the commit marker, the first segment's last batch, fails its CRC
    log.write_bytes(bytes(data))
    assert [e.producer_id for e in describe(tmp_path, "t", 0, now, day).producers] == [6]  # not read
    # a millisecond before its batches expire, the segment is read
    assert describe(tmp_path, "t", 0, T0 + day - 1, day).error == ErrorCode.kafka_storage_error
    assert [e.producer_id for e in describe(tmp_path, "t", 0, T0 + day, day).producers] == [6]
