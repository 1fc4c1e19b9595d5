"""The front door with the real Apache Kafka Java client (kafka-clients from `.jvm/kafka`), on the real
broker and a running gateway query.

`java/FrontDoorProbe.java` is compiled with the JDK's `javac` once per module and run once per step: a
`KafkaProducer` with its defaults (idempotence on, acks=all) whose `RecordMetadata` and exceptions are
checked against segment storage (KIP-32: the offset is the gateway's, `timestamp()` is the gateway's
stamp on a LogAppendTime topic and the producer's own on a CreateTime topic), a record outside a topic's
timestamp window (KIP-937) that fails with Kafka's `InvalidTimestampException` and text and is
dead-lettered, not appended, and a `KafkaConsumer` with `assign()` reading the records back.
The client's debug log says which API versions it chose and which node each request went to; the
tests check each version is one the front door advertises, that produce and fetch named topics by id
(Produce v13, Fetch v13+), and that the client sent each partition's requests to the front-door node
leading it, every node getting its share.
"""

from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath
from front_door.api_keys import ApiKey
from front_door.apis.api_versions import ADVERTISED
from front_door.cluster.leadership import leader, node_ids
from storage.file_records import split_batches
from storage.log_reader import ConsumerRecord, batch_records, read
from streaming.config import GatewayConfig
from tests.integration.front_door_harness import (
    CAPPED_MAX_MESSAGE_BYTES,
    FRONT_DOOR_TOPICS,
    HOUR_MS,
    LARGE_TOPICS,
    running_front_door,
)
from tests.integration.gateway_io import read_all
from tests.integration.group_members import client_log_config, compile_java_client

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
PROBE_SOURCE = Path(__file__).parent / "java" / "FrontDoorProbe.java"
PROBE_CLASS = "FrontDoorProbe"
JAVA_TIMEOUT_S = 180.0  # beyond the probe's own delivery timeout (120 s)
INVALID_TIMESTAMP_EXCEPTION = "org.apache.kafka.common.errors.InvalidTimestampException"
RECORD_TOO_LARGE_EXCEPTION = "org.apache.kafka.common.errors.RecordTooLargeException"
KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"
# Sender.failBatch: what the other records of a batch with record errors fail with (Kafka's spelling)
PART_OF_INVALID_BATCH = "Failed to append record because it was part of a batch which had one more more invalid records"
# NetworkClient at DEBUG: "Sending PRODUCE request with header RequestHeader(apiKey=PRODUCE, apiVersion=13, ...)
# and timeout 60000 to node 3: ..." (node -1: a bootstrap address before Metadata named the nodes)
SENT_REQUEST = re.compile(r"Sending (\w+) request with header RequestHeader\(apiKey=\w+, apiVersion=(\d+)"
                          r"[^)]*\) and timeout -?\d+ to node (-?\d+)")
# LogValidator's per-record INVALID_TIMESTAMP text (`LogValidator.validateTimestamp`, KIP-937)
OUT_OF_RANGE = re.compile(
    r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
    r"The timestamp should be within \[(-?\d+), (-?\d+)\]"
)
# TransactionManager, INFO: the producer id and epoch an idempotent producer uses from then on
PRODUCER_ID_SET = re.compile(r"ProducerId set to (-?\d+) with epoch (-?\d+)")
TOPIC_ID_VERSIONS = 13  # Produce v13 and Fetch v13+ name topics by id (KIP-516)


@dataclass(frozen=True)
class Send:
    topic: str
    partition: int
    timestamp: int
    key: str
    value: str


@dataclass(frozen=True)
class ProbeRun:
    lines: list[dict[str, Any]]
    versions: dict[str, set[int]]  # request name (Kafka's ApiKeys) -> versions the client sent
    nodes: dict[str, set[int]]  # request name -> node ids the client sent it to
    log: str


class Probe:
    """Runs the compiled FrontDoorProbe with kafka-clients and its dependencies on the classpath."""

    def __init__(self, classes: Path, work: Path) -> None:
        self.classes = classes
        self.work = work
        self.runs = 0

    def run(self, args: Sequence[str], stdin: str = "") -> ProbeRun:
        self.runs += 1
        log_file = self.work / f"probe-{self.runs}.log"
        config = self.work / f"log4j2-{self.runs}.xml"
        config.write_text(client_log_config(log_file))
        cmd = [java_executable(), "-Xmx256m", f"-Dlog4j2.configurationFile={config}",
               "-cp", os.pathsep.join([str(self.classes), kafka_classpath(KAFKA_JARS_DIR)]), PROBE_CLASS, *args]
        try:
            done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"{PROBE_CLASS} {' '.join(args)} did not finish in {JAVA_TIMEOUT_S} s\nstderr:\n{e.stderr!r}\n"
                        f"client log {log_file} (tail):\n{_tail(log_file.read_text() if log_file.exists() else '')}")
        log_text = log_file.read_text() if log_file.exists() else ""
        assert done.returncode == 0, (
            f"{PROBE_CLASS} {' '.join(args)} exited {done.returncode}\nstdout:\n{done.stdout}\n"
            f"stderr:\n{done.stderr}\nclient log {log_file} (tail):\n{_tail(log_text)}"
        )
        versions: dict[str, set[int]] = defaultdict(set)
        nodes: dict[str, set[int]] = defaultdict(set)
        for name, version, node in SENT_REQUEST.findall(log_text):
            versions[name].add(int(version))
            nodes[name].add(int(node))
        return ProbeRun([json.loads(line) for line in done.stdout.splitlines() if line.strip()], dict(versions),
                        dict(nodes), log_text)

    def produce(self, bootstrap: str, groups: Sequence[Sequence[Send]], settings: Sequence[str] = ()) -> tuple[
            list[dict[str, Any]], ProbeRun]:
        """Each group is sent, then flushed (one batch per partition); the outcomes in send order. `settings`:
        further producer settings, NAME=VALUE."""
        script = []
        for group in groups:
            for s in group:
                script.append("\t".join(["send", s.topic, str(s.partition), str(s.timestamp), s.key, s.value]))
            script.append("flush")
        run = self.run(["produce", bootstrap, *settings], "\n".join(script) + "\n")
        sent = sum(len(g) for g in groups)
        assert [line["i"] for line in run.lines] == list(range(sent)), run.lines
        return run.lines, run

    def consume(self, bootstrap: str, counts: dict[tuple[str, int], int]) -> ProbeRun:
        return self.run(["consume", bootstrap, *(f"{t}:{p}:{n}" for (t, p), n in counts.items())])

    def leaders(self, bootstrap: str, topic: str) -> ProbeRun:
        return self.run(["leaders", bootstrap, topic])


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    work = tmp_path_factory.mktemp("java-probe")
    return Probe(compile_java_client(work, PROBE_SOURCE), work)


def stored(root: Path, topic: str, partition: int) -> list[ConsumerRecord]:
    try:
        return read(root, topic, partition, 0, 1000)
    except FileNotFoundError:  # nothing was ever appended to the partition
        return []


def by_partition(sends: Sequence[Send], outcomes: Sequence[dict[str, Any]]) -> Iterator[
        tuple[tuple[str, int], list[tuple[Send, dict[str, Any]]]]]:
    groups: dict[tuple[str, int], list[tuple[Send, dict[str, Any]]]] = defaultdict(list)
    for s, o in zip(sends, outcomes, strict=True):
        groups[(s.topic, s.partition)].append((s, o))
    yield from groups.items()


def assert_spoke_advertised_versions(*runs: ProbeRun) -> None:
    """Every request in a version the front door advertises; produce and fetch by topic id."""
    for run in runs:
        assert set(run.versions) <= {ApiKey(k).name for k in ADVERTISED}, run.versions
        for name, versions in run.versions.items():
            low, high = ADVERTISED[ApiKey[name]]
            assert all(low <= v <= high for v in versions), (name, versions)
            if name in ("PRODUCE", "FETCH"):
                assert min(versions) >= TOPIC_ID_VERSIONS, (name, versions)


# ============================================================================== KIP-32 offsets and timestamps


def test_java_producer_and_consumer_get_the_gateways_offsets_and_kip32_timestamps(
    spark: SparkSession, gateway_config: GatewayConfig, probe: Probe
) -> None:
    create_ms = int(time.time() * 1000) - DAY_MS  # a day old: inside "ct"'s window (no `before` limit)

    def sends(tag: str, layout: dict[tuple[str, int], int], first_ts: int) -> list[Send]:
        return [Send(t, p, first_ts + i, f"{tag}-{t}-{p}-k{i}", f"{tag}-{t}-{p}-v{i}")
                for (t, p), n in layout.items() for i in range(n)]

    first = sends("a", {("ct", 0): 3, ("ct", 1): 2, ("lat", 0): 3, ("lat", 1): 1}, create_ms)
    second = sends("b", {("ct", 0): 2, ("lat", 0): 2, ("lat", 1): 1}, create_ms + 1000)
    all_sends = first + second

    with running_front_door(spark, gateway_config) as door:
        outcomes, produced = probe.produce(door.bootstrap, [first, second])
        root = door.segments_root
        counts = {(t, p): len(stored(root, t, p)) for t in ("ct", "lat") for p in (0, 1)}
        consumed = probe.consume(door.bootstrap, counts)

    assert all("error" not in o for o in outcomes), outcomes
    assert counts == {("ct", 0): 5, ("ct", 1): 2, ("lat", 0): 5, ("lat", 1): 2}
    metadata: dict[tuple[str, int, int], dict[str, Any]] = {}
    for (topic, partition), pairs in by_partition(all_sends, outcomes):
        records = stored(root, topic, partition)
        # offsets: the gateway's, contiguous from 0 in send order, and as stored
        assert [o["offset"] for _, o in pairs] == list(range(len(pairs))) == [r.offset for r in records]
        for (s, o), r in zip(pairs, records, strict=True):
            assert (o["topic"], o["partition"]) == (topic, partition)
            assert (r.key, r.value) == (s.key.encode(), s.value.encode())
            assert r.create_time == s.timestamp  # the producer's clock is kept in both topic types
            if topic == "lat":
                # KIP-32: the broker's stamp, not the CreateTime the producer set
                assert r.timestamp_type == "LogAppendTime"
                assert o["timestamp"] == r.log_append_time == r.timestamp != s.timestamp
            else:
                assert r.timestamp_type == "CreateTime"
                assert o["timestamp"] == s.timestamp == r.timestamp
            metadata[(topic, partition, o["offset"])] = o
        if topic == "lat":  # one stamp per batch: each flush group made one batch per partition
            for group in (first, second):
                stamps = {metadata[(topic, partition, o["offset"])]["timestamp"]
                          for s, o in pairs if s in group}
                assert len(stamps) == 1, stamps

    # the Java consumer (assign + seekToBeginning: ListOffsets, then Fetch) reads what is stored
    got = {(c["topic"], c["partition"], c["offset"]): c for c in consumed.lines}
    assert len(got) == len(consumed.lines) == sum(counts.values())
    for (topic, partition), _ in counts.items():
        for r in stored(root, topic, partition):
            c = got[(topic, partition, r.offset)]
            assert (c["key"], c["value"]) == ((r.key or b"").decode(), (r.value or b"").decode())
            assert (c["timestamp"], c["timestampType"]) == (r.timestamp, r.timestamp_type)
            assert c["timestamp"] == metadata[(topic, partition, r.offset)]["timestamp"]
            assert c["leaderEpoch"] == r.leader_epoch
    assert {c["timestampType"] for c in consumed.lines if c["topic"] == "lat"} == {"LogAppendTime"}

    assert {"PRODUCE", "INIT_PRODUCER_ID", "METADATA", "API_VERSIONS"} <= set(produced.versions), produced.versions
    assert {"FETCH", "LIST_OFFSETS", "METADATA", "API_VERSIONS"} <= set(consumed.versions), consumed.versions
    assert_spoke_advertised_versions(produced, consumed)


# ============================================================================== KIP-937 window


def test_java_producer_gets_invalid_timestamp_with_kafkas_text_and_the_batch_is_dead_lettered(
    spark: SparkSession, gateway_config: GatewayConfig, probe: Probe
) -> None:
    now = int(time.time() * 1000)
    too_old = now - 2 * HOUR_MS  # "window" accepts [now - 1 h, now + 1 h]
    alone = [Send("window", 0, too_old, "alone", "too-old-alone")]
    mixed = [Send("window", 0, now, "m0", "fine-but-with-a-bad-neighbour"),
             Send("window", 0, too_old - 1, "m1", "too-old-in-a-batch"),
             Send("window", 0, now + 1, "m2", "fine-but-with-a-bad-neighbour-too")]
    # after two rejections the idempotent producer bumps its epoch and starts every partition at sequence 0
    after = [Send("window", 0, now + 2, "ok", "in-the-window"), Send("ct", 0, now + 3, "ok", "ct-after")]

    with running_front_door(spark, gateway_config) as door:
        outcomes, produced = probe.produce(door.bootstrap, [alone, mixed, after])
        root = door.segments_root
        window_records = stored(root, "window", 0)
        ct_records = stored(root, "ct", 0)
    letters = read_all(gateway_config, gateway_config.dlq_topic)

    # --- the Java exceptions: Kafka's class; with one record error in a batch, that record's text
    o_alone, o_m0, o_m1, o_m2, o_ok, o_ct = outcomes
    assert o_alone["error"] == o_m1["error"] == INVALID_TIMESTAMP_EXCEPTION, outcomes
    assert o_m0 == {"i": 1, "error": KAFKA_EXCEPTION, "message": PART_OF_INVALID_BATCH}
    assert o_m2 == {"i": 3, "error": KAFKA_EXCEPTION, "message": PART_OF_INVALID_BATCH}
    for outcome, send, index in ((o_alone, alone[0], 0), (o_m1, mixed[1], 1)):
        found = OUT_OF_RANGE.fullmatch(outcome["message"])
        assert found is not None, outcome["message"]
        ts, offset, lower, upper = (int(g) for g in found.groups())
        # the offset as sent (the record's index in its batch) and the window [now - 1 h, now + 1 h]
        assert (ts, offset) == (send.timestamp, index)
        assert upper - lower == 2 * HOUR_MS and ts < lower

    # --- nothing of the rejected batches was appended; the producer went on after them
    assert [(o_ok["offset"], o_ok["timestamp"]), (o_ct["offset"], o_ct["timestamp"])] == [(0, now + 2), (0, now + 3)]
    assert [(r.offset, r.value, r.timestamp) for r in window_records] == [(0, b"in-the-window", now + 2)]
    assert [(r.offset, r.value, r.timestamp) for r in ct_records] == [(0, b"ct-after", now + 3)]

    # --- the gateway dead-lettered both rejected batches, with the text the Java client got
    headers = [{k: (v or b"").decode() for k, v in (m.headers() or [])} for m in letters]
    assert len(letters) == 2, headers
    for letter, h, outcomes_of_batch in zip(letters, headers, ([o_alone], [o_m0, o_m1, o_m2]), strict=True):
        assert (h["gw.errors.topic"], h["gw.errors.partition"], h["gw.errors.name"], h["gw.errors.code"]) == (
            "window", "0", "INVALID_TIMESTAMP", "32")
        assert h["gw.errors.message"] == "One or more records have been rejected due to invalid timestamp"
        assert h["gw.errors.client.id"] == "front-door-probe"
        bad = [(i, o["message"]) for i, o in enumerate(outcomes_of_batch) if o["error"] == INVALID_TIMESTAMP_EXCEPTION]
        assert [(e["batch_index"], e["message"]) for e in json.loads(h["gw.errors.record.errors"])] == bad
        # the original bytes: the Java client's batch as it was sent
        assert [r.value for r in batch_records(bytes(letter.value()))] == [
            s.value.encode() for s in (alone if len(outcomes_of_batch) == 1 else mixed)]

    # one InitProducerId; after each rejection the client bumped its epoch itself (KIP-360) and began
    # every partition at sequence 0 again, which the gateway's producer state accepted
    ids = [(int(p), int(e)) for p, e in PRODUCER_ID_SET.findall(produced.log)]
    assert [e for _, e in ids] == [0, 1, 2] and len({p for p, _ in ids}) == 1, ids
    assert_spoke_advertised_versions(produced)


# ============================================================================== large batches


def test_java_producer_sends_batches_of_several_mb_and_gets_record_too_large_over_its_topics_limit(
    spark: SparkSession, gateway_config: GatewayConfig, probe: Probe
) -> None:
    """max.request.size and batch.size raised (defaults: 1 MiB and 16 KiB): two 2.5 MB records make one
    ~5 MB batch for "large" (max.message.bytes 8 MiB); one 2 MB record for "capped" (Kafka's default 1 MiB
    + 12) reaches the gateway, which answers MESSAGE_TOO_LARGE — RecordTooLargeException, a single record
    so not split and retried — and dead-letters the batch; the producer goes on."""
    now = int(time.time() * 1000)
    rng = random.Random(19)

    def text(size: int) -> str:  # incompressible enough, and one byte per char in UTF-8
        return "".join(rng.choices(string.ascii_letters, k=size))

    big = [Send("large", 0, now, f"big-{i}", text(2_500_000)) for i in range(2)]
    too_large = [Send("capped", 0, now, "too-large", text(2_000_000))]
    after = [Send("large", 0, now + 1, "after", "small, after")]
    settings = ["max.request.size=16777216", "batch.size=8388608"]

    with running_front_door(spark, gateway_config, LARGE_TOPICS) as door:
        outcomes, produced = probe.produce(door.bootstrap, [big, too_large, after], settings)
        root = door.segments_root
        records = stored(root, "large", 0)
        consumed = probe.consume(door.bootstrap, {("large", 0): 3})
    letters = read_all(gateway_config, gateway_config.dlq_topic)

    o_big0, o_big1, o_large, o_after = outcomes
    assert [(o.get("offset"), o.get("error")) for o in (o_big0, o_big1, o_after)] == [(0, None), (1, None), (2, None)]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, s.key.encode(), s.value.encode()) for i, s in enumerate(big + after)]
    assert len(split_batches_of(root, "large", 0)[0]) > 5_000_000  # the two big records travelled as one batch
    assert [(c["offset"], c["key"], c["value"]) for c in consumed.lines] == [
        (i, s.key, s.value) for i, s in enumerate(big + after)]

    assert len(letters) == 1
    headers = {k: (v or b"").decode() for k, v in (letters[0].headers() or [])}
    batch = bytes(letters[0].value())
    assert (headers["gw.errors.name"], headers["gw.errors.code"], headers["gw.errors.topic"]) == (
        "MESSAGE_TOO_LARGE", "10", "capped")
    assert [(r.key, r.value) for r in batch_records(batch)] == [(b"too-large", too_large[0].value.encode())]
    # RecordTooLargeException with the gateway's text (Kafka's RecordTooLargeException message)
    assert o_large == {"i": 2, "error": RECORD_TOO_LARGE_EXCEPTION, "message": (
        f"The record batch size in the append to capped-0 is {len(batch)} bytes which exceeds the maximum "
        f"configured value of {CAPPED_MAX_MESSAGE_BYTES}).")}
    assert_spoke_advertised_versions(produced, consumed)


def split_batches_of(root: Path, topic: str, partition: int) -> list[bytes]:
    """The stored batches of a partition's first segment, each as bytes."""
    log = (root / f"{topic}-{partition}" / "00000000000000000000.log").read_bytes()
    return [log[pos: pos + header.size_in_bytes] for pos, header in split_batches(log)]


# ============================================================================== every node leads a share


def test_java_client_sends_each_partition_to_its_leading_node_and_every_node_gets_a_share(
    spark: SparkSession, gateway_config: GatewayConfig, probe: Probe
) -> None:
    partitions = FRONT_DOOR_TOPICS["topics"]["spread"]["partitions"]
    now = int(time.time() * 1000)
    # three flushes, each a batch for every partition: per node connection, requests for several partitions
    groups = [[Send("spread", p, now + g, f"k{p}", f"g{g}-p{p}-r{r}") for r in range(3) for p in range(partitions)]
              for g in range(3)]

    with running_front_door(spark, gateway_config) as door:
        leaders = probe.leaders(door.bootstrap, "spread")
        outcomes, produced = probe.produce(door.bootstrap, groups)
        root = door.segments_root
        counts = {("spread", p): len(stored(root, "spread", p)) for p in range(partitions)}
        consumed = probe.consume(door.bootstrap, counts)
        nodes = {n: door.node_address(n) for n in range(1, door.nodes + 1)}

    # the client's metadata: every partition led by the node leadership.py names, where that node listens
    expected = {p: leader("spread", p, node_ids(len(nodes))) for p in range(partitions)}
    assert {line["partition"]: line["leader"] for line in leaders.lines} == expected
    for line in leaders.lines:
        assert (line["host"], line["port"]) == nodes[line["leader"]]
        assert line["replicas"] == line["isr"] == [line["leader"]]
    assert set(expected.values()) == set(nodes)

    # nothing lost, duplicated or reordered: each partition's records at 0, 1, 2, ... in send order, as stored
    sends = [s for g in groups for s in g]
    assert all("error" not in o for o in outcomes), outcomes
    for (topic, partition), pairs in by_partition(sends, outcomes):
        records = stored(root, topic, partition)
        assert [o["offset"] for _, o in pairs] == list(range(len(pairs))) == [r.offset for r in records]
        assert [s.value.encode() for s, _ in pairs] == [r.value for r in records]
    got: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for c in consumed.lines:
        got[c["partition"]].append((c["offset"], c["value"]))
    for partition in range(partitions):
        assert got[partition] == [(r.offset, (r.value or b"").decode()) for r in stored(root, "spread", partition)]

    # produce and fetch went to every node (node -1 is only the bootstrap connection's Metadata)
    assert produced.nodes["PRODUCE"] == set(nodes), produced.nodes
    assert consumed.nodes["FETCH"] == set(nodes), consumed.nodes
    assert_spoke_advertised_versions(produced, consumed, leaders)
