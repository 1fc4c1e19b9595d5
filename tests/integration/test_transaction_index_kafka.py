"""Proof that `storage.transaction_index` is Kafka's `.txnindex`: Apache Kafka's own `TransactionIndex`
(from `.jvm/kafka`, driven by `java/TxnIndexProbe.java`) and the Python module read each other's files as
the same entries, answer every fetch range's `collectAbortedTxns` alike, and, given the same operations,
write byte-identical files and fail the same ones with the same messages. Kafka's
`kafka.tools.DumpLogSegments` prints the entries of a `.txnindex` the module wrote. Where the module is
stricter than Kafka (the module's docstring), Kafka's own behaviour is shown beside it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from embedded.local_kafka import (
    KAFKA_JARS_DIR,
    java_executable,
    kafka_classpath,
    run_kafka_tool,
    tools_log4j_config,
)
from storage.errors import KafkaStorageError
from storage.file_names import TXN_INDEX_FILE_SUFFIX, segment_file_name
from storage.index import CorruptIndexError, InvalidOffsetError
from storage.transaction_index import TOTAL_SIZE, AbortedTxn, TransactionIndex
from tests.integration.group_members import compile_java_client

pytestmark = pytest.mark.integration

PROBE_SOURCE = Path(__file__).parent / "java" / "TxnIndexProbe.java"
PROBE_CLASS = "TxnIndexProbe"
JAVA_TIMEOUT_S = 180.0
# the Python error each Kafka exception corresponds to
KAFKA_ERRORS = {
    "java.lang.IllegalArgumentException": InvalidOffsetError,
    "org.apache.kafka.storage.internals.log.CorruptIndexException": CorruptIndexError,
}
INT64_MAX = 2**63 - 1
# overlapping transactions of several producers, last stable offsets behind and ahead of the next ones,
# extreme producer ids
TXNS = [
    AbortedTxn(1000, 100, 105, 100),
    AbortedTxn(1001, 101, 112, 101),
    AbortedTxn(-1, 108, 120, 106),
    AbortedTxn(INT64_MAX, 115, 131, 125),
    AbortedTxn(1002, 140, 141, 140),
    AbortedTxn(1003, 90, 160, 150),
    AbortedTxn(-(2**63), 170, 175, 176),
]
_DUMPED = re.compile(r"^version: (-?\d+) producerId: (-?\d+) firstOffset: (-?\d+) lastOffset: (-?\d+) "
                     r"lastStableOffset: (-?\d+)$")


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_java_client(tmp_path_factory.mktemp("txn-index-probe"), PROBE_SOURCE)


def index_path(directory: Path, base: int, name: str = "") -> Path:
    folder = directory / name if name else directory
    folder.mkdir(parents=True, exist_ok=True)
    return folder / segment_file_name(base, TXN_INDEX_FILE_SUFFIX)


def kafka(classes: Path, script: Sequence[str]) -> list[dict[str, Any]]:
    """Run the script through Kafka's `TransactionIndex`: one outcome a line."""
    cmd = [java_executable(), "-Xmx128m", f"-Dlog4j2.configurationFile={tools_log4j_config()}",
           "-cp", os.pathsep.join([str(classes), kafka_classpath(KAFKA_JARS_DIR)]), PROBE_CLASS]
    done = subprocess.run(cmd, input="\n".join(script) + "\n", capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, f"{PROBE_CLASS} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["op"] for line in lines] == [s.split()[0] for s in script], done.stdout
    return lines


def python(script: Sequence[str]) -> list[dict[str, Any]]:
    """The same script through `TransactionIndex`, answered in the probe's terms."""
    index: TransactionIndex | None = None
    out: list[dict[str, Any]] = []

    def rows(txns: Sequence[AbortedTxn]) -> list[list[int]]:
        return [[0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset] for t in txns]

    for line in script:
        op, *a = line.split()
        args = [int(x) for x in a[1:]] if op == "open" else [int(x) for x in a]
        result: dict[str, Any] = {"op": op}
        try:
            if op == "open":
                index = TransactionIndex(Path(a[0]), args[0])
                continue
            assert index is not None
            if op == "append":
                index.append(AbortedTxn(*args))
            elif op == "all":
                result["txns"] = rows(index.all_aborted())
            elif op == "collect":
                found = index.collect_aborted(*args)
                result["txns"], result["complete"] = rows(found.aborted_transactions), found.is_complete
            elif op == "truncate":
                index.truncate_to(*args)
            elif op == "reset":
                index.reset()
            elif op == "sanity":
                index.sanity_check()
            elif op == "flush":
                index.flush()
            elif op == "close":
                index.close()
            elif op == "delete":
                result["deleted"] = index.delete()
            else:
                raise AssertionError(f"unknown operation {op}")
        except (KafkaStorageError, InvalidOffsetError) as e:
            result["error"], result["message"] = type(e), str(e)
        finally:
            out.append(result)
    return out


def comparable(outcomes: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """Outcomes with the file's path left out and Kafka's exception classes as the Python ones."""
    seen = []
    for o in outcomes:
        o = dict(o)
        if "error" in o:
            o["error"] = KAFKA_ERRORS.get(o["error"], o["error"])
            o["message"] = o["message"].replace(str(path.absolute()), "<index>")
        seen.append(o)
    return seen


def append_script(path: Path, start_offset: int, txns: Sequence[AbortedTxn]) -> list[str]:
    return [f"open {path} {start_offset}",
            *(f"append {t.producer_id} {t.first_offset} {t.last_offset} {t.last_stable_offset}" for t in txns),
            "flush", "close"]


def ranges(txns: Sequence[AbortedTxn]) -> list[tuple[int, int]]:
    """Fetch ranges around every boundary of the entries: each first, last and last stable offset, +-1."""
    points = sorted({p + d for t in txns for p in (t.first_offset, t.last_offset, t.last_stable_offset)
                     for d in (-1, 0, 1)} | {0, 10**6})
    return [(f, u) for f, u in itertools.product(points, points) if f <= u]


def read_script(path: Path, start_offset: int, txns: Sequence[AbortedTxn]) -> list[str]:
    return [f"open {path} {start_offset}", "all", "sanity", *(f"collect {f} {u}" for f, u in ranges(txns)), "close"]


def test_python_reads_what_kafka_wrote(classes, tmp_path):
    path = index_path(tmp_path, 90)
    assert all("error" not in o for o in kafka(classes, append_script(path, 90, TXNS)))
    assert path.read_bytes() == b"".join(t.encode() for t in TXNS)
    index = TransactionIndex(path, 90)
    assert index.all_aborted() == TXNS
    index.sanity_check()
    # Kafka and the module on Kafka's file: every range collected alike
    script = read_script(path, 90, TXNS)
    from_kafka = kafka(classes, script)
    assert comparable(from_kafka, path) == comparable(python(script), path)
    collected = [o for o in from_kafka if o["op"] == "collect"]
    assert len(collected) > 1000
    assert {o["complete"] for o in collected} == {True, False}
    assert {len(o["txns"]) for o in collected} >= set(range(len(TXNS) + 1))


def test_kafka_reads_what_python_wrote(classes, tmp_path):
    path = index_path(tmp_path, 90)
    index = TransactionIndex(path, 90)
    for txn in TXNS:
        index.append(txn)
    index.flush()
    index.close()
    script = read_script(path, 90, TXNS)
    from_kafka = kafka(classes, script)
    assert from_kafka[1]["txns"] == [[0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset]
                                     for t in TXNS]
    assert "error" not in from_kafka[2]  # Kafka's sanity check passes
    assert comparable(from_kafka, path) == comparable(python(script), path)


def test_sanity_check_fails_alike(classes, tmp_path):
    path = index_path(tmp_path, 90)
    with TransactionIndex(path, 90) as index:
        for txn in TXNS:
            index.append(txn)
    for start in (104, 105, 106, 160, 176):  # the entry whose last offset is below the start offset is named
        script = [f"open {path} {start}", "sanity", "close"]
        from_kafka = kafka(classes, script)
        if start <= 105:
            assert "error" not in from_kafka[1]
        else:
            assert from_kafka[1]["error"] == "org.apache.kafka.storage.internals.log.CorruptIndexException"
        assert comparable(from_kafka, path) == comparable(python(script), path)


def test_same_operations_same_files_same_errors(classes, tmp_path):
    """Appends in and out of order, truncations, a reset, a reopen: Kafka and the module agree on every
    outcome and leave identical bytes."""
    steps = [
        "all", "collect 0 1000",
        "append 7 100 105 100", "append 8 103 110 104", "append 9 111 111 105",
        "append 1 90 111 90",  # equal last offset: refused
        "append 1 90 109 90",  # smaller: refused
        "append -1 120 130 125", f"append {INT64_MAX} 131 140 131",
        "collect 0 1000", "collect 104 112", "collect 111 126", "collect 140 141", "sanity",
        "truncate 140",  # cuts at the entry ending at 140 (last offset >= 140)
        "all", "append 5 112 130 106",  # the entry ending at 130 is the last again: refused
        "append 5 112 135 106", "truncate 1000", "all", "flush", "close",
    ]
    reopened = ["append 6 136 150 140", "collect 100 150", "truncate 100", "all", "append 3 200 201 200",
                "reset", "all", "append 4 300 310 300", "append 4 311 320 300", "collect 0 1000", "sanity",
                "flush", "close"]
    results = {}
    for who in ("kafka", "python"):
        path = index_path(tmp_path, 100, who)
        script = [f"open {path} 100", *steps, f"open {path} 100", *reopened]
        outcomes = kafka(classes, script) if who == "kafka" else python(script)
        results[who] = (comparable(outcomes, path), path.read_bytes())
    assert results["kafka"] == results["python"]
    outcomes, data = results["python"]
    refused = [o for o in outcomes if "error" in o]
    assert [o["message"] for o in refused] == [
        "The last offset of appended transactions must increase sequentially, but 111 is not greater than "
        "current last offset 111 of index <index>",
        "The last offset of appended transactions must increase sequentially, but 109 is not greater than "
        "current last offset 111 of index <index>",
        "The last offset of appended transactions must increase sequentially, but 130 is not greater than "
        "current last offset 130 of index <index>",
    ]
    assert data == AbortedTxn(4, 300, 310, 300).encode() + AbortedTxn(4, 311, 320, 300).encode()


def test_dump_log_segments_prints_what_python_wrote(tmp_path):
    path = index_path(tmp_path, 90, "topic-0")
    with TransactionIndex(path, 90) as index:
        for txn in TXNS:
            index.append(txn)
    done = run_kafka_tool("kafka.tools.DumpLogSegments", ["--files", str(path)], timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Exception" not in done.stdout + done.stderr, done.stdout + done.stderr
    dumped = [tuple(int(g) for g in m.groups()) for line in done.stdout.splitlines() if (m := _DUMPED.match(line))]
    assert dumped == [(0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in TXNS], done.stdout


def test_where_python_is_stricter_than_kafka(classes, tmp_path):
    """The module's docstring, shown: Kafka reads only the version field's first byte, stops before a
    partial trailing entry and forgets the last offset of a reopened file; the module refuses all three."""
    good = b"".join(t.encode() for t in TXNS[:3])
    # a version field of 1 (bytes 00 01): Kafka reads version 0 and the entry; the module refuses the file
    low = index_path(tmp_path, 90, "low-version")
    low.write_bytes(good[:TOTAL_SIZE] + b"\x00\x01" + good[TOTAL_SIZE + 2:])
    from_kafka = kafka(classes, [f"open {low} 90", "all", "sanity"])
    assert [row[0] for row in from_kafka[1]["txns"]] == [0, 0, 0] and "error" not in from_kafka[2]
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1 in transaction index"):
        TransactionIndex(low, 90).all_aborted()
    # bytes 01 00: both refuse (Kafka's version is that first byte, 1; the module's the int16, 256)
    high = index_path(tmp_path, 90, "high-version")
    high.write_bytes(good[:TOTAL_SIZE] + b"\x01\x00" + good[TOTAL_SIZE + 2:])
    from_kafka = kafka(classes, [f"open {high} 90", "all", "sanity"])
    for outcome in from_kafka[1:]:
        assert outcome["error"] == "org.apache.kafka.common.KafkaException"
        assert outcome["message"] == (f"Unexpected aborted transaction version 1 in transaction index {high.absolute()}, "
                                      "current version is 0")
    with pytest.raises(CorruptIndexError, match=f"version 256 in transaction index {high.absolute()}, current"):
        TransactionIndex(high, 90).sanity_check()
    # a torn last entry: Kafka reads the whole ones before it; the module refuses the file
    torn = index_path(tmp_path, 90, "torn")
    torn.write_bytes(good[:-5])
    from_kafka = kafka(classes, [f"open {torn} 90", "all", "sanity"])
    assert from_kafka[1]["txns"] == [[0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset]
                                     for t in TXNS[:2]]
    assert "error" not in from_kafka[2]
    with pytest.raises(CorruptIndexError, match=f"{torn.name} is corrupt, found {len(good) - 5} bytes"):
        TransactionIndex(torn, 90).sanity_check()
    # reopened: Kafka appends an entry ending before the file's last one; the module refuses it
    for who in ("kafka", "python"):
        path = index_path(tmp_path, 90, f"reopened-{who}")
        path.write_bytes(good)
        script = [f"open {path} 90", "append 5 91 95 91", "all"]
        outcome = kafka(classes, script)[1] if who == "kafka" else python(script)[1]
        if who == "kafka":
            assert "error" not in outcome and len(path.read_bytes()) == len(good) + TOTAL_SIZE
        else:
            assert outcome["error"] is InvalidOffsetError and path.read_bytes() == good
            assert "but 95 is not greater than current last offset 120" in outcome["message"]
