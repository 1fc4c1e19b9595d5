"""Transactions through the front door with librdkafka's transactional producer and read_committed consumers:
the coordinator (InitProducerId with a transactional id, AddPartitionsToTxn, EndTxn), transactional batches and
markers through the stage into segment storage, and READ_COMMITTED fetches that never show an aborted record."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath
from storage.commit_record import read_commit_head
from storage.file_names import partition_dir
from storage.transaction_index import TransactionIndex
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.group_members import compile_java_client
from tests.integration.test_front_door_groups import kafka_tool

JAVA_CLIENTS = Path(__file__).parent / "java" / "TransactionalClients.java"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh

pytestmark = pytest.mark.integration

TOPICS = {"topics": {"orders": {"partitions": 2, "configs": {"message.timestamp.type": "CreateTime"}}}}


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config, topics=TOPICS) as running:
        yield running


def _producer(door: RunningDoor, transactional_id: str) -> Producer:
    return Producer({"bootstrap.servers": door.bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 60_000, "linger.ms": 5})


def _read(door: RunningDoor, isolation: str, partitions: int = 2) -> list[bytes]:
    """Every record a consumer with `isolation` sees in `orders`, up to the end it is given."""
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": f"t-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("orders", p, 0) for p in range(partitions)])
        values, at_end = [], set()
        while len(at_end) < partitions:
            msg = consumer.poll(30)
            assert msg is not None, f"no message or end of partition within 30 s ({values})"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            values.append(msg.value())
        return values
    finally:
        consumer.close()


def _read_settled(door: RunningDoor, isolation: str, expected: list[bytes], timeout_s: float = 60) -> list[bytes]:
    """What `_read` gives once it is `expected` (sorted), or the last read after `timeout_s`: EndTxn is answered
    once the coordinator has prepared the transaction, and its markers reach the partitions a moment later, as
    with Kafka."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = sorted(_read(door, isolation))
        if got == sorted(expected) or time.monotonic() > deadline:
            return got


def _wait_stable(directory: Path, timeout_s: float = 60) -> None:
    """Until the partition's commit record shows no open transaction (the last markers landed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        head = read_commit_head(directory)
        if head is not None and head.first_unstable_offset is None:
            return
        assert time.monotonic() < deadline, f"{directory.name}: a transaction still open after {timeout_s:.0f} s: {head}"
        time.sleep(0.1)  # polling the commit record: there is no event to wait on


def test_committed_transactions_are_read_and_aborted_ones_never_are(door: RunningDoor) -> None:
    p = _producer(door, f"orders-{uuid.uuid4().hex[:6]}")
    p.init_transactions(60)
    for txn, commit in enumerate([True, False, True, False]):
        p.begin_transaction()
        for i in range(6):
            p.produce("orders", value=f"t{txn}-{i}".encode(), partition=i % 2)
        if commit:
            p.commit_transaction(60)
        else:
            assert p.flush(60) == 0  # appended first (librdkafka purges what it has not sent when it aborts)
            p.abort_transaction(60)
    expected = sorted(f"t{t}-{i}".encode() for t in (0, 2) for i in range(6))
    assert _read_settled(door, "read_committed", expected) == expected
    # read_uncommitted sees every record, the aborted ones too; the markers are no records to either
    assert len(_read(door, "read_uncommitted")) == 24

    # storage as Kafka writes it: each partition's two aborted transactions in its .txnindex, nothing open once
    # the last abort's markers landed
    for partition in range(2):
        directory = partition_dir(door.segments_root, "orders", partition)
        _wait_stable(directory)
        aborted = TransactionIndex(directory / "00000000000000000000.txnindex", 0).all_aborted()
        assert len(aborted) == 2 and all(t.first_offset < t.last_offset for t in aborted)


def test_an_open_transaction_holds_read_committed_back_until_it_ends(door: RunningDoor) -> None:
    p = _producer(door, f"open-{uuid.uuid4().hex[:6]}")
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("orders", value=b"before", partition=0)
    p.commit_transaction(60)
    p.begin_transaction()
    p.produce("orders", value=b"pending", partition=0)
    p.flush(60)  # appended, not committed: the partition's last stable offset stays before it
    assert _read_settled(door, "read_committed", [b"before"]) == [b"before"]
    assert sorted(_read(door, "read_uncommitted")) == [b"before", b"pending"]
    p.commit_transaction(60)
    assert _read_settled(door, "read_committed", [b"before", b"pending"]) == [b"before", b"pending"]


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(door: RunningDoor) -> None:
    tid = f"fenced-{uuid.uuid4().hex[:6]}"
    old = _producer(door, tid)
    old.init_transactions(60)
    old.begin_transaction()
    old.produce("orders", value=b"zombie", partition=1)
    old.flush(60)
    new = _producer(door, tid)
    new.init_transactions(60)  # aborts the old one's open transaction and bumps the epoch
    new.begin_transaction()
    new.produce("orders", value=b"alive", partition=1)
    new.commit_transaction(60)
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(30)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert _read_settled(door, "read_committed", [b"alive"]) == [b"alive"]


def test_kafkas_java_transactional_producer_and_read_committed_consumer(door: RunningDoor, tmp_path: Path) -> None:
    """Kafka 4's own clients: initTransactions, commits and aborts (transaction version 2, as the door finalizes it;
    `test_transaction_version_2.py` checks how they run it), then a read_committed consumer to the end offsets it
    is given (the last stable offsets)."""
    classes = compile_java_client(tmp_path, JAVA_CLIENTS)
    # the markers of the last transaction may land after its commit returns: the consumer reads to the end
    # offsets it is given, so the last transaction here is an aborted one followed by a committed one it waits out
    done = subprocess.run([java_executable(), "-Xmx256m", "-cp", os.pathsep.join([str(classes), kafka_classpath(KAFKA_JARS_DIR)]),
                           "TransactionalClients", door.bootstrap, "orders", "2", "6", "10", f"java-{uuid.uuid4().hex[:6]}"],
                          capture_output=True, text=True, timeout=300)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert [line for line in lines if not line.startswith("read ")][:6] == [
        "committed 0", "aborted 1", "committed 2", "committed 3", "aborted 4", "committed 5"]
    read = [line.removeprefix("read ") for line in lines if line.startswith("read ")]
    assert not [v for v in read if v.startswith(("t1-", "t4-"))]  # never an aborted record
    assert set(read) <= {f"t{t}-{r}" for t in (0, 2, 3, 5) for r in range(10)}
    assert len(read) == len(set(read))
    # what was committed is all there once the markers landed
    expected = [f"t{t}-{r}".encode() for t in (0, 2, 3, 5) for r in range(10)]
    assert _read_settled(door, "read_committed", expected) == sorted(expected)


def test_a_transaction_left_open_across_a_door_restart_is_aborted_when_its_id_returns(door: RunningDoor) -> None:
    """The coordinator's state is on the transaction state topic: a door started again finds the transaction
    Ongoing, and the producer that comes back with the id fences it and has it aborted before going on."""
    tid = f"restart-{uuid.uuid4().hex[:6]}"
    old = _producer(door, tid)
    old.init_transactions(60)
    old.begin_transaction()
    old.produce("orders", value=b"lost-in-restart", partition=0)
    assert old.flush(60) == 0
    door.restart()
    new = _producer(door, tid)
    new.init_transactions(60)
    new.begin_transaction()
    new.produce("orders", value=b"after-restart", partition=0)
    new.commit_transaction(60)
    assert _read_settled(door, "read_committed", [b"after-restart"]) == [b"after-restart"]
    assert sorted(_read(door, "read_uncommitted")) == [b"after-restart", b"lost-in-restart"]


def test_an_abandoned_transaction_is_aborted_after_its_timeout(spark, gateway_config) -> None:  # type: ignore[no-untyped-def]
    with running_front_door(spark, gateway_config, topics=TOPICS, transaction_abort_interval_ms=200) as door:
        # librdkafka caps a message's delivery timeout at the transaction timeout: a record through the stage
        # first (past the query's slow first micro-batch) and 8 s leave room for micro-batches on a busy
        # machine, so the batch is appended before the coordinator gives up on the transaction
        warm = Producer({"bootstrap.servers": door.bootstrap})
        warm.produce("orders", value=b"warm-up", partition=0)
        assert warm.flush(60) == 0
        p = Producer({"bootstrap.servers": door.bootstrap, "transactional.id": f"abandoned-{uuid.uuid4().hex[:6]}",
                      "transaction.timeout.ms": 8_000})
        p.init_transactions(60)
        p.begin_transaction()
        delivered: list[object] = []
        p.produce("orders", value=b"abandoned", partition=1, on_delivery=lambda err, _msg: delivered.append(err))
        assert p.flush(60) == 0
        assert delivered == [None]
        # never ended: the coordinator aborts it once its 8 s are up, and read_committed readers move past it
        # (the flush returned once the batch was appended: the partition's transaction was open then)
        directory = partition_dir(door.segments_root, "orders", 1)
        _wait_stable(directory)
        aborted = TransactionIndex(partition_dir(door.segments_root, "orders", 1) / "00000000000000000000.txnindex",
                                   0).all_aborted()
        assert [(t.first_offset, t.last_offset) for t in aborted] == [(0, 1)]
        assert _read(door, "read_committed") == [b"warm-up"]


def test_consumer_offsets_sent_to_a_transaction_commit_with_it_and_go_with_an_abort(door: RunningDoor) -> None:
    """`send_offsets_to_transaction` (AddOffsetsToTxn, TxnOffsetCommit): the group's offsets are committed when
    the transaction commits, and never when it aborts."""
    group = f"etl-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("orders", 0)])
    p = _producer(door, f"etl-{uuid.uuid4().hex[:6]}")
    p.init_transactions(60)

    def committed() -> int:
        (tp,) = consumer.committed([TopicPartition("orders", 0)], timeout=30)
        return tp.offset

    try:
        for offset, commit in ((5, True), (9, False)):
            p.begin_transaction()
            p.produce("orders", value=f"out-{offset}".encode(), partition=1)
            p.send_offsets_to_transaction([TopicPartition("orders", 0, offset)], consumer.consumer_group_metadata(), 60)
            if commit:
                p.commit_transaction(60)
            else:
                assert p.flush(60) == 0
                p.abort_transaction(60)
            # read_committed: the offset fetch waits out the transaction's end (UNSTABLE_OFFSET_COMMIT meanwhile)
            deadline = time.monotonic() + 30
            while committed() != 5 and time.monotonic() < deadline:
                time.sleep(0.1)  # polling the group's committed offset: there is no event to wait on
            assert committed() == 5
    finally:
        consumer.close()


def test_consumer_offsets_sent_to_a_transaction_outlive_a_door_restart_and_commit_with_it(door: RunningDoor) -> None:
    """The offsets of TxnOffsetCommit are written to the groups topic as pending before they are answered: a door
    started again mid-transaction holds them, and the transaction's commit makes them the group's."""
    group = f"restart-etl-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    p = _producer(door, f"restart-etl-{uuid.uuid4().hex[:6]}")
    p.init_transactions(60)
    try:
        p.begin_transaction()
        p.produce("orders", value=b"out-7", partition=1)
        p.send_offsets_to_transaction([TopicPartition("orders", 0, 7)], consumer.consumer_group_metadata(), 60)
        door.restart()
        p.commit_transaction(60)
        deadline = time.monotonic() + 30
        while (offset := consumer.committed([TopicPartition("orders", 0)], timeout=30)[0].offset) != 7 \
                and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the group's committed offset: there is no event to wait on
        assert offset == 7
        assert _read_settled(door, "read_committed", [b"out-7"]) == [b"out-7"]
    finally:
        consumer.close()


def _transactions_tool(bootstrap: str, *args: str) -> list[dict[str, str]]:
    """`kafka-transactions.sh --bootstrap-server <bootstrap> <args>`: the rows of the table it prints, by its
    headers."""
    done = kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    header, *rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_kafka_transactions_describe_producers_shows_the_open_transaction_until_it_ends(door: RunningDoor) -> None:
    """Kafka's `kafka-transactions.sh describe-producers` (DescribeProducers): a transactional producer with its
    transaction open at the offset of its first record there; once the markers landed, no transaction."""
    tid = f"described-{uuid.uuid4().hex[:6]}"
    p = _producer(door, tid)
    p.init_transactions(60)
    p.begin_transaction()
    offsets: list[int] = []
    for i in range(3):
        p.produce("orders", value=f"open-{i}".encode(), partition=1, on_delivery=lambda _e, m: offsets.append(m.offset()))
    assert p.flush(60) == 0 and len(offsets) == 3
    (txn,) = _transactions_tool(door.bootstrap, "describe", "--transactional-id", tid)
    assert txn["TransactionState"] == "Ongoing"

    def producer() -> dict[str, str]:
        rows = _transactions_tool(door.bootstrap, "describe-producers", "--topic", "orders", "--partition", "1")
        (row,) = [r for r in rows if r["ProducerId"] == txn["ProducerId"]]
        return row

    described = producer()
    assert (described["ProducerEpoch"], described["LastSequence"], described["CurrentTransactionStartOffset"]) == (
        txn["ProducerEpoch"], "2", str(min(offsets)))
    assert described["LatestCoordinatorEpoch"] == "-1"  # no marker yet
    # find-hanging asks every partition's producers, then the coordinator, which still has the partition in the
    # transaction: not hanging (a timeout of 0 minutes makes the open transaction a candidate)
    assert _transactions_tool(door.bootstrap, "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0") == []

    p.commit_transaction(60)
    _wait_stable(partition_dir(door.segments_root, "orders", 1))
    described = producer()
    assert (described["CurrentTransactionStartOffset"], described["LatestCoordinatorEpoch"]) == ("None", "0")
