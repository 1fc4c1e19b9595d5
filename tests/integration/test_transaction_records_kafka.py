"""`contract/transaction_records.py` against Apache Kafka 4.2.1's own code for `__transaction_state`.

`java/TransactionLogProbe.java` (compiled by the JDK's javac once per module) reads records with Kafka's
generated `TransactionLogKey`/`TransactionLogValue`, the broker's `TransactionLog.readTxnRecordKey/
readTxnRecordValue` (what the transaction coordinator loads the topic with) and kafka-console-consumer's
`TransactionLogMessageFormatter`, and writes them with `TransactionLogValue` built from Kafka's JSON form of it
and with the coordinator's `TransactionLog.valueToBytes`. The tests check that Kafka reads every field Python
wrote (every state, empty and multi-topic partition lists, v0 and v1 values, every tagged field), that Python
reads what Kafka writes and writes the very same bytes, that damaged values Python refuses fail Kafka's loader
too, and that the records a real broker writes for a Java and a librdkafka transactional producer (committed
and aborted transactions) decode in Python exactly as Kafka decodes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from contract.transaction_records import (
    TransactionKey,
    TransactionLogValue,
    TransactionRecordError,
    TransactionStatus,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath, log4j2_config
from tests.integration.group_members import compile_java_client
from tests.producer_performance import tools_classpath

pytestmark = pytest.mark.integration

PROBE_SOURCE = Path(__file__).parent / "java" / "TransactionLogProbe.java"
PROBE_CLASS = "TransactionLogProbe"
JAVA_TIMEOUT_S = 180.0
TRANSACTION_STATE_TOPIC = "__transaction_state"
# TransactionState.stateName, by id
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")
# the value's fixed fields before its partitions: version, producer id, epoch, timeout, status
PARTITIONS_AT = 2 + 8 + 2 + 4 + 1
S = TransactionStatus

# (transactional id, value, value version): every state, empty and multi-topic partitions, both versions
CASES: list[tuple[str, TransactionLogValue, int]] = [
    ("tx-empty", TransactionLogValue(4000, -1, -1, 0, 60_000, S.EMPTY, (), 1_700_000_000_000, 1_700_000_000_000, 2), 1),
    ("tx-empty-v0", TransactionLogValue(4001, -1, -1, 3, 60_000, S.EMPTY, (), 1_700_000_000_001, -1, 0), 0),
    ("tx-ongoing", TransactionLogValue(4002, 3999, 4003, 7, 900_000, S.ONGOING,
                                       (("orders", (0, 3, 1)), ("audit.log", (11,)), ("_x-y", ())), 21, 20, 2, 6), 1),
    ("tx-prepare-commit", TransactionLogValue(4004, -1, -1, 8, 60_000, S.PREPARE_COMMIT,
                                              (("orders", (0, 1, 2)),), 31, 30, 0), 1),
    ("tx-complete-commit", TransactionLogValue(4005, 4004, -1, 9, 60_000, S.COMPLETE_COMMIT, (), 41, 40, 2), 1),
    ("tx-prepare-abort-v0", TransactionLogValue(4006, -1, -1, 1, 60_000, S.PREPARE_ABORT,
                                                (("a", (5,)), ("b", (6, 7))), 51, 50, 0), 0),
    ("tx-complete-abort-v0", TransactionLogValue(4007, -1, -1, 2, 60_000, S.COMPLETE_ABORT, (), 61, 60, 0), 0),
    ("tx-dead", TransactionLogValue(4008, -1, -1, 32767, 60_000, S.DEAD, (), 71, 70, 1), 1),
    ("tx-fence", TransactionLogValue(4009, -1, 4010, 4, 60_000, S.PREPARE_EPOCH_FENCE, (("t", (0,)),), 81, 80, 1,
                                     5), 1),
    ("é€😀 tx", TransactionLogValue(2**63 - 1, -(2**63), 2**63 - 2, 32767, 2**31 - 1, S.ONGOING,
                                   (("ü", (2**31 - 1, 0)),), 2**63 - 1, -(2**63), 2), 1),
]


class Probe:
    """Runs the compiled TransactionLogProbe with the broker's jars and kafka-tools (for the formatter)."""

    def __init__(self, classes: Path, work: Path) -> None:
        self.classes = classes
        self.log_config = work / "log4j2.xml"
        self.log_config.write_text(log4j2_config(None, "WARN"))

    def run(self, args: Sequence[str], lines: Sequence[str] = ()) -> list[dict[str, Any]]:
        classpath = os.pathsep.join([str(self.classes), kafka_classpath(KAFKA_JARS_DIR), tools_classpath()])
        cmd = [java_executable(), "-Xmx256m", f"-Dlog4j2.configurationFile={self.log_config}", "-cp", classpath,
               PROBE_CLASS, *args]
        done = subprocess.run(cmd, input="".join(f"{line}\n" for line in lines), capture_output=True, text=True,
                              timeout=JAVA_TIMEOUT_S)
        assert done.returncode == 0, f"{PROBE_CLASS} {args[0]} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def read(self, records: Sequence[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
        out = self.run(["read"], [f"{key.hex()} {value.hex()}" for key, value in records])
        assert len(out) == len(records)
        return out

    def write(self, specs: Sequence[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
        out = self.run(["write"], [json.dumps(spec) for spec in specs])
        assert len(out) == len(specs)
        return [(bytes.fromhex(o["key"]), bytes.fromhex(o["value"])) for o in out]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    work = tmp_path_factory.mktemp("transaction-log-probe")
    return Probe(compile_java_client(work, PROBE_SOURCE), work)


def kafka_json(value: TransactionLogValue, version: int) -> dict[str, Any]:
    """TransactionLogValue in Kafka's JSON form (TransactionLogValueJsonConverter): tagged fields only in v1 and
    only when not their default, partitions null for an Empty transaction (as the coordinator writes)."""
    data: dict[str, Any] = {
        "producerId": value.producer_id, "producerEpoch": value.producer_epoch,
        "transactionTimeoutMs": value.transaction_timeout_ms, "transactionStatus": value.transaction_status,
        "transactionPartitions": None if value.transaction_status == S.EMPTY else [
            {"topic": topic, "partitionIds": list(ids)} for topic, ids in value.partitions],
        "transactionLastUpdateTimestampMs": value.last_update_ms, "transactionStartTimestampMs": value.start_ms,
    }
    if version >= 1:
        for name, field, default in (("previousProducerId", value.previous_producer_id, -1),
                                     ("nextProducerId", value.next_producer_id, -1),
                                     ("nextProducerEpoch", value.next_producer_epoch, -1),
                                     ("clientTransactionVersion", value.client_transaction_version, 0)):
            if field != default:
                data[name] = field
    return data


def message_fields(transactional_id: str, value: TransactionLogValue, version: int) -> dict[str, Any]:
    """What the probe prints for the generated TransactionLogKey/TransactionLogValue classes."""
    return {
        "keyType": 0, "transactionalId": transactional_id, "keyRemaining": 0, "version": version,
        "producerId": value.producer_id, "previousProducerId": value.previous_producer_id,
        "nextProducerId": value.next_producer_id, "producerEpoch": value.producer_epoch,
        "nextProducerEpoch": value.next_producer_epoch, "transactionTimeoutMs": value.transaction_timeout_ms,
        "transactionStatus": value.transaction_status,
        "transactionPartitions": None if value.transaction_status == S.EMPTY else [
            [topic, list(ids)] for topic, ids in value.partitions],
        "transactionLastUpdateTimestampMs": value.last_update_ms, "transactionStartTimestampMs": value.start_ms,
        "clientTransactionVersion": value.client_transaction_version, "unknownTaggedFields": 0, "valueRemaining": 0,
    }


def broker_fields(transactional_id: str, value: TransactionLogValue) -> dict[str, Any]:
    """What the coordinator's loader (TransactionLog.readTxnRecordValue) makes of a record: partitions as a set
    (none for Empty), no next producer id or epoch, the last producer epoch unknown (-1)."""
    partitions = [] if value.transaction_status == S.EMPTY else sorted(
        {(topic, p) for topic, ids in value.partitions for p in ids})
    return {
        "transactionalId": transactional_id, "producerId": value.producer_id,
        "prevProducerId": value.previous_producer_id, "producerEpoch": value.producer_epoch, "lastProducerEpoch": -1,
        "txnTimeoutMs": value.transaction_timeout_ms, "state": value.transaction_status,
        "stateName": STATE_NAMES[value.transaction_status], "topicPartitions": [list(tp) for tp in partitions],
        "txnStartTimestamp": value.start_ms, "txnLastUpdateTimestamp": value.last_update_ms,
        "clientTransactionVersion": value.client_transaction_version,
    }


def assert_kafka_reads(read: dict[str, Any], transactional_id: str, value: TransactionLogValue, version: int) -> None:
    assert read["message"] == message_fields(transactional_id, value, version)
    assert read["broker"] == broker_fields(transactional_id, value)
    assert read["formatter"] == {"key": {"type": 0, "data": {"transactionalId": transactional_id}},
                                 "value": {"version": version, "data": kafka_json(value, version)}}


def test_kafka_reads_every_field_python_writes(probe: Probe) -> None:
    records = [(encode_key(TransactionKey(tid)), encode_value(value, version)) for tid, value, version in CASES]
    for (tid, value, version), read in zip(CASES, probe.read(records), strict=True):
        assert_kafka_reads(read, tid, value, version)


def test_python_reads_kafkas_messages_and_writes_the_same_bytes(probe: Probe) -> None:
    written = probe.write([{"transactionalId": tid, "via": "message", "version": version,
                            "value": kafka_json(value, version)} for tid, value, version in CASES])
    for (tid, value, version), (key, data) in zip(CASES, written, strict=True):
        assert decode_key(key) == TransactionKey(tid)
        assert decode_value(data) == value
        assert (key, data) == (encode_key(TransactionKey(tid)), encode_value(value, version))


def test_python_reads_what_the_transaction_coordinator_writes(probe: Probe) -> None:
    """TransactionLog.valueToBytes at transaction.version 0 (v0 values) and 2 (a new 4.x cluster's: v1). The
    coordinator groups partitions by topic in hash order, writes null partitions for Empty, and writes neither
    the previous nor the next producer id (nor NextProducerEpoch) although it is given them."""
    partitions = [["orders", 1], ["audit", 0], ["orders", 0], ["orders", 7]]
    specs, expected = [], []
    for tv in (0, 2):
        for status in S:
            client_tv = 2 if tv == 2 and status != S.DEAD else 0
            parts = [] if status in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else partitions
            specs.append({"transactionalId": f"coordinator-{tv}-{status.name}", "via": "broker", "tv": tv,
                          "producerId": 5000 + status, "prevProducerId": 4000, "nextProducerId": 6000,
                          "producerEpoch": 10 + status, "lastProducerEpoch": 9, "txnTimeoutMs": 45_000,
                          "state": int(status), "partitions": parts, "txnStartTimestamp": 100 + status,
                          "txnLastUpdateTimestamp": 200 + status, "clientTransactionVersion": client_tv})
            expected.append((tv, status, TransactionLogValue(5000 + status, -1, -1, 10 + status, 45_000, int(status),
                                                             (), 200 + status, 100 + status, client_tv), parts))
    for (tv, status, value, parts), (key, data) in zip(expected, probe.write(specs), strict=True):
        assert decode_key(key) == TransactionKey(f"coordinator-{tv}-{status.name}")
        assert int.from_bytes(data[:2], "big") == (1 if tv >= 1 else 0)
        decoded = decode_value(data)
        assert replace(decoded, partitions=()) == value
        assert sorted((topic, p) for topic, ids in decoded.partitions for p in ids) == sorted(map(tuple, parts))
        assert len({topic for topic, _ in decoded.partitions}) == len(decoded.partitions)  # one entry per topic
        null = data[PARTITIONS_AT:PARTITIONS_AT + (1 if tv else 4)] == (b"\x00" if tv else b"\xff\xff\xff\xff")
        assert null == (status == S.EMPTY)
        assert encode_value(decoded, 1 if tv else 0) == data


@pytest.mark.parametrize("tid, data, what", [
    ("cut", encode_value(CASES[2][1])[:-7], "unreadable value"),
    ("version", b"\x00\x02" + encode_value(CASES[2][1])[2:], "value version 2"),
    ("status", encode_value(CASES[3][1])[:16] + b"\x09" + encode_value(CASES[3][1])[17:], "transaction status 9"),
    ("topic", encode_value(CASES[5][1], 0)[:PARTITIONS_AT] + b"\x00\x00\x00\x01\xff\xff" + bytes(4 + 16),
     "UnexpectedNull"),
])
def test_values_python_refuses_fail_kafkas_loader_too(probe: Probe, tid: str, data: bytes, what: str) -> None:
    with pytest.raises(TransactionRecordError, match=what):
        decode_value(data)
    (read,) = probe.read([(encode_key(TransactionKey(tid)), data)])
    assert set(read["broker"]) == {"transactionalId", "error"}, read["broker"]
    print(f"{tid}: Python: {what}; Kafka's loader: {read['broker']['error']}")


def test_a_key_of_another_record_type_is_refused_and_kafkas_loader_skips_it(probe: Probe) -> None:
    key = b"\x00\x01" + encode_key(TransactionKey("tx"))[2:]
    with pytest.raises(TransactionRecordError, match="key type 1 is not a transaction log key"):
        decode_key(key)
    (read,) = probe.read([(key, encode_value(CASES[0][1]))])
    assert read["broker"] == {"unknownKeyVersion": 1}


# --------------------------------------------------------------------------- a real broker's records


def transaction_state(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of the broker's __transaction_state, raw."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-state-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        metadata = consumer.list_topics(TRANSACTION_STATE_TOPIC, timeout=30)
        partitions = sorted(metadata.topics[TRANSACTION_STATE_TOPIC].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TRANSACTION_STATE_TOPIC, p), timeout=30)[1]
                for p in partitions}
        pending = {p for p in partitions if ends[p] > 0}
        consumer.assign([TopicPartition(TRANSACTION_STATE_TOPIC, p, OFFSET_BEGINNING) for p in pending])
        records: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while pending:
            assert time.monotonic() < deadline, f"__transaction_state partitions {pending} not read to their ends"
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                continue
            records.append((message.key(), message.value()))
            if message.offset() + 1 >= ends[message.partition()]:
                pending.discard(message.partition())
        return records
    finally:
        consumer.close()


def collapse(statuses: Sequence[int]) -> list[int]:
    return [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]


def test_a_brokers_own_records_of_real_transactions_decode_as_kafka_decodes_them(kafka, probe: Probe) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic_a, topic_b = f"txn-a-{suffix}", f"txn-b-{suffix}"
    kafka.create_topics([(topic_a, 2, {}), (topic_b, 1, {})])
    java_id, rdkafka_id = f"java-{suffix}", f"librdkafka-{suffix}"
    events = probe.run(["produce", kafka.bootstrap_servers, java_id, topic_a, topic_b])
    assert events == [{"event": "committed"}, {"event": "aborted"}]
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": rdkafka_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for topic, partition in ((topic_a, 0), (topic_a, 1), (topic_b, 0)):
        producer.produce(topic, b"v", partition=partition)
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce(topic_a, b"aborted", partition=0)
    producer.flush(60)
    producer.abort_transaction(60)
    producer.close()

    # the coordinator writes CompleteAbort once the markers are written, after abortTransaction returns
    deadline = time.monotonic() + 60
    while True:
        records = transaction_state(kafka.bootstrap_servers)
        ours: dict[str, list[tuple[bytes, bytes]]] = {java_id: [], rdkafka_id: []}
        for key, value in records:
            transactional_id = decode_key(key).transactional_id  # every key on the topic is a TransactionLogKey
            if transactional_id in ours and value is not None:
                ours[transactional_id].append((key, value))
        last = {tid: decode_value(rs[-1][1]).transaction_status if rs else None for tid, rs in ours.items()}
        if all(status == S.COMPLETE_ABORT for status in last.values()):
            break
        assert time.monotonic() < deadline, f"no CompleteAbort for both producers: {last}"
        time.sleep(1)

    for tid, rs in ours.items():
        values = [decode_value(value) for _, value in rs]
        for (_key, value), decoded, read in zip(rs, values, probe.read(rs), strict=True):
            version = int.from_bytes(value[:2], "big")
            assert version == 1, f"{tid}: a new 4.x cluster (transaction.version 2) writes v1 values"
            assert_kafka_reads(read, tid, decoded, version)
            assert encode_value(decoded) == value  # Python writes what the coordinator wrote
            assert (value[PARTITIONS_AT] == 0) == (decoded.transaction_status == S.EMPTY)  # null only for Empty
        assert collapse([v.transaction_status for v in values]) == [
            S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT], tid
        committed = next(v for v in values if v.transaction_status == S.PREPARE_COMMIT)
        assert sorted((t, p) for t, ids in committed.partitions for p in ids) == sorted(
            [(topic_a, 0), (topic_a, 1), (topic_b, 0)]), tid
        aborted = next(v for v in values if v.transaction_status == S.PREPARE_ABORT)
        assert aborted.partitions == ((topic_a, (0,)),), tid
        assert all(v.partitions == () for v in values if v.transaction_status in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
        assert len({v.producer_id for v in values}) == 1, tid
        assert {(v.previous_producer_id, v.next_producer_id, v.next_producer_epoch) for v in values} == {(-1, -1, -1)}
    java = [decode_value(value) for _, value in ours[java_id]]
    rdkafka = [decode_value(value) for _, value in ours[rdkafka_id]]
    # InitProducerId's Empty record has no ClientTransactionVersion (tag 2) and no start time yet; then the Java
    # 4.2.1 client's transactions are v2 (KIP-890: its records carry the tag, every commit and abort bumps the
    # epoch), librdkafka's are not (no tag, one epoch)
    assert (java[0].client_transaction_version, java[0].start_ms, rdkafka[0].start_ms) == (0, -1, -1)
    assert {v.client_transaction_version for v in java[1:]} == {2}
    assert {v.client_transaction_version for v in rdkafka} == {0}
    epochs = [v.producer_epoch for v in java if v.transaction_status in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
    assert epochs == [java[0].producer_epoch + 1, java[0].producer_epoch + 2]
    assert {v.producer_epoch for v in rdkafka} == {rdkafka[0].producer_epoch}
