"""The Kafka front door with real clients (librdkafka through confluent-kafka, and kcat), on a running
gateway: what producers get back (offsets, KIP-32 timestamps), what assigned consumers read back, that
the front door's nodes each lead a share of the partitions and clients pipeline on every one of them,
that a request for a partition sent to another node gets NOT_LEADER_OR_FOLLOWER, that a front-door
restart loses and duplicates nothing, and that hostile bytes only close their own connection."""

from __future__ import annotations

import datetime
import io
import json
import re
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce import v13 as produce_v13
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from contract.responses import decode_response
from front_door.cluster.leadership import leader, node_ids
from front_door.cluster.topic_ids import topic_id
from storage.file_records import split_batches
from storage.log_reader import ConsumerRecord, offsets_for_times, read
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.gateway_io import read_all
from validators.codec.record_batch import build_record_batch

pytestmark = pytest.mark.integration


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        assert running.nodes == 4  # the default: several nodes, each leading some partitions
        yield running


@pytest.fixture
def one_node_door(spark, gateway_config) -> Iterator[RunningDoor]:
    """`front_door_nodes` 1: one broker leads every partition, as before there were nodes."""
    with running_front_door(spark, gateway_config, nodes=1) as running:
        yield running


class Deliveries:
    """Delivery reports by value, in the order librdkafka fired them."""

    def __init__(self) -> None:
        self.by_value: dict[bytes, Any] = {}
        self.errors: list[str] = []

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.value()!r}: {err}")
        else:
            self.by_value[msg.value()] = msg


def stored(door: RunningDoor, topic: str, partitions: int) -> dict[bytes, ConsumerRecord]:
    out: dict[bytes, ConsumerRecord] = {}
    for p in range(partitions):
        try:
            for r in read(door.segments_root, topic, p, 0, 1_000_000):
                assert r.value not in out, f"{r.value!r} stored twice"
                out[r.value] = r
        except FileNotFoundError:
            pass
    return out


def consume_assigned(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of `topic` through an assigned (group-less) librdkafka consumer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unused-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    c.close()
    return got


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_idempotent_producer_then_assigned_consumer(door: RunningDoor, compression: str) -> None:
    now = int(time.time() * 1000)
    reports = Deliveries()
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 20,
                  "compression.type": compression, "client.id": f"it-{compression}"})
    sent: dict[bytes, tuple[str, bytes, int, list[tuple[str, bytes]]]] = {}
    for i in range(120):
        topic = "lat" if i % 2 else "ct"
        value, key, ts = f"{compression}-{i}".encode(), f"k{i % 7}".encode(), now - 5000 + i
        headers = [("n", str(i).encode()), ("codec", compression.encode())]
        sent[value] = (topic, key, ts, headers)
        p.produce(topic, value=value, key=key, timestamp=ts, headers=headers, on_delivery=reports)
        if i % 40 == 39:
            p.poll(0)
    assert p.flush(120) == 0
    assert reports.errors == []
    assert set(reports.by_value) == set(sent)

    kept = {**stored(door, "ct", 2), **stored(door, "lat", 2)}
    assert set(kept) == set(sent)
    for value, msg in reports.by_value.items():
        topic, key, ts, headers = sent[value]
        record = kept[value]
        assert (msg.topic(), msg.partition(), msg.offset()) == (topic, record.partition, record.offset)
        if topic == "lat":  # KIP-32: the broker's stamp, from the ProduceResponse's log_append_time
            assert msg.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, record.log_append_time)
            assert record.create_time == ts and record.log_append_time >= now
        else:
            assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, ts)
        assert record.key == key and list(record.headers) == headers

    value = door.door.metrics.registry.get_sample_value  # what the dashboard's front-door row shows
    assert value("gateway_front_door_requests_total", {"api": "produce", "error": "NONE"}) >= 1
    assert value("gateway_front_door_requests_total", {"api": "init_producer_id", "error": "NONE"}) == 1
    assert value("gateway_front_door_produce_latency_seconds_count") == value(
        "gateway_front_door_requests_total", {"api": "produce", "error": "NONE"})
    assert value("gateway_front_door_produce_in_flight") == 0
    # every answered partition batch timed hop by hop: a produce request carries one or more of them
    hops = {phase: value("gateway_front_door_produce_phase_seconds_count", {"phase": phase})
            for phase in ("ingress_append", "gateway", "response_delivery")}
    assert len(set(hops.values())) == 1, hops
    assert hops["gateway"] >= value("gateway_front_door_produce_latency_seconds_count")
    assert value("gateway_front_door_produce_phase_seconds_sum", {"phase": "gateway"}) > 0
    # ct's and lat's partitions are led by all four nodes: the producer connected to each of them
    for node in range(1, door.nodes + 1):
        assert value("gateway_front_door_connections_accepted_total", {"node": str(node)}) >= 1, node

    for topic, ts_type in (("ct", TIMESTAMP_CREATE_TIME), ("lat", TIMESTAMP_LOG_APPEND_TIME)):
        expected = {v: s for v, s in sent.items() if s[0] == topic}
        got = consume_assigned(door.bootstrap, topic, 2, len(expected))
        assert sorted(m.value() for m in got) == sorted(expected)
        for m in got:
            record = kept[m.value()]
            _, key, ts, headers = expected[m.value()]
            assert (m.partition(), m.offset(), m.key(), m.headers()) == (record.partition, record.offset, key, headers)
            assert m.timestamp() == (ts_type, ts if ts_type == TIMESTAMP_CREATE_TIME else record.log_append_time)


def test_offsets_for_times_and_watermarks_agree_with_the_segment_storage(door: RunningDoor) -> None:
    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    reports = Deliveries()
    for i in range(12):
        p.produce("ct", value=f"t{i}".encode(), partition=0, timestamp=now - 12_000 + 1000 * i, on_delivery=reports)
        p.flush(60)  # one batch per record: the time index gets entries of its own
    assert reports.errors == []
    c = Consumer({"bootstrap.servers": door.bootstrap, "group.id": f"unused-{uuid.uuid4().hex}"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("ct", 0), timeout=30)
        assert (low, high) == (0, 12)
        targets = [now - 20_000, now - 12_000, now - 6_500, now - 1000, now + 1]
        # one partition per request: a ListOffsets request names a partition once
        answers = [c.offsets_for_times([TopicPartition("ct", 0, t)], timeout=30)[0] for t in targets]
        for target, answer in zip(targets, answers, strict=True):
            expected = offsets_for_times(door.segments_root, "ct", 0, target)
            assert answer.error is None
            assert answer.offset == (expected.offset if expected.found else -1), target
        assert [a.offset for a in answers] == [0, 0, 6, 11, -1]
        # a topic the registry lacks: Kafka's error in Metadata, and no auto-creation
        unknown = c.list_topics("nope", timeout=30).topics["nope"]
        assert unknown.error is not None and unknown.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert "nope" not in c.list_topics(timeout=30).topics
        # a change of the registry's seed file: the new topic is led by the front door once the query applied it
        reloaded = {**FRONT_DOOR_TOPICS, "topics": {**FRONT_DOOR_TOPICS["topics"], "nope": {"partitions": 4}}}
        Path(door.config.topics_file).write_text(json.dumps(reloaded))
        deadline = time.monotonic() + 60
        while (added := c.list_topics("nope", timeout=30).topics["nope"]).error is not None \
                and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the door's Metadata until the change arrives
        assert added.error is None and sorted(added.partitions) == [0, 1, 2, 3]
    finally:
        c.close()


def test_kcat_produces_and_consumes_through_the_front_door(door: RunningDoor) -> None:
    lines = "".join(f"key-{i}\tvalue-{i}\n" for i in range(25))
    produced = subprocess.run(
        ["kcat", "-b", door.bootstrap, "-P", "-t", "lat", "-p", "1", "-K", "\t", "-H", "origin=kcat"],
        input=lines, capture_output=True, text=True, timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", door.bootstrap, "-C", "-t", "lat", "-p", "1", "-o", "beginning", "-e",
         "-f", "%o|%k|%s|%h|%T\n"],
        capture_output=True, text=True, timeout=120,
    )
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("|") for line in consumed.stdout.splitlines()]
    kept = read(door.segments_root, "lat", 1, 0, 100)
    assert [(int(o), k, v, h) for o, k, v, h, _ in rows] == [
        (i, f"key-{i}", f"value-{i}", "origin=kcat") for i in range(25)]
    assert [int(t) for *_, t in rows] == [r.log_append_time for r in kept]  # LogAppendTime, from the header
    listed = subprocess.run(["kcat", "-b", door.bootstrap, "-L", "-t", "lat"], capture_output=True, text=True,
                            timeout=60)
    assert 'topic "lat" with 2 partitions' in listed.stdout


SPREAD_PARTITIONS = FRONT_DOOR_TOPICS["topics"]["spread"]["partitions"]


def test_every_node_leads_a_share_and_an_idempotent_librdkafka_producer_pipelines_on_each(door: RunningDoor) -> None:
    # Metadata as librdkafka sees it: the four nodes where they listen, each partition's leader spread
    c = Consumer({"bootstrap.servers": door.bootstrap, "group.id": "unused"})
    listed = c.list_topics("spread", timeout=30)
    c.close()
    assert {b.id: (b.host, b.port) for b in listed.brokers.values()} == {
        n: door.node_address(n) for n in range(1, door.nodes + 1)}
    leaders = {p: m.leader for p, m in listed.topics["spread"].partitions.items()}
    assert leaders == {p: leader("spread", p, node_ids(door.nodes)) for p in range(SPREAD_PARTITIONS)}
    assert sorted(leaders.values()) == sorted(list(range(1, door.nodes + 1)) * 2)

    # small batches, many of them: each node's connection carries several produce requests at once
    stats: list[dict[str, Any]] = []
    reports = Deliveries()
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": 25, "statistics.interval.ms": 100,
                  "stats_cb": lambda raw: stats.append(json.loads(raw))})
    sent: dict[int, list[bytes]] = defaultdict(list)
    for i in range(2000):
        partition = i % SPREAD_PARTITIONS
        value = f"p{partition}-{len(sent[partition])}".encode()
        sent[partition].append(value)
        p.produce("spread", value=value, partition=partition, on_delivery=reports)
        p.poll(0)
    assert p.flush(180) == 0
    assert reports.errors == []
    # nothing lost, duplicated or reordered: each partition's records at 0, 1, 2, ... in send order
    for partition, values in sent.items():
        assert [(reports.by_value[v].partition(), reports.by_value[v].offset()) for v in values] == [
            (partition, o) for o in range(len(values))]
    kept = stored(door, "spread", SPREAD_PARTITIONS)  # fails on a value stored twice
    assert {v: (r.partition, r.offset) for v, r in kept.items()} == {
        v: (m.partition(), m.offset()) for v, m in reports.by_value.items()}

    # librdkafka's own account: produce requests went to every node, not through one connection
    seen = len(stats)

    def statistics_after_the_flush() -> bool:
        p.poll(0.1)  # librdkafka hands its statistics to stats_cb in poll()
        return len(stats) > seen

    _wait_for(statistics_after_the_flush, "librdkafka statistics after the flush")
    produce_requests = {b["nodeid"]: b["req"]["Produce"] for b in stats[-1]["brokers"].values() if b["nodeid"] > 0}
    assert set(produce_requests) == set(range(1, door.nodes + 1)) and all(produce_requests.values()), produce_requests

    # an assign()ed consumer reads every partition back, from every partition's leader
    got = consume_assigned(door.bootstrap, "spread", SPREAD_PARTITIONS, sum(len(v) for v in sent.values()))
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for m in got:
        by_partition[m.partition()].append(m)
    for partition, values in sent.items():
        assert [(m.offset(), m.value()) for m in by_partition[partition]] == list(enumerate(values)), partition


def test_kcat_sees_every_node_and_produces_to_and_consumes_from_every_partition(door: RunningDoor) -> None:
    listed = subprocess.run(["kcat", "-b", door.bootstrap, "-L", "-t", "spread"], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    brokers = dict(re.findall(r"broker (\d+) at (\S+)", listed.stdout))
    assert f" {door.nodes} brokers:" in listed.stdout
    addresses = {n: door.node_address(n) for n in range(1, door.nodes + 1)}
    assert {int(n): a for n, a in brokers.items()} == {n: f"{host}:{port}" for n, (host, port) in addresses.items()}
    partitions = re.findall(r"partition (\d+), leader (\d+), replicas: (\d+), isrs: (\d+)", listed.stdout)
    assert {int(p): (int(lead), int(r), int(i)) for p, lead, r, i in partitions} == {
        p: (leader("spread", p, node_ids(door.nodes)),) * 3 for p in range(SPREAD_PARTITIONS)}

    # keyed lines: librdkafka's partitioner puts them on every partition, each sent to its leader
    lines = "".join(f"key-{i}\tvalue-{i}\n" for i in range(80))
    produced = subprocess.run(["kcat", "-b", door.bootstrap, "-P", "-t", "spread", "-K", "\t"],
                              input=lines, capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", door.bootstrap, "-C", "-t", "spread", "-o", "beginning", "-e",
                               "-f", "%p|%o|%k|%s\n"], capture_output=True, text=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("|") for line in consumed.stdout.splitlines()]
    assert sorted(v for *_, v in rows) == sorted(f"value-{i}" for i in range(80))
    assert {int(p) for p, *_ in rows} == set(range(SPREAD_PARTITIONS))
    by_partition: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for p, o, k, v in rows:
        assert v == "value-" + k.removeprefix("key-")
        by_partition[int(p)].append((int(o), int(k.removeprefix("key-"))))
    for p, got in by_partition.items():  # contiguous offsets, in the order kcat read the lines
        assert [o for o, _ in got] == list(range(len(got))) and [i for _, i in got] == sorted(i for _, i in got), p
    kept = stored(door, "spread", SPREAD_PARTITIONS)
    assert {v.decode(): (r.partition, r.offset) for v, r in kept.items()} == {
        v: (int(p), int(o)) for p, o, _, v in rows}


def test_a_front_door_restart_mid_stream_loses_and_duplicates_nothing(door: RunningDoor) -> None:
    reports = Deliveries()
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 120_000, "reconnect.backoff.ms": 50})
    values: list[bytes] = []
    stop = threading.Event()

    def send() -> None:
        i = 0
        while not stop.is_set():
            value = f"r{i}".encode()
            values.append(value)
            p.produce("ct", value=value, partition=i % 2, on_delivery=reports)
            p.poll(0)
            i += 1
            stop.wait(0.005)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        _wait_for(lambda: len(reports.by_value) >= 100, "first deliveries")
        door.restart()
        sent_before = len(values)
        _wait_for(lambda: len(reports.by_value) > sent_before + 50 or reports.errors, "deliveries after the restart")
    finally:
        stop.set()
        sender.join()
    assert p.flush(120) == 0
    assert reports.errors == []
    kept = stored(door, "ct", 2)
    assert set(kept) == set(values)  # nothing lost; `stored` fails on a value stored twice
    by_partition: dict[int, list[bytes]] = defaultdict(list)
    for value in values:
        by_partition[int(value[1:]) % 2].append(value)
    for partition, in_order in by_partition.items():  # and in send order, at the offsets reported
        assert [kept[v].offset for v in in_order] == list(range(len(in_order)))
        assert all(reports.by_value[v].offset() == kept[v].offset for v in in_order), partition


def _wait_for(condition: Any, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _exchange(address: tuple[str, int], data: bytes) -> bytes:
    """Send bytes, then read until the front door closes the connection (or answers and idles)."""
    with socket.create_connection(address, timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_hostile_bytes_close_only_their_own_connection(door: RunningDoor) -> None:
    address = door.node_address(2)  # any node's listener reads the same way
    healthy = Consumer({"bootstrap.servers": door.bootstrap, "group.id": "unused"})
    try:
        assert "lat" in healthy.list_topics(timeout=30).topics
        hostile = [
            b"\xff\xff\xff\xff",  # negative size
            b"\x7f\xff\xff\xff",  # larger than socket.request.max.bytes
            b"\x00\x00\x00\x10" + b"\x00\x00",  # truncated frame, then EOF
            b"\x00\x00\x00\x0c" + b"\x27\x0f\x00\x00\x00\x00\x00\x01\xff\xff\x00\x00",  # unknown API key 9999
            b"\x00\x00\x00\x0a" + b"\x00\x00\x00\x02\x00\x00\x00\x01\xff\xff",  # Produce v2 (removed in 4.0)
            b"\x00\x00\x00\x0e" + b"\x00\x03\x00\x0c\x00\x00\x00\x01" + b"garbag",  # Metadata v12 that does not parse
            bytes(range(256)) * 4,  # noise
        ]
        for data in hostile:
            assert _exchange(address, data) == b"", data[:16]
        # ApiVersions in a version the front door lacks: UNSUPPORTED_VERSION (35) in v0, with the versions it has
        answer = _exchange(address, b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x63\x00\x00\x00\x07\xff\xff")
        assert answer[4:8] == b"\x00\x00\x00\x07" and answer[8:10] == b"\x00\x23"
        # every other client is untouched
        assert "lat" in healthy.list_topics(timeout=30).topics
    finally:
        healthy.close()


def _read_when(door: RunningDoor, topic: str, count: int) -> list[Any]:
    """The messages of one of the gateway's topics once it holds `count` (the sink publishes responses and
    dead letters after the segment commit, so they can trail what storage already shows)."""
    c = Consumer({"bootstrap.servers": door.config.bootstrap_servers, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        partitions = c.list_topics(topic, timeout=30).topics[topic].partitions

        def held() -> int:
            return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)

        _wait_for(lambda: held() >= count, f"{count} message(s) on {topic}")
    finally:
        c.close()
    return read_all(door.config, topic)


def _produce_frame(records: bytes, acks: int = -1, timeout_ms: int = 60_000) -> bytes:
    """A ProduceRequest v9 for `ct`-0 carrying `records`, encoded with kio (Kafka's message schemas)."""
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=0, request_api_version=9,
                                                       correlation_id=42, client_id="raw"))
    entity_writer(ProduceRequest)(buffer, ProduceRequest(
        acks=acks, timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        transactional_id=None,
        topic_data=(TopicProduceData(name="ct", partition_data=(PartitionProduceData(index=0, records=records),)),),
    ))
    return struct.pack(">i", buffer.tell()) + buffer.getvalue()


def test_a_batch_of_garbage_is_answered_and_dead_lettered_not_lost(door: RunningDoor) -> None:
    answer = _exchange(door.leader_address("ct", 0), _produce_frame(b"\x00garbage, not a batch"))
    header, used = entity_reader(ResponseHeader)(answer, 4)
    response, _ = entity_reader(ProduceResponse)(answer, 4 + used)
    assert header.correlation_id == 42
    (partition,) = response.responses[0].partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (0, ErrorCode.corrupt_message, -1)
    letters = _read_when(door, door.config.dlq_topic, 1)  # published beside the response, maybe just after
    assert [m.value() for m in letters] == [b"\x00garbage, not a batch"]
    headers = dict(letters[0].headers())
    assert headers["gw.errors.request.id"].startswith(b"fd-") and headers["gw.errors.client.id"] == b"raw"


API_VERSIONS_V0 = b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff"  # correlation id 7


def _stored_values(door: RunningDoor) -> list[bytes | None]:
    try:
        return [r.value for r in read(door.segments_root, "ct", 0, 0, 1000)]
    except FileNotFoundError:
        return []


def test_request_timeout_and_acks_0_still_append_exactly_once(door: RunningDoor) -> None:
    address = door.leader_address("ct", 0)
    now = int(time.time() * 1000)
    late = build_record_batch([(now, b"k", b"answered too late")])
    answer = _exchange(address, _produce_frame(late, timeout_ms=1))
    response, _ = entity_reader(ProduceResponse)(answer, 4 + entity_reader(ResponseHeader)(answer, 4)[1])
    (partition,) = response.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (ErrorCode.request_timed_out, -1)
    _wait_for(lambda: _stored_values(door) == [b"answered too late"], "the timed-out batch to be appended")

    unacked = build_record_batch([(now, b"k", b"fire and forget")])
    # acks=0: Kafka answers nothing (the ApiVersions request after it is answered) ...
    answered = _exchange(address, _produce_frame(unacked, acks=0) + API_VERSIONS_V0)
    assert answered[4:8] == struct.pack(">i", 7)
    # ... and closes the connection when it refuses the batch (sent to a node that does not lead the
    # partition: NOT_LEADER_OR_FOLLOWER): no more answers
    refused = build_record_batch([(now, b"k", b"refused")])
    home = leader("ct", 0, node_ids(door.nodes))
    elsewhere = door.node_address(next(n for n in node_ids(door.nodes) if n != home))
    assert _exchange(elsewhere, _produce_frame(refused, acks=0) + API_VERSIONS_V0) == b""
    _wait_for(lambda: _stored_values(door) == [b"answered too late", b"fire and forget"], "the acks=0 batch")
    responses = [decode_response(m.value()) for m in _read_when(door, door.config.response_topic, 1)]
    assert [r["error_code"] for r in responses] == [0]  # gw.acks=0: the gateway published no response


def _fetch(address: tuple[str, int], partitions: list[tuple[int, int, int]], max_bytes: int) -> Any:
    """A Fetch v12 of `ct` (partition, offset, partition_max_bytes), kio-encoded; the decoded answer."""
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=1, request_api_version=12,
                                                       correlation_id=9, client_id="raw"))
    entity_writer(FetchRequest)(buffer, FetchRequest(
        replica_id=-1, max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=0, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(FetchTopic(topic="ct", partitions=tuple(
            FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=m) for p, o, m in partitions)),),
    ))
    answer = _exchange(address, struct.pack(">i", buffer.tell()) + buffer.getvalue())
    _, used = entity_reader(ResponseHeader)(answer, 4)
    return {p.partition_index: p for p in entity_reader(FetchResponse)(answer, 4 + used)[0].responses[0].partitions}


def test_fetch_serves_byte_ranges_of_the_log_as_kafka_does(one_node_door: RunningDoor) -> None:
    door = one_node_door  # one node leads both partitions: one Fetch spans them (max_bytes across partitions)
    address = door.node_address(1)
    p = Producer({"bootstrap.servers": door.bootstrap, "linger.ms": 0})
    for i in range(5):
        for partition in (0, 1):
            p.produce("ct", value=f"batch {i} of partition {partition}".encode(), partition=partition)
        assert p.flush(60) == 0  # one batch each
    log = (door.segments_root / "ct-0" / "00000000000000000000.log").read_bytes()
    batches = split_batches(log)
    assert len(batches) == 5
    position = [pos for pos, _ in batches]
    size = [header.size_in_bytes for _, header in batches]

    # at least one whole batch (KIP-74), even above partition_max_bytes; the second partition gets
    # nothing once the request's max_bytes is used up
    first = _fetch(address, [(0, 0, 1), (1, 0, 1_000_000)], max_bytes=1)
    assert first[0].records == log[: size[0]] and first[1].records == b""
    assert (first[0].error_code, first[0].high_watermark, first[0].last_stable_offset, first[0].log_start_offset) \
        == (ErrorCode.none, 5, 5, 0)
    # a byte range through the offset index: from the batch holding the offset, cut at the limit
    middle = _fetch(address, [(0, 2, size[2] + 10)], max_bytes=1_000_000)
    assert middle[0].records == log[position[2]: position[2] + size[2] + 10]
    rest = _fetch(address, [(0, 4, 1_000_000)], max_bytes=1_000_000)
    assert rest[0].records == log[position[4]:]
    # the log end offset: nothing yet; beyond it: OFFSET_OUT_OF_RANGE
    end = _fetch(address, [(0, 5, 1_000_000)], max_bytes=1_000_000)
    assert (end[0].error_code, end[0].records) == (ErrorCode.none, b"")
    beyond = _fetch(address, [(0, 6, 1_000_000)], max_bytes=1_000_000)
    assert (beyond[0].error_code, beyond[0].high_watermark) == (ErrorCode.offset_out_of_range, 5)


def test_an_assigned_consumer_reads_across_segments(door: RunningDoor) -> None:
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    values = [f"rolled {i}".encode() for i in range(12)]
    for i, value in enumerate(values):
        p.produce("rolling", value=value, key=b"k", partition=0)
        if i % 3 == 2:
            assert p.flush(60) == 0  # a micro-batch each: a segment each
    segments = sorted((door.segments_root / "rolling-0").glob("*.log"))
    assert len(segments) >= 3
    got = consume_assigned(door.bootstrap, "rolling", 1, len(values))
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(values))


def _produce_v13_frame(records: bytes) -> bytes:
    """A ProduceRequest v13 (topic by id) for `ct`-0 carrying `records`."""
    m = produce_v13.request
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=0, request_api_version=13,
                                                       correlation_id=43, client_id="raw"))
    entity_writer(m.ProduceRequest)(buffer, m.ProduceRequest(
        acks=-1, timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)), transactional_id=None,
        topic_data=(m.TopicProduceData(topic_id=topic_id("ct"), partition_data=(
            m.PartitionProduceData(index=0, records=records),)),),
    ))
    return struct.pack(">i", buffer.tell()) + buffer.getvalue()


def test_a_partition_asked_of_a_node_that_does_not_lead_it_is_not_leader_or_follower(door: RunningDoor) -> None:
    lead = leader("ct", 0, node_ids(door.nodes))
    wrong = door.node_address(next(n for n in range(1, door.nodes + 1) if n != lead))
    now = int(time.time() * 1000)

    answer = _exchange(wrong, _produce_frame(build_record_batch([(now, b"k", b"misdirected v9")])))
    response, _ = entity_reader(ProduceResponse)(answer, 4 + entity_reader(ResponseHeader)(answer, 4)[1])
    (partition,) = response.responses[0].partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (0, ErrorCode.not_leader_or_follower, -1)
    # Produce v10+ (KIP-951): the leader and where it listens, so a client goes there without Metadata
    answer = _exchange(wrong, _produce_v13_frame(build_record_batch([(now, b"k", b"misdirected v13")])))
    response, _ = entity_reader(produce_v13.response.ProduceResponse)(
        answer, 4 + entity_reader(ResponseHeader)(answer, 4)[1])
    (partition,) = response.responses[0].partition_responses
    assert (partition.error_code, partition.current_leader.leader_id) == (ErrorCode.not_leader_or_follower, lead)
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [(lead, *door.node_address(lead))]
    # Fetch: the same, with the leader in the partition's answer (v12+)
    fetched = _fetch(wrong, [(0, 0, 1_000_000)], max_bytes=1_000_000)
    assert (fetched[0].error_code, fetched[0].current_leader.leader_id) == (ErrorCode.not_leader_or_follower, lead)

    # the leader takes it: the misdirected batches never reached the gateway
    answer = _exchange(door.leader_address("ct", 0), _produce_v13_frame(build_record_batch([(now, b"k", b"led")])))
    response, _ = entity_reader(produce_v13.response.ProduceResponse)(
        answer, 4 + entity_reader(ResponseHeader)(answer, 4)[1])
    (partition,) = response.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (ErrorCode.none, 0)
    assert _stored_values(door) == [b"led"]
    assert _fetch(door.leader_address("ct", 0), [(0, 0, 1_000_000)], max_bytes=1_000_000)[0].high_watermark == 1


@pytest.mark.parametrize("taken_node", [1, 3])
def test_a_taken_front_door_port_falls_back_to_a_free_port(gateway_config, caplog, taken_node: int) -> None:
    from sinks.metrics.gateway_metrics import GatewayMetrics
    from streaming.__main__ import _start_front_door
    from tests.integration.gateway_io import create_gateway_topics

    create_gateway_topics(gateway_config)
    metrics = GatewayMetrics({"ct": 2})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        base = port - taken_node + 1  # node i listens on base + i - 1
        with caplog.at_level("WARNING", logger="gateway.front_door"):
            door = _start_front_door(gateway_config.with_overrides(front_door_address=f"127.0.0.1:{base}"), metrics)
    assert door is not None and door.address is not None and door.context is not None
    try:
        assert door.bound[taken_node - 1].port != port
        warned = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
        assert any(m.startswith(f"front door node {taken_node}: 127.0.0.1:{port} unavailable") for m in warned), warned
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{door.address.port}", "group.id": "unused"})
        brokers = c.list_topics(timeout=30).brokers
        c.close()
        # Metadata advertises where each node really listens, the fallen-back one included
        assert {b.id: b.port for b in brokers.values()} == {n: b.port for n, b in enumerate(door.bound, 1)}
        # the one set of front-door metrics on the gateway's exporter
        assert metrics.registry.get_sample_value("gateway_front_door_connections_accepted_total", {"node": "1"}) >= 1
    finally:
        door.stop()
