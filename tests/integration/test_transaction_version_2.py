"""Transaction version 2 (KIP-890) through the front door with Kafka's Java 4.2 clients, beside a real Kafka 4.2
broker doing the same: the door finalizes `transaction.version` 2, so the Java producer sends no
AddPartitionsToTxn and no AddOffsetsToTxn (the door adds its partitions and its group's offsets partition on its
behalf), ends each transaction with EndTxn v5 and runs the next one at the epoch it answers; each transaction's
markers carry that bumped epoch, and a read_committed consumer never reads an aborted record."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from contract.transaction_version import TransactionVersion
from embedded.local_kafka import KAFKA_JARS_DIR, LocalKafka, java_executable, kafka_classpath
from front_door.network.client import decode_response, encode_request
from storage.file_names import partition_dir
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.group_members import client_log_config, compile_java_client
from tests.integration.test_front_door_java import SENT_REQUEST
from tests.integration.test_transactions import (
    JAVA_CLIENTS,
    TOPICS,
    _read_settled,
    _transactions_tool,
    _wait_stable,
)
from validators.codec.control_batch import ControlRecordType, parse_end_txn_marker
from validators.codec.record_batch import parse_header
from validators.transaction_state import TransactionState

pytestmark = pytest.mark.integration

TRANSACTIONS, RECORDS = 6, 10
ABORTED = {i for i in range(TRANSACTIONS) if i % 3 == 1}  # TransactionalClients aborts these


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config, topics=TOPICS) as running:
        yield running


def _run_clients(classes: Path, bootstrap: str, topic: str, transactional_id: str,
                 group: str) -> tuple[list[str], dict[str, set[int]]]:
    """The values the read_committed consumer read, and the versions of each request the clients sent (their
    NetworkClient's log)."""
    log_file = classes.parent / f"{transactional_id}.log"
    config = log_file.with_suffix(".xml")
    config.write_text(client_log_config(log_file))
    done = subprocess.run([java_executable(), "-Xmx256m", f"-Dlog4j2.configurationFile={config}", "-cp",
                           os.pathsep.join([str(classes), kafka_classpath(KAFKA_JARS_DIR)]),
                           "TransactionalClients", bootstrap, topic, "2", str(TRANSACTIONS), str(RECORDS),
                           transactional_id, group], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    versions: dict[str, set[int]] = defaultdict(set)
    for name, version, _node in SENT_REQUEST.findall(log_file.read_text()):
        versions[name].add(int(version))
    lines = done.stdout.splitlines()
    assert [line for line in lines if not line.startswith(("read ", "done "))] == [
        f"{'aborted' if i in ABORTED else 'committed'} {i}" for i in range(TRANSACTIONS)]
    read = [line.removeprefix("read ") for line in lines if line.startswith("read ")]
    assert not [v for v in read if int(v[1:v.index("-")]) in ABORTED]  # never an aborted record
    return read, versions


def _stored_batches(directory: Path) -> list[tuple[int, bool, bool]]:
    """(producer epoch, is a marker, commits) of each batch the partition's segments hold, in offset order."""
    batches = []
    for log in sorted(directory.glob("*.log")):
        data, at = log.read_bytes(), 0
        while at + 12 <= len(data):
            size = 12 + int.from_bytes(data[at + 8:at + 12], "big")
            batch = data[at:at + size]
            header = parse_header(batch)
            commits = header.is_control_batch and parse_end_txn_marker(batch).control_type is ControlRecordType.COMMIT
            batches.append((header.producer_epoch, header.is_control_batch, commits))
            at += size
    return batches


def _transaction_version_feature(bootstrap: str, version: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """ApiVersions `version` asked of the first bootstrap address: what it says of `transaction.version`,
    supported (min, max) and finalized (min level, max level)."""
    m = sys.modules[load_request_schema(18, version).__module__]
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(encode_request(18, version, 1, "tv2-test", m.ApiVersionsRequest(
            client_software_name="tv2-test", client_software_version="1")))
        reader = conn.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        _, answer = decode_response(18, version, reader.read(size))
    assert answer.finalized_features_epoch >= 0
    return ([(f.min_version, f.max_version) for f in answer.supported_features if f.name == "transaction.version"],
            [(f.min_version_level, f.max_version_level) for f in answer.finalized_features
             if f.name == "transaction.version"])


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


def _producer_epochs(bootstrap: str, topic: str, partition: int) -> list[tuple[str, str]]:
    """`kafka-transactions.sh describe-producers`: each producer's epoch and open transaction at the partition."""
    rows = _transactions_tool(bootstrap, "describe-producers", "--topic", topic, "--partition", str(partition))
    return [(row["ProducerEpoch"], row["CurrentTransactionStartOffset"]) for row in rows]


def test_kafkas_java_client_runs_transaction_version_2_through_the_door_as_on_kafka(
        door: RunningDoor, kafka: LocalKafka, tmp_path: Path) -> None:
    # ApiVersions says of transaction.version what the Kafka 4.2 broker says, in v3 and v4
    for version in (3, 4):
        assert _transaction_version_feature(door.bootstrap, version) == _transaction_version_feature(
            kafka.bootstrap_servers, version)
    assert _transaction_version_feature(door.bootstrap, 4) == ([(0, 2)], [(2, 2)])
    classes = compile_java_client(tmp_path, JAVA_CLIENTS)
    tid, group = f"tv2-{uuid.uuid4().hex[:6]}", f"tv2-etl-{uuid.uuid4().hex[:6]}"
    read, versions = _run_clients(classes, door.bootstrap, "orders", tid, group)
    expected = sorted(f"t{t}-{r}".encode() for t in range(TRANSACTIONS) if t not in ABORTED for r in range(RECORDS))
    assert set(read) <= {v.decode() for v in expected} and len(read) == len(set(read))
    assert _read_settled(door, "read_committed", expected) == expected

    # the Java client took transaction version 2: EndTxn v5, Produce v12+ and TxnOffsetCommit v5, and it added
    # no partition and no group itself
    assert (versions["END_TXN"], versions["TXN_OFFSET_COMMIT"], min(versions["PRODUCE"])) == ({5}, {5}, 13)
    assert "ADD_PARTITIONS_TO_TXN" not in versions and "ADD_OFFSETS_TO_TXN" not in versions
    requests = door.door.metrics.registry
    assert requests.get_sample_value("gateway_front_door_requests_total",
                                     {"api": "add_partitions_to_txn", "error": "NONE"}) is None
    assert requests.get_sample_value("gateway_front_door_requests_total",
                                     {"api": "add_offsets_to_txn", "error": "NONE"}) is None
    assert requests.get_sample_value("gateway_front_door_requests_total",
                                     {"api": "end_txn", "error": "NONE"}) == TRANSACTIONS
    assert door.door.context is not None and door.door.context.transactions is not None
    meta = door.door.context.transactions.describe(tid)
    assert meta is not None and meta.client_transaction_version is TransactionVersion.TV_2
    assert (meta.state, meta.producer_epoch) == (TransactionState.COMPLETE_COMMIT, TRANSACTIONS)

    # each transaction's batches at its epoch, its markers one above: the next transaction's epoch
    for partition in range(2):
        directory = partition_dir(door.segments_root, "orders", partition)
        _wait_stable(directory)
        batches = _stored_batches(directory)
        markers = [(epoch, commits) for epoch, control, commits in batches if control]
        assert markers == [(i + 1, i not in ABORTED) for i in range(TRANSACTIONS)]
        assert sorted({epoch for epoch, control, _ in batches if not control}) == list(range(TRANSACTIONS))
        data_epochs = [epoch for epoch, control, _ in batches if not control]
        assert data_epochs == sorted(data_epochs)  # a transaction's batches all before its markers
    # the group's offsets went with the transactions: the last committed one's
    assert _committed(door.bootstrap, group, "orders") == max(set(range(TRANSACTIONS)) - ABORTED) + 1

    # a real Kafka 4.2 broker, the same program: the same epochs at its partitions and the same offsets
    topic = f"tv2-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
    _, on_kafka = _run_clients(classes, kafka.bootstrap_servers, topic, f"{tid}-kafka", f"{group}-kafka")
    assert {name: on_kafka[name] for name in ("END_TXN", "TXN_OFFSET_COMMIT", "PRODUCE")} == {
        name: versions[name] for name in ("END_TXN", "TXN_OFFSET_COMMIT", "PRODUCE")}
    assert "ADD_PARTITIONS_TO_TXN" not in on_kafka and "ADD_OFFSETS_TO_TXN" not in on_kafka
    for partition in range(2):
        assert _producer_epochs(kafka.bootstrap_servers, topic, partition) == [(str(TRANSACTIONS), "None")]
        assert _producer_epochs(door.bootstrap, "orders", partition) == [(str(TRANSACTIONS), "None")]
    assert _committed(kafka.bootstrap_servers, f"{group}-kafka", topic) == _committed(door.bootstrap, group, "orders")
