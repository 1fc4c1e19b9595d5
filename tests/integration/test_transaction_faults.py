"""Transactions through kills: two front doors as processes of their own (`gateway door`, one node each) and a
driver without a door, as an operator runs them; Kafka's Java transactional producer (`java/TransactionalStream.java`)
commits and aborts at random, a read_committed consumer reads beside it the whole time. Mid-stream the door that
coordinates the producer's transactional id is killed with kill -9 (its partitions' leadership and the id move to
the other door, which resumes whatever the dead one left prepared); before that, consumer offsets are sent to
transactions whose group and transactional id are coordinated by different doors; then, on the surviving door, a Kafka Streams
word count with `exactly_once_v2` is killed (kill -9) and started again, and the gateway's driver is killed with
kill -9 and started again under both.

The checker, at the end, on what a fresh read_committed consumer reads and what the segments hold:
- no aborted read: no record of an aborted transaction, ever, by either consumer;
- no torn transaction: each transaction's records all visible or none (one the producer could not learn the
  outcome of may be either);
- no lost committed record and none twice, in the reads and in the segments;
- the word counts exact, none ever above what the lines hold.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from contract.transaction_records import TransactionStatus, decode_key, decode_value
from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath
from front_door.cluster.door_cluster import first_node_id
from front_door.cluster.leadership import leader
from front_door.groups.placement import coordinator as group_coordinator
from front_door.transactions.placement import transaction_coordinator
from storage.log_reader import read
from streaming.config import GatewayConfig
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.gateway_io import create_gateway_topics, read_all
from tests.integration.group_members import compile_java_client
from tests.integration.polling import until
from tests.integration.ports import free_ports
from tests.integration.standby_harness import door_process_configs
from tests.integration.streams_app import (
    INPUT,
    OUTPUT,
    PARTITIONS,
    CountsReader,
    WordCountApp,
    compile_word_count,
    expected_counts,
    produce_lines,
    sentences,
)
from tests.integration.test_kafka_streams import EXACTLY_ONCE

pytestmark = pytest.mark.integration

TOPIC, TOPIC_PARTITIONS = "payments", 4
ETL_TOPIC = "etl-out"  # the consume-transform-produce transactions' output
RECORDS_PER_TRANSACTION = 6
SESSION_TIMEOUT_MS = 6000  # a killed door is fenced after it
METADATA_REFRESH_MS = 10_000  # clients of several doors refresh their metadata this often (docs/deployment.md)
JAVA_SOURCE = Path(__file__).parent / "java" / "TransactionalStream.java"


class TransactionalStream:
    """`TransactionalStream` in a JVM of its own; its outcome lines read from its stdout file."""

    def __init__(self, classes: Path, bootstrap: str, transactional_id: str, work: Path) -> None:
        self.stop_file = work / "stop-producer"
        self.out = work / "transactional-stream.out"
        settings = [f"metadata.max.age.ms={METADATA_REFRESH_MS}", "transaction.timeout.ms=30000"]
        with self.out.open("wb") as out:
            self.proc = subprocess.Popen(
                [java_executable(), "-Xmx256m", "-cp", os.pathsep.join([str(classes), kafka_classpath(KAFKA_JARS_DIR)]),
                 "TransactionalStream", bootstrap, TOPIC, str(TOPIC_PARTITIONS), str(RECORDS_PER_TRANSACTION), "7",
                 transactional_id, str(self.stop_file), *settings], stdout=out, stderr=subprocess.STDOUT)

    def outcomes(self) -> dict[int, str]:
        """Transaction -> "committed", "aborted" or "unknown", as far as printed."""
        found: dict[int, str] = {}
        for line in self.out.read_text(errors="replace").splitlines():
            word, _, rest = line.partition(" ")
            if word in ("committed", "aborted", "unknown"):
                found[int(rest.split(" ")[0])] = word
        return found

    def committed_since(self, count_before: int) -> int:
        return sum(1 for o in self.outcomes().values() if o == "committed") - count_before

    def committed(self) -> int:
        return self.committed_since(0)

    def stop(self) -> None:
        self.stop_file.touch()
        self.proc.wait(180)

    def tail(self, chars: int = 3000) -> str:
        return self.out.read_text(errors="replace")[-chars:]


class CommittedReader:
    """A read_committed consumer of every partition from the start, in a thread, keeping every value it reads."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS})
        self.consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(TOPIC_PARTITIONS)])
        self.values: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self.consumer.consume(500, timeout=0.2):
                if msg.error() is None:
                    self.values.append(msg.value().decode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def _transaction(value: str) -> int:
    return int(value.split("-")[0])


def _placed_on_first_door(prefix: str) -> str:
    """A transactional id coordinated by door 1's node while doors 1 and 2 live."""
    nodes = (first_node_id(1), first_node_id(2))
    return next(tid for i in range(1000) if transaction_coordinator(tid := f"{prefix}-{i}", nodes) == nodes[0])


def _assert_added_across_doors(config: GatewayConfig, transactional_id: str) -> None:
    """Kafka's Java producer runs transaction version 2 (KIP-890): door 2 added the partitions it leads to the
    producer's transactions, coordinated by door 1, with AddPartitionsToTxn v5 between the doors."""
    nodes = (first_node_id(1), first_node_id(2))
    led_by_door_2 = {p for p in range(TOPIC_PARTITIONS) if leader(TOPIC, p, nodes) == nodes[1]}
    prepared = [decode_value(m.value()) for m in read_all(config, config.transaction_state_topic_name)
                if m.value() is not None and decode_key(m.key()).transactional_id == transactional_id
                and decode_value(m.value()).transaction_status == TransactionStatus.PREPARE_COMMIT]
    assert prepared and {v.client_transaction_version for v in prepared} == {2}
    assert all(led_by_door_2 <= set(next(ps for t, ps in v.partitions if t == TOPIC)) for v in prepared), prepared


def _offsets_sent_across_doors(bootstrap: str) -> None:
    """A consume-transform-produce transaction whose consumer group is coordinated by door 2 and whose
    transactional id by door 1: the offsets it sends are the group's when it commits, never when it aborts."""
    nodes = (first_node_id(1), first_node_id(2))
    group = next(g for i in range(1000) if group_coordinator(g := f"etl-{i}", nodes) == nodes[1])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _placed_on_first_door("etl")})
    producer.init_transactions(60)
    try:
        for offset, commit in ((5, True), (9, False)):
            producer.begin_transaction()
            producer.produce(ETL_TOPIC, value=f"etl-{offset}".encode(), partition=0)
            producer.send_offsets_to_transaction([TopicPartition(TOPIC, 1, offset)],
                                                 consumer.consumer_group_metadata(), 60)
            if commit:
                producer.commit_transaction(60)
            else:
                assert producer.flush(60) == 0
                producer.abort_transaction(60)
            # require_stable (read_committed): the fetch waits out the transaction's end on the group's door
            until(lambda: consumer.committed([TopicPartition(TOPIC, 1)], timeout=30)[0].offset == 5,
                  "the group's offset from the committed transaction", 60)
    finally:
        consumer.close()


def _settled_read(bootstrap: str, committed: set[str], timeout_s: float = 120) -> list[str]:
    """A fresh read_committed consumer's values once they hold every committed record (the last markers land a
    moment after the commit returns) and it has reached each partition's end."""
    deadline = time.monotonic() + timeout_s
    while True:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"final-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        try:
            ends = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                    for p in range(TOPIC_PARTITIONS)]
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(TOPIC_PARTITIONS)])
            values: list[str] = []
            while time.monotonic() < deadline:
                values += [m.value().decode() for m in consumer.consume(500, timeout=0.5) if m.error() is None]
                positions = consumer.position([TopicPartition(TOPIC, p) for p in range(TOPIC_PARTITIONS)])
                if all(tp.offset >= end for tp, end in zip(positions, ends, strict=True)):
                    break
        finally:
            consumer.close()
        if committed <= set(values) or time.monotonic() >= deadline:
            return values


def test_transactions_hold_through_door_and_driver_kills(gateway_config: GatewayConfig, tmp_path: Path) -> None:
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"defaults": {"log.message.timestamp.after.max.ms": "3600000"}, "topics": {
        TOPIC: {"partitions": TOPIC_PARTITIONS}, ETL_TOPIC: {"partitions": 1}, INPUT: {"partitions": PARTITIONS}, OUTPUT: {"partitions": PARTITIONS}}}))
    config = gateway_config.with_overrides(
        topics_file=str(topics_file), shuffle_partitions=1, restart_backoff_initial_s=0.5, restart_backoff_max_s=4.0,
        doors_topic=f"doors-{uuid.uuid4().hex[:8]}", front_door_nodes=1,
        front_door_session_timeout_ms=SESSION_TIMEOUT_MS)
    driver_config, _, door_config = door_process_configs(config, tmp_path)
    create_gateway_topics(door_config)
    classes = compile_java_client(tmp_path / "java", JAVA_SOURCE)
    word_count = compile_word_count(tmp_path / "word-count")
    addresses = [f"127.0.0.1:{free_ports(1)}" for _ in range(2)]
    doors = [GatewayDriver(door_config.with_overrides(front_door_address=address, front_door_id=i + 1,
                                                      metrics_address="127.0.0.1:0"), tmp_path, f"door{i + 1}",
                           command="door") for i, address in enumerate(addresses)]
    driver = GatewayDriver(driver_config, tmp_path, "driver")
    stream: TransactionalStream | None = None
    reader: CommittedReader | None = None
    app: WordCountApp | None = None
    counts: CountsReader | None = None
    try:
        for door in doors:
            door.start()
        driver.start()
        for door in doors:
            _wait_for(lambda door=door: door.logged("2 live door(s)"), f"{door.log_path.name} to see both doors", 120)
        bootstrap = ",".join(addresses)
        _offsets_sent_across_doors(bootstrap)
        transactional_id = _placed_on_first_door("payments")
        stream = TransactionalStream(classes, bootstrap, transactional_id, tmp_path)
        reader = CommittedReader(bootstrap)
        until(lambda: stream.committed() >= 10, "transactions committed through the doors", 240, stream.tail)
        _assert_added_across_doors(config, transactional_id)

        # 1. the door coordinating the transactional id (and leading some of its partitions) killed
        doors[0].kill()
        before = stream.committed()
        _wait_for(lambda: doors[1].logged("1 live door(s)"), "the killed door fenced", 60)
        until(lambda: stream.committed_since(before) >= 10, "transactions after the door's kill", 240, stream.tail)

        # 2. on the surviving door, Streams with exactly_once_v2 killed mid-stream and started again
        survivor = addresses[1]
        application_id = f"word-count-{uuid.uuid4().hex[:8]}"
        lines = sentences(0, 100)
        produce_lines(survivor, lines)
        counts = CountsReader(survivor, isolation="read_committed")
        app = WordCountApp(word_count, tmp_path / "run-1", survivor, application_id, INPUT, OUTPUT,
                           tmp_path / "state", EXACTLY_ONCE)
        app.wait_running()
        until(lambda: counts.poll() == expected_counts(lines), "the first counts", 240, app.log_tail)
        more = sentences(100, 300)
        produce_lines(survivor, more)
        lines += more
        app.kill()  # part of the new lines counted, part in an open transaction
        app = WordCountApp(word_count, tmp_path / "run-2", survivor, application_id, INPUT, OUTPUT,
                           tmp_path / "state", EXACTLY_ONCE)
        app.wait_running()

        # 3. the driver killed under both, and started again
        more = sentences(400, 200)
        produce_lines(survivor, more)
        lines += more
        driver.kill()
        before = stream.committed()
        driver = GatewayDriver(driver_config, tmp_path, "driver").start()
        until(lambda: stream.committed_since(before) >= 10, "transactions after the driver's kill", 300, stream.tail)
        until(lambda: counts.poll() == expected_counts(lines), "every count after the kills", 300,
              lambda: f"read {counts.latest}\nexpected {dict(expected_counts(lines))}\n{app.log_tail()}")
        assert all(count <= expected_counts(lines)[word] for word, count in counts.max_seen.items()), counts.max_seen

        stream.stop()
        outcomes = stream.outcomes()
        assert stream.proc.returncode == 0, stream.tail()
        by_transaction: dict[int, set[str]] = {
            i: {f"{i}-{r}" for r in range(RECORDS_PER_TRANSACTION)} for i in outcomes}
        committed = {v for i, o in outcomes.items() if o == "committed" for v in by_transaction[i]}
        aborted = {i for i, o in outcomes.items() if o == "aborted"}
        final = _settled_read(survivor, committed)
        reader.close()
        seen = collections.Counter(final)
        assert [v for v, n in seen.items() if n > 1] == []  # none twice
        assert committed <= set(final), f"committed records lost: {sorted(committed - set(final))[:10]}"
        read_aborted = [v for v in [*final, *reader.values] if _transaction(v) in aborted]
        assert read_aborted == [], f"aborted records read: {read_aborted[:10]}"
        visible = collections.defaultdict(set)
        for v in final:
            visible[_transaction(v)].add(v)
        torn = {i: sorted(vs) for i, vs in visible.items() if vs != by_transaction.get(i)}
        assert torn == {}, f"torn transactions: {torn}"
        assert set(reader.values) <= set(final)  # the consumer beside the faults read nothing the end denies
        # the segments: every record sent by a transaction stored once at most (idempotent through the faults)
        root = config.path(config.segments_root)
        stored = collections.Counter(r.value.decode() for p in range(TOPIC_PARTITIONS)
                                     for r in read(root, TOPIC, p, 0, 10**6))
        assert [v for v, n in stored.items() if n > 1] == []
        print(f"\n[fault] transactions through door and driver kills: {len(outcomes)} transactions, "
              f"{sum(o == 'committed' for o in outcomes.values())} committed, {len(aborted)} aborted, "
              f"{sum(o == 'unknown' for o in outcomes.values())} unknown; {len(final)} records read committed; the "
              f"producer's retried ends and aborted failures: "
              f"{collections.Counter(line.split(' ')[0] for line in stream.tail(10**7).splitlines())}")
        app.stop()
        assert doors[1].stop() == 0, doors[1].log()[-3000:]
        assert driver.stop() == 0, driver.log()[-3000:]
    finally:
        for closing in (stream, app):
            if closing is not None and closing.proc.poll() is None:
                closing.proc.kill()
        if counts is not None:
            counts.close()
        if reader is not None and not reader._stop.is_set():
            reader.close()
        for process in (*doors, driver):
            if process.proc is not None and process.proc.poll() is None:
                process.kill()
