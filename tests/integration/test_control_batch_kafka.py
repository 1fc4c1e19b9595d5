"""control_batch.py against Kafka's own code (kafka-clients from `.jvm/kafka`, no broker):
`java/EndTxnMarkerBytes.java`, compiled with the JDK's javac, writes markers with
`MemoryRecords.withEndTransactionMarker` and reads batches with `EndTransactionMarker.deserialize`.
The Python batches must be Kafka's bytes exactly, Python must read Kafka's bytes back to the same
marker, the builder must refuse what Kafka refuses with Kafka's text, and the reader must accept and
refuse the odd keys and values Kafka's reader accepts and refuses."""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath
from tests.integration.group_members import compile_java_client
from validators.codec.control_batch import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker,
    encode_control_key,
    encode_end_txn_value,
    parse_end_txn_marker,
)
from validators.codec.record_batch import build_record_batch
from validators.codec.records import Record

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "EndTxnMarkerBytes.java"
JAVA_TIMEOUT_S = 120.0
T = 1700000000000
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# (base offset, timestamp, partition leader epoch, producer id, producer epoch, type, coordinator epoch)
Case = tuple[int, int, int, int, int, ControlRecordType, int]
CASES: list[Case] = [
    (0, T, -1, 1000, 0, ControlRecordType.COMMIT, 0),
    (42, T, 7, 1000, 3, ControlRecordType.ABORT, 5),
    (0, -1, -1, 1, 0, ControlRecordType.COMMIT, 1),  # NO_TIMESTAMP: base and max -1
    (0, 0, 0, 0, 0, ControlRecordType.ABORT, 0),
    (LONG_MAX, LONG_MAX, INT32_MAX, LONG_MAX, 32767, ControlRecordType.COMMIT, INT32_MAX),
    (-5, T + 1, INT32_MIN, LONG_MIN, -32768, ControlRecordType.ABORT, INT32_MIN),
    (123_456_789_012, 1, 12, 987_654_321, -7, ControlRecordType.COMMIT, -1),
    (1 << 31, T, 1 << 20, 2, 1, ControlRecordType.ABORT, 1 << 30),
    (7, 1 << 40, 3, 5_000_000_000, 15, ControlRecordType.COMMIT, 300),
]


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_java_client(tmp_path_factory.mktemp("end-txn-marker"), SOURCE)


def run_kafka(classes: Path, lines: Sequence[str]) -> list[str]:
    """One JVM for all `lines`; one output line each."""
    cmd = [java_executable(), "-Xmx128m", "-cp", os.pathsep.join([str(classes), kafka_classpath(KAFKA_JARS_DIR)]),
           "EndTxnMarkerBytes"]
    done = subprocess.run(cmd, input="".join(f"{line}\n" for line in lines), capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, f"EndTxnMarkerBytes failed:\n{done.stdout}\n{done.stderr}"
    out = done.stdout.splitlines()
    assert len(out) == len(lines), f"{len(lines)} cases, {len(out)} answers:\n{done.stdout}\n{done.stderr}"
    return out


def build_line(case: Case) -> str:
    offset, timestamp, leader_epoch, producer_id, producer_epoch, control_type, coordinator_epoch = case
    return (f"build {offset} {timestamp} {leader_epoch} {producer_id} {producer_epoch} {control_type.name} "
            f"{coordinator_epoch}")


def python_build(case: Case) -> bytes:
    offset, timestamp, leader_epoch, producer_id, producer_epoch, control_type, coordinator_epoch = case
    return build_end_txn_marker(EndTransactionMarker(control_type, coordinator_epoch), producer_id=producer_id,
                                producer_epoch=producer_epoch, base_offset=offset, timestamp=timestamp,
                                partition_leader_epoch=leader_epoch)


def test_python_writes_kafkas_bytes_and_reads_them_back(classes: Path) -> None:
    answers = run_kafka(classes, [build_line(case) for case in CASES])
    for case, answer in zip(CASES, answers, strict=True):
        assert answer.startswith("ok "), f"{case}: Kafka refused: {answer}"
        kafka = bytes.fromhex(answer[3:])
        assert len(kafka) == 78, case
        assert python_build(case) == kafka, f"{case}:\nkafka  {kafka.hex()}\npython {python_build(case).hex()}"
        assert parse_end_txn_marker(kafka) == EndTransactionMarker(case[5], case[6]), case


def test_kafka_reads_python_markers(classes: Path) -> None:
    answers = run_kafka(classes, [f"parse {python_build(case).hex()}" for case in CASES])
    for case, answer in zip(CASES, answers, strict=True):
        assert answer == f"ok {case[5].name} {case[6]}", case


# (producer id, timestamp, producer epoch): refused by both, with the first of Kafka's checks to fail
REFUSED = [
    (-1, T, 0),
    (-1, -2, -1),
    (5, -2, 0),
    (5, LONG_MIN, -1),
    (5, T, -1),
    (5, -1, -1),
]


def test_builder_refuses_what_kafka_refuses_with_kafkas_text(classes: Path) -> None:
    cases: list[Case] = [(0, ts, -1, pid, epoch, ControlRecordType.COMMIT, 0) for pid, ts, epoch in REFUSED]
    answers = run_kafka(classes, [build_line(case) for case in cases])
    for case, answer in zip(cases, answers, strict=True):
        prefix = "error java.lang.IllegalArgumentException: "
        assert answer.startswith(prefix), f"{case}: {answer}"
        with pytest.raises(ValueError) as refused:
            python_build(case)
        assert str(refused.value) == answer[len(prefix):], case


def control_batch(key: bytes | None, value: bytes | None) -> bytes:
    """A valid transactional control batch whose one record has `key` and `value` verbatim."""
    return build_record_batch([Record(0, 0, key, value)], producer_id=1000, producer_epoch=3, base_timestamp=T,
                              is_transactional=True, is_control=True)


COMMIT_KEY = encode_control_key(ControlRecordType.COMMIT)
ODD_RECORDS: list[tuple[str, bytes | None, bytes | None]] = [
    ("plain", COMMIT_KEY, encode_end_txn_value(9)),
    ("key-version-1", b"\x00\x01\x00\x00", encode_end_txn_value(9)),
    ("key-version-max", b"\x7f\xff\x00\x01", encode_end_txn_value(9)),
    ("key-trailing-bytes", COMMIT_KEY + b"\xff\xff\xff", encode_end_txn_value(9)),
    ("key-version-negative", b"\xff\xff\x00\x01", encode_end_txn_value(9)),
    ("key-3-bytes", b"\x00\x00\x00", encode_end_txn_value(9)),
    ("key-empty", b"", encode_end_txn_value(9)),
    ("key-null", None, encode_end_txn_value(9)),
    ("type-leader-change", struct.pack(">hh", 0, 2), encode_end_txn_value(9)),
    ("type-kraft-voters", struct.pack(">hh", 0, 6), encode_end_txn_value(9)),
    ("type-99", struct.pack(">hh", 0, 99), encode_end_txn_value(9)),
    ("type-negative", struct.pack(">hh", 0, -1), encode_end_txn_value(9)),
    ("value-version-1", COMMIT_KEY, b"\x00\x01\x00\x00\x00\x09"),
    ("value-trailing-bytes", COMMIT_KEY, encode_end_txn_value(-9) + b"\x00\x00"),
    ("value-version-negative", COMMIT_KEY, b"\x80\x00\x00\x00\x00\x09"),
    ("value-5-bytes", COMMIT_KEY, b"\x00\x00\x00\x00\x09"),
    ("value-1-byte", COMMIT_KEY, b"\x00"),
    ("value-empty", COMMIT_KEY, b""),
    ("value-null", COMMIT_KEY, None),
]


def test_reader_accepts_and_refuses_what_kafkas_reader_does(classes: Path) -> None:
    batches = [control_batch(key, value) for _, key, value in ODD_RECORDS]
    answers = run_kafka(classes, [f"parse {batch.hex()}" for batch in batches])
    accepted = []
    for (name, _, _), batch, answer in zip(ODD_RECORDS, batches, answers, strict=True):
        try:
            marker = parse_end_txn_marker(batch)
        except ValueError as e:
            assert answer.startswith("error "), f"{name}: Kafka read {answer}, Python refused: {e}"
        else:
            assert answer == f"ok {marker.control_type.name} {marker.coordinator_epoch}", f"{name}: {answer}"
            accepted.append(name)
    # the forward-compatible reads both sides accept
    assert accepted == ["plain", "key-version-1", "key-version-max", "key-trailing-bytes", "value-version-1",
                        "value-trailing-bytes"]
