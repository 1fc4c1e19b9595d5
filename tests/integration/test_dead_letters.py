"""Dead letters on the real broker and Spark (docs/design.md: response topic; docs/design.md: dead-letter topic; docs/design.md: the query).

1. Accounting: thousands of mixed ingress messages (undecodable bytes, missing or malformed headers,
   unknown topics and partitions, illegal names, oversized, bad CRC, out-of-window timestamps,
   idempotent duplicates, valid batches of both timestamp types, acks=0) through several micro-batches:
   every ingress message ends exactly once in segments ∪ dead letters (an idempotent duplicate is
   acknowledged with its original's offsets and stored nowhere), and the responses agree with both.
2. At-least-once responses: a micro-batch replayed after its commit marker is lost publishes its
   responses and dead letters again — identical, same request ids (the idempotence key for readers) —
   while segment storage is not touched twice.
3. The `dlq` command against the real dead-letter topic: stats, list filters, show, replay (dry run,
   retargeted replay that lands in segment storage, refusal of a replay's own dead letter), an empty
   and a missing topic, a foreign message, and the module's entry point.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from contract.responses import decode_response
from kafka_cluster.admin import create_topics
from sinks.dlq.cli import main as dlq_main
from storage.commit_record import read_commit
from storage.file_names import partition_dir, segment_file_name
from streaming.query import start_gateway
from tests.integration.gateway_io import create_gateway_topics, produce_batches, read_all, read_responses
from validators.codec import record_batch as rb
from validators.codec.compression import CompressionType
from validators.codec.record_batch import build_record_batch, iter_batches, parse_header

pytestmark = pytest.mark.integration

SMALL_MAX_MESSAGE_BYTES = 2048
EXTRA_TOPICS = {
    # oversized batches: a topic with a small max.message.bytes
    "small": {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime",
                                           "max.message.bytes": str(SMALL_MAX_MESSAGE_BYTES)}},
    # too-old timestamps: a finite before window (ct's is unlimited)
    "win": {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime",
                                         "message.timestamp.before.max.ms": "86400000"}},
}
REPO = Path(__file__).resolve().parents[2]


def with_extra_topics(config):
    """The test's own registry: conftest's topics plus EXTRA_TOPICS (written to this test's file)."""
    path = Path(config.topics_file)
    doc = json.loads(path.read_text())
    doc["topics"].update(EXTRA_TOPICS)
    path.write_text(json.dumps(doc))
    return config


def run_available_now(spark, config) -> None:
    query, _ = start_gateway(spark, config, available_now=True)
    query.awaitTermination()
    assert query.exception() is None


def stored_batches(config, topic: str, partition: int) -> list[bytes]:
    """Every committed batch of a target partition, in offset order (the commit record bounds each file)."""
    directory = partition_dir(config.path(config.segments_root), topic, partition)
    commit = read_commit(directory)
    if commit is None:
        return []
    out = []
    for seg in commit.segments:
        data = (directory / segment_file_name(seg.base_offset)).read_bytes()[: seg.log_size]
        out.extend(iter_batches(data))
    return out


# ============================================================================== the mixed workload


@dataclass(frozen=True)
class Item:
    kind: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    key: bytes | None
    expect: str | None  # expected error name; None: accepted; "*": some error (undecodable bytes)
    request_id: str | None
    acks0: bool = False
    duplicate_of: str | None = None  # request id of the batch this is an idempotent retry of
    bad_records: int = 0  # INVALID_TIMESTAMP: how many records have record errors
    position: tuple[int, int] | None = None  # ingress partition, offset (after producing)


def records(rng: random.Random, tag: str, timestamps: list[int]) -> list[tuple]:
    return [(ts, f"{tag}-k{i}".encode() if rng.random() < 0.8 else None, f"{tag}-{i}-{uuid.uuid4().hex}".encode(),
             [("h", str(i).encode())] if rng.random() < 0.3 else []) for i, ts in enumerate(timestamps)]


def headers_for(topic: str | None, partition: str | None, rid: str | None, acks0: bool = False) -> tuple:
    h = []
    if topic is not None:
        h.append(("gw.topic", topic.encode()))
    if partition is not None:
        h.append(("gw.partition", partition.encode()))
    if rid is not None:
        h.append(("gw.request.id", rid.encode()))
        h.append(("gw.client.id", b"accounting"))
    if acks0:
        h.append(("gw.acks", b"0"))
    return tuple(h)


def mixed_workload(n: int, now: int, seed: int = 5) -> list[Item]:
    """`n` ingress messages; every kind several times. Idempotent producers: one per ct partition,
    their batches in sequence, some re-sent verbatim later (duplicates)."""
    rng = random.Random(seed)
    codecs = list(CompressionType)
    items: list[Item] = []
    sequences: dict[int, int] = {}
    idempotent_sent: list[Item] = []

    def rid() -> str:
        return uuid.uuid4().hex

    def add(kind: str, topic: str | None, partition: str | None, value: bytes, expect: str | None,
            acks0: bool = False, bad: int = 0, keyed: bool = True, with_rid: bool = True, dup_of: str | None = None) -> Item:
        r = rid() if with_rid else None
        key = f"{topic}/{partition}".encode() if keyed and topic is not None and partition is not None else None
        item = Item(kind, value, headers_for(topic, partition, r, acks0), key, expect, r, acks0, dup_of, bad)
        items.append(item)
        return item

    def valid(topic: str, part: int, ts: list[int], **kw) -> bytes:
        return build_record_batch(records(rng, topic, ts), compression=rng.choice(codecs), **kw)

    kinds = [
        ("valid_ct", 18), ("valid_lat", 14), ("valid_win", 4), ("valid_small", 3), ("idempotent", 10),
        ("duplicate", 4), ("acks0_valid", 4), ("acks0_invalid", 2), ("garbage", 5), ("missing_topic", 3),
        ("missing_partition", 3), ("malformed_partition", 3), ("no_headers", 3), ("unknown_topic", 3),
        ("unknown_partition", 3), ("illegal_name", 3), ("oversized", 3), ("bad_crc", 4), ("future", 4), ("too_old", 3),
    ]
    population = [k for k, w in kinds for _ in range(w)]
    while len(items) < n:
        kind = rng.choice(population)
        count = rng.randint(1, 4)
        recent = [now - rng.randint(0, 60_000) for _ in range(count)]
        if kind == "valid_ct":
            add(kind, "ct", str(rng.randint(0, 1)), valid("ct", 0, recent), None)
        elif kind == "valid_lat":  # LogAppendTime: any CreateTime is fine, even days old
            add(kind, "lat", str(rng.randint(0, 1)), valid("lat", 0, [now - 3 * 86_400_000] + recent[1:]), None)
        elif kind == "valid_win":
            add(kind, "win", "0", valid("win", 0, recent), None)
        elif kind == "valid_small":
            add(kind, "small", "0", build_record_batch(records(rng, "small", recent[:1])), None)
        elif kind == "idempotent":
            part = rng.randint(0, 1)
            seq = sequences.get(part, 0)
            sequences[part] = seq + count
            item = add(kind, "ct", str(part), valid("ct", part, recent, producer_id=1000 + part, producer_epoch=0,
                                                     base_sequence=seq), None)
            idempotent_sent.append(item)
        elif kind == "duplicate" and idempotent_sent:
            original = rng.choice(idempotent_sent[-3:])  # a retry comes soon after
            part = original.headers[1][1].decode()
            add(kind, "ct", part, original.value, None, dup_of=original.request_id)
        elif kind == "acks0_valid":
            add(kind, "ct", str(rng.randint(0, 1)), valid("ct", 0, recent), None, acks0=True)
        elif kind == "acks0_invalid":
            add(kind, "ct", "9", valid("ct", 0, recent), "UNKNOWN_TOPIC_OR_PARTITION", acks0=True)
        elif kind == "garbage":
            add(kind, "ct", str(rng.randint(0, 1)), rng.randbytes(rng.randint(0, 120)), "*")
        elif kind == "missing_topic":
            add(kind, None, "0", valid("ct", 0, recent), "INVALID_TOPIC_EXCEPTION")
        elif kind == "missing_partition":
            add(kind, "ct", None, valid("ct", 0, recent), "UNKNOWN_TOPIC_OR_PARTITION")
        elif kind == "malformed_partition":
            add(kind, "ct", rng.choice(["zero", "1.5", "", "0x1"]), valid("ct", 0, recent), "UNKNOWN_TOPIC_OR_PARTITION")
        elif kind == "no_headers":
            add(kind, None, None, valid("ct", 0, recent), "INVALID_TOPIC_EXCEPTION", with_rid=False)
        elif kind == "unknown_topic":
            add(kind, "nope", "0", valid("ct", 0, recent), "UNKNOWN_TOPIC_OR_PARTITION")
        elif kind == "unknown_partition":
            add(kind, "ct", str(rng.choice([2, 7, 100])), valid("ct", 0, recent), "UNKNOWN_TOPIC_OR_PARTITION")
        elif kind == "illegal_name":
            add(kind, rng.choice(["bad topic!", "..", "a" * 250, "ct/0"]), "0", valid("ct", 0, recent),
                "INVALID_TOPIC_EXCEPTION")
        elif kind == "oversized":
            big = [(now, None, rng.randbytes(SMALL_MAX_MESSAGE_BYTES + 100))]
            add(kind, "small", "0", build_record_batch(big), "MESSAGE_TOO_LARGE")
        elif kind == "bad_crc":
            data = bytearray(valid("ct", 0, recent))
            data[-1] ^= 0x55
            add(kind, "ct", str(rng.randint(0, 1)), bytes(data), "CORRUPT_MESSAGE")
        elif kind == "future":  # more than the 1 h after-window ahead
            ts = recent[:]
            bad = rng.sample(range(count), rng.randint(1, count))
            for i in bad:
                ts[i] = now + 2 * 3_600_000 + rng.randint(0, 1000)
            add(kind, "ct", str(rng.randint(0, 1)), valid("ct", 0, ts), "INVALID_TIMESTAMP", bad=len(bad))
        elif kind == "too_old":  # beyond win's 1-day before-window
            ts = [now - 2 * 86_400_000 - i for i in range(count)]
            add(kind, "win", "0", valid("win", 0, ts), "INVALID_TIMESTAMP", bad=count)
    return items


def produce_items(config, items: list[Item]) -> list[Item]:
    """Produce in order (one idempotent producer keeps each key's order); returns items with positions."""
    p = Producer({"bootstrap.servers": config.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20,
                  "message.max.bytes": config.ingress_limits().ingress_message_bytes})
    positions: dict[int, tuple[int, int]] = {}

    def report(i: int):
        def cb(err, msg) -> None:
            assert err is None, err
            positions[i] = (msg.partition(), msg.offset())
        return cb

    for i, item in enumerate(items):
        p.produce(config.ingress_topic, key=item.key, value=item.value, headers=list(item.headers) or None,
                  on_delivery=report(i))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return [replace(item, position=positions[i]) for i, item in enumerate(items)]


def headers_of(message) -> dict[str, str]:
    return {k: v.decode() for k, v in (message.headers() or [])}


# ============================================================================== 1. accounting


def test_every_ingress_message_is_accounted_for_exactly_once(spark, gateway_config) -> None:
    config = with_extra_topics(replace(gateway_config, max_offsets_per_trigger=900))  # several micro-batches
    create_gateway_topics(config)
    now = int(time.time() * 1000)
    items = produce_items(config, mixed_workload(2400, now))
    kinds = Counter(i.kind for i in items)
    assert len(kinds) == 20 and min(kinds.values()) >= 10, kinds
    run_available_now(spark, config)

    # --- the ingress topic holds exactly what was produced
    ingress = read_all(config, config.ingress_topic)
    assert sorted((m.partition(), m.offset()) for m in ingress) == sorted(i.position for i in items)
    by_pos = {i.position: i for i in items}

    # --- responses: one per ingress message with acks != 0, none for acks=0
    responses = read_responses(config)
    resp_by_pos: dict[tuple[int, int], dict] = {}
    for r in responses:
        pos = (r["ingress_partition"], r["ingress_offset"])
        assert pos not in resp_by_pos, f"two responses for ingress {pos}"
        resp_by_pos[pos] = r
    assert set(resp_by_pos) == {i.position for i in items if not i.acks0}
    for pos, r in resp_by_pos.items():
        item = by_pos[pos]
        expected_id = item.request_id if item.request_id is not None else f"{pos[0]}:{pos[1]}"
        assert r["request_id"] == expected_id

    # --- dead letters: at most one per ingress message, the original bytes, headers = the response's error
    letters = read_all(config, config.dlq_topic)
    dead: dict[tuple[int, int], dict[str, str]] = {}
    for m in letters:
        h = headers_of(m)
        pos = (int(h["gw.errors.ingress.partition"]), int(h["gw.errors.ingress.offset"]))
        assert pos not in dead, f"two dead letters for ingress {pos}"
        assert h["gw.errors.ingress.topic"] == config.ingress_topic
        item = by_pos[pos]
        assert bytes(m.value() or b"") == item.value, "a dead letter must carry the original bytes"
        dead[pos] = h
        r = resp_by_pos.get(pos)
        if r is not None:
            assert int(h["gw.errors.code"]) == r["error_code"] != 0
            assert h["gw.errors.name"] == r["error_name"]
            assert h["gw.errors.message"] == (r["error_message"] or "")
            assert json.loads(h["gw.errors.record.errors"]) == r["record_errors"]
            assert h["gw.errors.request.id"] == r["request_id"] and m.key().decode() == r["request_id"]
            assert h["gw.errors.topic"] == (r["topic"] or "")
            if r["partition"] >= 0:
                assert h["gw.errors.partition"] == str(r["partition"])
            assert ("gw.errors.window" in h) == (r["error_name"] == "INVALID_TIMESTAMP")

    # --- segments: every stored batch is exactly one accepted ingress message
    stored_at: dict[tuple[int, int], tuple[str, int, bytes]] = {}
    records_area_to_items: dict[bytes, list[Item]] = defaultdict(list)
    for item in items:
        if item.expect is None and item.duplicate_of is None:
            records_area_to_items[item.value[rb.RECORD_BATCH_OVERHEAD:]].append(item)
    for topic, partitions in (("ct", 2), ("lat", 2), ("win", 1), ("small", 1)):
        for partition in range(partitions):
            next_offset = 0
            for batch in stored_batches(config, topic, partition):
                h = parse_header(batch)
                assert h.base_offset == next_offset, "offsets are contiguous, never reused"
                next_offset = h.last_offset + 1
                assert rb.is_valid(batch)
                (item,) = records_area_to_items[batch[rb.RECORD_BATCH_OVERHEAD:]]
                assert item.position not in stored_at, "stored twice"
                assert item.headers[0][1].decode() == topic and item.headers[1][1].decode() == str(partition)
                stored_at[item.position] = (topic, partition, batch)

    # --- the partition of all ingress messages: appended | dead-lettered | acknowledged duplicate
    duplicates = {i.position for i in items if i.duplicate_of is not None}
    assert not (set(stored_at) & set(dead)) and not (duplicates & (set(stored_at) | set(dead)))
    assert set(stored_at) | set(dead) | duplicates == set(by_pos)

    # --- responses agree with the segments and with what each kind must get
    by_rid = {r["request_id"]: r for r in responses}
    for item in items:
        r = resp_by_pos.get(item.position)
        if item.expect is None and item.duplicate_of is None:
            assert item.position in stored_at, item.kind
            topic, partition, batch = stored_at[item.position]
            h = parse_header(batch)
            if r is None:
                assert item.acks0
                continue
            assert (r["error_code"], r["topic"], r["partition"]) == (0, topic, partition)
            assert r["base_offset"] == h.base_offset and r["record_count"] == h.records_count
            if topic == "lat":
                assert h.timestamp_type == rb.TimestampType.LOG_APPEND_TIME
                assert r["log_append_time_ms"] == h.max_timestamp >= now
            else:
                assert r["log_append_time_ms"] == -1 and h.timestamp_type == rb.TimestampType.CREATE_TIME
                assert h.max_timestamp == parse_header(item.value).max_timestamp
        elif item.duplicate_of is not None:
            original = by_rid[item.duplicate_of]
            assert r["error_code"] == 0, (item.kind, r)
            assert (r["base_offset"], r["record_count"]) == (original["base_offset"], original["record_count"])
        else:
            assert item.position in dead, item.kind
            if r is None:
                assert item.acks0
                assert dead[item.position]["gw.errors.name"] == item.expect
                continue
            assert r["error_code"] != 0 and r["base_offset"] == -1 and r["log_append_time_ms"] == -1, (item.kind, r)
            if item.expect != "*":
                assert r["error_name"] == item.expect, (item.kind, r)
            if item.kind in ("future", "too_old"):
                assert len(r["record_errors"]) == item.bad_records
                assert all("is out of range" in e["message"] for e in r["record_errors"])
                assert r["error_message"] == "One or more records have been rejected due to invalid timestamp"


# ============================================================================== 2. replay duplicates


def test_replayed_micro_batch_republishes_identical_responses_without_duplicating_segments(spark, gateway_config) -> None:
    """Responses and dead letters are at-least-once; the request id is the idempotence key.

    A micro-batch whose commit marker is lost (a driver crash after the sink published, before Spark
    wrote `commits/<id>`) is run again on restart with the same offsets and the same clock: it decides
    the same, the segment writer sees its own commit record and writes nothing, and the responses and
    dead letters go out a second time — byte-for-byte the same. Readers deduplicate by request id."""
    config = gateway_config
    create_gateway_topics(config)
    now = int(time.time() * 1000)
    rng = random.Random(11)
    items = []
    for i in range(12):
        topic = "ct" if i % 2 else "lat"
        ts = [now - 1000 + j for j in range(3)]
        if i in (1, 5, 9):  # ct (CreateTime) batches: rejected with INVALID_TIMESTAMP
            ts[1] = now + 3 * 3_600_000
        items.append(Item("replay", build_record_batch(records(rng, topic, ts)),
                          headers_for(topic, str(i % 2), uuid.uuid4().hex), f"{topic}/{i % 2}".encode(), None, None))
    items = [replace(it, request_id=dict(it.headers)["gw.request.id"].decode()) for it in items]
    produce_items(config, items)
    run_available_now(spark, config)

    first = [decode_response(m.value()) for m in read_all(config, config.response_topic)]
    first_letters = read_all(config, config.dlq_topic)
    assert len(first) == 12 and len(first_letters) == 3
    segments_before = {
        p: sorted((f.name, f.read_bytes()) for f in p.glob("*") if f.is_file() and f.name != "gateway.lock")
        for p in Path(config.path(config.segments_root)).iterdir()
    }

    commits = config.checkpoint_location / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    offsets_log = json.loads((config.checkpoint_location / "offsets" / str(last)).read_text().splitlines()[1])
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()

    run_available_now(spark, config)  # restart: batch `last` runs again
    assert max(int(f.name) for f in commits.iterdir() if f.name.isdigit()) == last
    assert json.loads((config.checkpoint_location / "offsets" / str(last)).read_text().splitlines()[1]) == offsets_log

    all_responses = [decode_response(m.value()) for m in read_all(config, config.response_topic)]
    by_id: dict[str, list[dict]] = defaultdict(list)
    for r in all_responses:
        by_id[r["request_id"]].append(r)
    assert set(by_id) == {it.request_id for it in items}
    for rid, copies in by_id.items():
        assert len(copies) == 2 and copies[0] == copies[1], rid  # same offsets, same append time, same errors
    letters = read_all(config, config.dlq_topic)
    assert len(letters) == 6
    as_tuple = Counter((bytes(m.value()), tuple(m.headers()), m.timestamp()[1]) for m in letters)
    assert sorted(as_tuple.values()) == [2, 2, 2]  # each dead letter twice, identical incl. rejection time
    segments_after = {
        p: sorted((f.name, f.read_bytes()) for f in p.glob("*") if f.is_file() and f.name != "gateway.lock")
        for p in Path(config.path(config.segments_root)).iterdir()
    }
    assert segments_after == segments_before, "a replayed micro-batch must not touch segment storage"
    # deduplicated by request id, the responses are the first run's
    assert {rid: c[0] for rid, c in by_id.items()} == {r["request_id"]: r for r in first}


# ============================================================================== 3. the dlq command


def dlq(config, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = dlq_main([*args, "--bootstrap-servers", config.bootstrap_servers, "--topic", config.dlq_topic], out, err)
    return code, out.getvalue(), err.getvalue()


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def end_offsets(config, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": uuid.uuid4().hex})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        c.close()


def test_dlq_command_on_the_real_dead_letter_topic(spark, gateway_config) -> None:
    config = gateway_config
    create_gateway_topics(config)
    now = int(time.time() * 1000)
    rng = random.Random(3)

    def item(topic: str, partition: str, ts: list[int], raw: bytes | None = None) -> Item:
        r = uuid.uuid4().hex
        value = raw if raw is not None else build_record_batch(records(rng, topic, ts))
        return Item("dlq", value, headers_for(topic, partition, r), f"{topic}/{partition}".encode(), None, r)

    future = [item("ct", "0", [now, now + 2 * 3_600_000, now + 3 * 3_600_000]) for _ in range(3)]
    lost = [item("ct", "7", [now - 10, now - 5]) for _ in range(2)]  # unknown partition: "fixed" by retargeting
    garbage = item("ct", "1", [], raw=b"\x00\x01garbage")  # shorter than a batch: INVALID_RECORD (87)
    good = item("ct", "1", [now])
    produce_items(config, future + lost + [garbage, good])
    # a message that is not the gateway's on the dead-letter topic
    p = Producer({"bootstrap.servers": config.bootstrap_servers})
    p.produce(config.dlq_topic, value=b"\xde\xad\xbe\xef", key=b"foreign")
    assert p.flush(30) == 0
    run_available_now(spark, config)

    # ---- stats
    code, out, _ = dlq(config, "stats", "--format", "jsonl")
    assert code == 0
    (stats,) = jsonl(out)
    assert stats["total"] == 7 and stats["foreign"] == 1 and stats["malformed"] == 0
    assert stats["by_error"] == {"INVALID_TIMESTAMP": 3, "UNKNOWN_TOPIC_OR_PARTITION": 2, "INVALID_RECORD": 1,
                                 "(foreign)": 1}
    assert stats["by_partition"] == {"ct-0": 3, "ct-7": 2, "ct-1": 1} and stats["by_topic"] == {"ct": 6}
    assert stats["first_ms"] <= stats["last_ms"] and stats["first_utc"].endswith("Z")
    code, table, _ = dlq(config, "stats")
    assert code == 0 and "7 dead letter(s)" in table and "INVALID_TIMESTAMP" in table and "1 foreign" in table

    # ---- list with filters
    code, out, _ = dlq(config, "list", "--error", "INVALID_TIMESTAMP", "--format", "jsonl")
    rows = jsonl(out)
    assert code == 0 and sorted(r["request_id"] for r in rows) == sorted(i.request_id for i in future)
    assert all(r["records"] == 3 and r["target"] == "ct-0" for r in rows)
    assert [r["request_id"] for r in jsonl(dlq(config, "list", "--target-partition", "7", "--format", "jsonl")[1])] \
        == [i.request_id for i in lost]
    assert [r["request_id"] for r in jsonl(dlq(config, "list", "--request-id", garbage.request_id,
                                                "--format", "jsonl")[1])] == [garbage.request_id]
    assert jsonl(dlq(config, "list", "--since", str(now + 10 * 3_600_000), "--format", "jsonl")[1]) == []
    assert len(jsonl(dlq(config, "list", "--since", "-1h", "--format", "jsonl")[1])) == 7
    assert len(jsonl(dlq(config, "list", "--limit", "2", "--format", "jsonl")[1])) == 2
    every = jsonl(dlq(config, "list", "--format", "jsonl")[1])
    assert [r["error_name"] for r in every].count("FOREIGN") == 1
    code, table, _ = dlq(config, "list")
    assert code == 0 and table.splitlines()[0].startswith("POSITION") and len(table.splitlines()) == 8

    # ---- show
    ts_row = rows[0]
    code, out, _ = dlq(config, "show", ts_row["position"], "--format", "jsonl")
    (view,) = jsonl(out)
    assert view["error"]["name"] == "INVALID_TIMESTAMP" and [e["batch_index"] for e in view["error"]["record_errors"]] == [1, 2]
    assert [r["recordError"] is not None for r in view["records"]] == [False, True, True]
    assert [r["inWindow"] for r in view["records"]] == [True, False, False]
    assert view["window"]["upper_ms"] - view["window"]["lower_ms"] > 0 and view["window"]["upper"].endswith("Z")
    assert view["records"][0]["timestampUtc"].endswith("Z") and view["ingress"]["topic"] == config.ingress_topic
    code, text, _ = dlq(config, "show", "--request-id", garbage.request_id)
    assert code == 0 and "INVALID_RECORD (87)" in text and "not decodable" in text and "0x0001" in text
    foreign_pos = next(r["position"] for r in every if r["error_name"] == "FOREIGN")
    code, text, _ = dlq(config, "show", foreign_pos)
    assert code == 0 and "FOREIGN" in text
    assert dlq(config, "show", "0:999999")[0] == 3

    # ---- replay: a dry run sends nothing
    ingress_before = end_offsets(config, config.ingress_topic)
    code, out, _ = dlq(config, "replay", "--target-partition", "7", "--to-partition", "1", "--format", "jsonl")
    plans = jsonl(out)
    assert code == 0 and [p["status"] for p in plans] == ["dry-run", "dry-run"]
    assert end_offsets(config, config.ingress_topic) == ingress_before
    # ... foreign messages are refused, also in a dry run
    code, out, _ = dlq(config, "replay", "--position", foreign_pos, "--format", "jsonl")
    assert code == 3 and jsonl(out)[0]["status"] == "refused"

    # ---- replay for real: the retargeted batches, and one that will be rejected again
    code, out, _ = dlq(config, "replay", "--target-partition", "7", "--to-partition", "1", "--yes", "--format", "jsonl")
    replayed = jsonl(out)
    assert code == 0 and [p["status"] for p in replayed] == ["sent", "sent"]
    code, out, _ = dlq(config, "replay", "--position", ts_row["position"], "--yes", "--format", "jsonl")
    (again,) = jsonl(out)
    assert code == 0 and again["status"] == "sent"
    after = end_offsets(config, config.ingress_topic)
    assert sum(after.values()) == sum(ingress_before.values()) + 3
    run_available_now(spark, config)

    responses = {r["request_id"]: r for r in read_responses(config)}
    assert sorted(p["request_id"].rsplit(":", 1)[1] for p in replayed) == sorted(i.request_id for i in lost)
    for plan in replayed:
        original = next(i for i in lost if plan["request_id"].endswith(":" + i.request_id))
        r = responses[plan["request_id"]]
        assert plan["request_id"].startswith("replay:") and plan["request_id"].endswith(original.request_id)
        assert (r["error_code"], r["topic"], r["partition"]) == (0, "ct", 1)
        stored = {parse_header(b).base_offset: b for b in stored_batches(config, "ct", 1)}
        assert stored[r["base_offset"]][rb.RECORD_BATCH_OVERHEAD:] == original.value[rb.RECORD_BATCH_OVERHEAD:]
    assert responses[again["request_id"]]["error_name"] == "INVALID_TIMESTAMP"

    # the rejected replay is a new dead letter; replaying it is refused (no loop), nothing is sent
    code, out, _ = dlq(config, "list", "--request-id", again["request_id"], "--format", "jsonl")
    (re_rejected,) = jsonl(out)
    assert re_rejected["replay_of"] == f"{config.dlq_topic}:{ts_row['position']}"
    before = end_offsets(config, config.ingress_topic)
    code, out, _ = dlq(config, "replay", "--position", re_rejected["position"], "--yes", "--format", "jsonl")
    (refused,) = jsonl(out)
    assert code == 3 and refused["status"] == "refused" and "already a replay" in refused["reason"]
    assert end_offsets(config, config.ingress_topic) == before
    (stats,) = jsonl(dlq(config, "stats", "--format", "jsonl")[1])
    assert stats["total"] == 8 and stats["replays"] == 1

    # ---- an empty topic, a missing topic, and the module entry point
    empty = f"dlq-empty-{uuid.uuid4().hex[:6]}"
    create_topics(config.cluster, [(empty, 1, {})])
    out, err = io.StringIO(), io.StringIO()
    assert dlq_main(["stats", "--bootstrap-servers", config.bootstrap_servers, "--topic", empty], out, err) == 0
    assert "no dead letters" in out.getvalue()
    assert dlq_main(["list", "--bootstrap-servers", config.bootstrap_servers, "--topic", empty], out, err) == 0
    err = io.StringIO()
    assert dlq_main(["stats", "--bootstrap-servers", config.bootstrap_servers, "--topic", "no-such-dlq",
                     "--timeout", "5"], io.StringIO(), err) == 1
    assert "does not exist" in err.getvalue()
    proc = subprocess.run(
        [sys.executable, "-m", "sinks", "dlq", "stats", "--bootstrap-servers", config.bootstrap_servers,
         "--topic", config.dlq_topic, "--format", "jsonl"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total"] == 8


def test_dlq_reader_streams_to_the_end_offsets_seen_at_start(kafka) -> None:
    """A large dead-letter topic is read message by message up to the end offsets captured when the
    command started (later dead letters are not waited for), and --since seeks by ListOffsets."""
    from sinks.dlq.reader import DlqReader, read_dead_letters
    from sinks.dlq.report import Filter, compute_stats

    topic = f"dlq-big-{uuid.uuid4().hex[:6]}"
    create_topics(kafka.cluster, [(topic, 3, {})])
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 50})
    t_old, t_new = 1_000_000_000_000, int(time.time() * 1000)
    for i in range(6000):
        p.produce(topic, key=str(i).encode(), value=b"v", timestamp=t_old + i if i < 2000 else t_new + i,
                  headers=[("gw.errors.code", b"32"), ("gw.errors.name", b"INVALID_TIMESTAMP"),
                           ("gw.errors.topic", f"t{i % 4}".encode()), ("gw.errors.partition", b"0"),
                           ("gw.errors.ingress.partition", b"0"), ("gw.errors.ingress.offset", str(i).encode())])
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    with DlqReader(kafka.cluster, topic, timeout_s=30) as reader:
        for _ in range(200):  # arrive after the start: not part of this read
            p.produce(topic, value=b"late", timestamp=t_old - 1, headers=[("gw.errors.code", b"3")])
        assert p.flush(60) == 0
        stats = compute_stats(read_dead_letters(reader, Filter()))
    assert stats.total == 6000 and stats.malformed == 0 and dict(stats.by_topic) == {f"t{i}": 1500 for i in range(4)}
    with DlqReader(kafka.cluster, topic, timeout_s=30) as reader:
        recent = compute_stats(read_dead_letters(reader, Filter(since_ms=t_new)))
    assert recent.total == 4000 and recent.first_ms >= t_new  # the late ones are old: before --since
    out, err = io.StringIO(), io.StringIO()
    assert dlq_main(["list", "--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic, "--since",
                     str(t_new), "--until", str(t_new + 2100), "--format", "jsonl"], out, err) == 0
    assert len(jsonl(out.getvalue())) == 100  # timestamps t_new+2000 .. t_new+2099


# ============================================================================== many record errors

MANY_BAD_RECORDS = 40_000


def test_a_batch_of_many_record_errors_gets_one_response_and_one_dead_letter_and_the_query_goes_on(
    spark, gateway_config
) -> None:
    """A zstd batch of 40 000 tiny records, every one before the KIP-937 window: ~7 MB of record errors
    (one INVALID_TIMESTAMP each), far above what the response and dead-letter topics take with a 1 MiB
    front door (`dead_letter_message_bytes`, ~2.1 MB). Unbounded, the sink's publish failed and the
    micro-batch was retried forever; bounded, the producer gets one response naming the error and the
    total, there is exactly one dead letter of the original bytes, and a good batch after it is appended."""
    config = replace(gateway_config, front_door_max_request_bytes=1 << 20)
    path = Path(config.topics_file)
    doc = json.loads(path.read_text())
    doc["topics"]["tight"] = {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime",
                                                           "message.timestamp.before.max.ms": "600000"}}
    path.write_text(json.dumps(doc))
    create_gateway_topics(config)
    limit = config.ingress_limits().dead_letter_message_bytes
    now = int(time.time() * 1000)
    bad = build_record_batch([(now - 86_400_000, None, b"")] * MANY_BAD_RECORDS, compression=CompressionType.ZSTD)
    assert len(bad) < limit < MANY_BAD_RECORDS * 150  # small batch, record errors many times the limit

    query, _ = start_gateway(spark, config)
    try:
        (bad_sent,) = produce_batches(config, [("tight", 0, bad)])
        query.processAllAvailable()  # raises if the micro-batch failed
        good = build_record_batch([(int(time.time() * 1000), b"k", b"good")], compression=CompressionType.ZSTD)
        (good_sent,) = produce_batches(config, [("tight", 0, good)])
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
    finally:
        query.stop()

    responses = {r["request_id"]: r for r in read_responses(config)}
    assert set(responses) == {bad_sent.request_id, good_sent.request_id}
    rejected = responses[bad_sent.request_id]
    assert (rejected["error_code"], rejected["error_name"], rejected["base_offset"]) == (32, "INVALID_TIMESTAMP", -1)
    listed = [e["batch_index"] for e in rejected["record_errors"]]
    assert 1000 < len(listed) < MANY_BAD_RECORDS and listed == list(range(len(listed)))
    assert f"the first {len(listed)} of {MANY_BAD_RECORDS} are listed" in rejected["error_message"]
    assert (responses[good_sent.request_id]["error_code"], responses[good_sent.request_id]["base_offset"]) == (0, 0)

    (letter,) = read_all(config, config.dlq_topic)
    assert letter.value() == bad and letter.key() == bad_sent.request_id.encode()
    headers = dict(letter.headers())
    assert headers["gw.errors.name"] == b"INVALID_TIMESTAMP"
    assert headers["gw.errors.record.errors.total"] == str(MANY_BAD_RECORDS).encode()
    assert len(letter.key()) + len(letter.value()) + sum(len(k) + len(v) for k, v in letter.headers()) <= limit
    (stored,) = stored_batches(config, "tight", 0)  # the good batch, as sent (the CRC covers all but the epoch)
    assert (parse_header(stored).base_offset, parse_header(stored).crc, stored[21:]) == (0, parse_header(good).crc, good[21:])

    # the dlq command reads it: the listed record errors and the total
    (row,) = jsonl(dlq(config, "list", "--format", "jsonl")[1])
    assert (row["error_name"], row["records"]) == ("INVALID_TIMESTAMP", MANY_BAD_RECORDS)
    code, out, _ = dlq(config, "show", row["position"], "--format", "jsonl")
    (view,) = jsonl(out)
    assert code == 0 and view["error"]["record_errors_total"] == MANY_BAD_RECORDS
    assert len(view["error"]["record_errors"]) == len(listed) and len(view["records"]) == MANY_BAD_RECORDS
    code, text, _ = dlq(config, "show", row["position"])
    assert code == 0 and f"record errors (the first {len(listed)} of {MANY_BAD_RECORDS}):" in text


def test_header_values_that_are_not_utf8_are_read_with_replacement_characters_and_the_query_goes_on(
    spark, gateway_config
) -> None:
    """An ingress message whose headers are not UTF-8 (the ingress topic is open to any producer): Spark's
    `decode` raises on such bytes, which stopped every micro-batch that read the message, again at each
    restart. Read with replacement characters instead, the topic is an illegal name: one response and one dead
    letter for it, and the good batch beside it is appended."""
    config = gateway_config
    create_gateway_topics(config)
    now = int(time.time() * 1000)
    bad = build_record_batch([(now, b"k", b"undecodable headers")])
    good = build_record_batch([(now, b"k", b"good")])
    p = Producer(config.cluster.client({"enable.idempotence": True}))
    p.produce(config.ingress_topic, key=b"ct/0", value=bad,
              headers=[("gw.topic", b"c\xfft"), ("gw.partition", b"0"), ("gw.request.id", b"bad-1"),
                       ("gw.client.id", b"\xc3\x28"), ("gw.principal", b"User:\xfe")])
    assert p.flush(60) == 0
    (good_sent,) = produce_batches(config, [("ct", 0, good)])
    run_available_now(spark, config)  # asserts the query ended without an exception

    responses = {r["request_id"]: r for r in read_responses(config)}
    assert set(responses) == {"bad-1", good_sent.request_id}
    rejected = responses["bad-1"]
    assert (rejected["error_name"], rejected["topic"], rejected["base_offset"]) == \
        ("INVALID_TOPIC_EXCEPTION", "c\ufffdt", -1)
    assert (responses[good_sent.request_id]["error_code"], responses[good_sent.request_id]["base_offset"]) == (0, 0)
    (letter,) = read_all(config, config.dlq_topic)
    assert letter.value() == bad and dict(letter.headers())["gw.errors.name"] == b"INVALID_TOPIC_EXCEPTION"
    (stored,) = stored_batches(config, "ct", 0)
    assert stored[21:] == good[21:]
