"""Walking skeleton end to end: real batches (built by kafka-python, an independent Kafka codec)
→ real Kafka ingress topic → the gateway's Spark query → segment files and produce responses."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from embedded.native_libraries import jni_library_file, unpacked_rocksdb_dir
from sinks.micro_batch import MicroBatchSummary
from storage.file_names import partition_dir, segment_file_name
from streaming.query import start_gateway
from streaming.session import stop_state_stores
from tests.integration.gateway_io import (
    SentBatch,
    create_gateway_topics,
    produce_batches,
    read_all,
    read_responses,
)
from validators.codec import record_batch as rb

pytestmark = pytest.mark.integration


def kafka_python_batch(timestamps: list[int], key: bytes | None = b"k", compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=key, value=f"value-{i}-{ts}".encode(), headers=[("h", b"v")])
    return bytes(builder.build())


def run_available_now(spark, config) -> None:
    query, _ = start_gateway(spark, config, available_now=True)
    query.awaitTermination()
    assert query.exception() is None


def read_segment(config, topic: str, partition: int) -> list[bytes]:
    """Split the partition's segment file into its batches; the file must be exactly their concatenation."""
    data = (partition_dir(config.path(config.segments_root), topic, partition) / segment_file_name(0)).read_bytes()
    batches, pos = [], 0
    while pos < len(data):
        size = rb.parse_header(data[pos:]).size_in_bytes
        batches.append(data[pos : pos + size])
        pos += size
    assert pos == len(data), "trailing bytes after the last batch"
    return batches


def round_of_batches(per_partition: int, records: int) -> list[tuple[str, int, bytes]]:
    now = int(time.time() * 1000)
    return [
        (topic, partition, kafka_python_batch([now - 60_000 + 10 * n + i for i in range(records)]))
        for n in range(per_partition)
        for topic in ("ct", "lat")
        for partition in (0, 1)
    ]


def check_round(config, sent: list[SentBatch], responses: dict[str, dict], next_offset: dict, last_append: dict) -> None:
    by_tp: dict[tuple[str, int], list[SentBatch]] = defaultdict(list)
    for s in sent:
        by_tp[(s.topic, s.partition)].append(s)
    for (topic, partition), items in by_tp.items():
        stored = {DefaultRecordBatch(b).base_offset: b for b in read_segment(config, topic, partition)}
        for s in items:  # produce order = ingress order for one target partition
            r = responses[s.request_id]
            assert (r["error_code"], r["error_name"], r["error_message"]) == (0, None, None)
            assert (r["topic"], r["partition"]) == (topic, partition)
            # contiguous offsets, continuing the log end offset, no gap and no duplicate
            assert r["base_offset"] == next_offset[(topic, partition)]
            next_offset[(topic, partition)] += r["record_count"]
            batch = stored[r["base_offset"]]
            theirs = DefaultRecordBatch(batch)  # kafka-python reads what we stored
            records = list(DefaultRecordBatch(batch))  # (its record iterator is one-shot)
            assert theirs.validate_crc() and rb.is_valid(batch)
            assert batch[rb.RECORD_BATCH_OVERHEAD :] == s.batch[rb.RECORD_BATCH_OVERHEAD :], "record bytes changed"
            assert batch[23:35] == s.batch[23:35], "lastOffsetDelta/baseTimestamp changed"
            assert [rec.offset for rec in records] == list(range(r["base_offset"], r["base_offset"] + r["record_count"]))
            if topic == "lat":
                lat = r["log_append_time_ms"]
                assert theirs.timestamp_type == 1 and theirs.max_timestamp == lat
                assert lat >= s.produced_at_ms
                assert lat >= last_append.get((topic, partition), -1)
                last_append[(topic, partition)] = lat
                assert all(rec.timestamp == lat for rec in records)
            else:
                original = DefaultRecordBatch(s.batch)
                assert r["log_append_time_ms"] == -1
                assert theirs.timestamp_type == 0 and theirs.max_timestamp == original.max_timestamp
                assert [rec.timestamp for rec in records] == [rec.timestamp for rec in DefaultRecordBatch(s.batch)]
        # the segment holds exactly the appended batches, nothing more
        assert sum(DefaultRecordBatch(b).last_offset_delta + 1 for b in stored.values()) == next_offset[(topic, partition)]


def test_batches_flow_end_to_end_and_continue_after_restart(spark, gateway_config) -> None:
    config = gateway_config
    create_gateway_topics(config)
    next_offset: dict = defaultdict(int)
    last_append: dict = {}

    sent = produce_batches(config, round_of_batches(per_partition=4, records=3))
    run_available_now(spark, config)
    responses = {r["request_id"]: r for r in read_responses(config)}
    assert len(responses) == len(sent)
    check_round(config, sent, responses, next_offset, last_append)

    # Stop, then start again from the checkpoint with more traffic.
    more = produce_batches(config, round_of_batches(per_partition=3, records=5))
    run_available_now(spark, config)
    responses = {r["request_id"]: r for r in read_responses(config)}
    assert len(responses) == len(sent) + len(more)
    check_round(config, more, responses, next_offset, last_append)
    assert read_all(config, config.dlq_topic) == []


def test_the_state_stores_stop_before_the_session_and_a_later_query_loads_them_again(spark, gateway_config) -> None:
    """`streaming.session.stop_session`'s first step: once a stateful query has run, Spark's state store
    maintenance runs in the driver's JVM (local mode); `stop_state_stores` stops it, so it cannot wake while
    the session stops. A query started afterwards loads its stores again and answers."""
    config = gateway_config
    create_gateway_topics(config)
    state = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state
    state_store = getattr(getattr(state, "StateStore$"), "MODULE$")
    sent = produce_batches(config, round_of_batches(per_partition=1, records=1))
    run_available_now(spark, config)
    assert state_store.isMaintenanceRunning()

    stop_state_stores(spark)
    assert not state_store.isMaintenanceRunning()

    more = produce_batches(config, round_of_batches(per_partition=1, records=1))
    run_available_now(spark, config)
    assert len(read_responses(config)) == len(sent) + len(more)
    assert state_store.isMaintenanceRunning()


def test_the_state_store_loads_rocksdb_from_the_library_make_jars_unpacked(spark, gateway_config) -> None:
    """embedded/native_libraries.py: the driver's JVM (local mode: the executor too) maps RocksDB's library from
    `.jvm/native/`, not from a copy in the temporary directory that a killed JVM would leave behind."""
    unpacked = unpacked_rocksdb_dir()
    assert unpacked is not None, "make jars unpacks RocksDB's library"
    config = gateway_config
    create_gateway_topics(config)
    sent = produce_batches(config, round_of_batches(per_partition=1, records=1))
    run_available_now(spark, config)
    assert len(read_responses(config)) == len(sent)

    jvm_pid = spark.sparkContext._gateway.proc.pid  # PySpark's handle on its JVM
    mapped = {line.split()[-1] for line in Path(f"/proc/{jvm_pid}/maps").read_text().splitlines()
              if "librocksdbjni" in line}
    assert mapped == {str(unpacked / jni_library_file())}


def test_a_later_micro_batch_compiles_no_code(spark, gateway_config) -> None:
    """sinks/micro_batch.py: the micro-batch's id rides beside the decisions as a string literal, which Spark's
    generated code takes as a reference. An integer literal is written into the generated Java source, so each
    micro-batch would compile a class of its own (Spark's codegen cache keys on the source)."""
    config = gateway_config
    create_gateway_topics(config)
    codegen = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    sent = produce_batches(config, round_of_batches(per_partition=1, records=1))
    run_available_now(spark, config)
    compiled = codegen.METRIC_COMPILATION_TIME().getCount()

    more = produce_batches(config, round_of_batches(per_partition=1, records=1))
    run_available_now(spark, config)  # the next micro-batch id, from the checkpoint
    assert len(read_responses(config)) == len(sent) + len(more)
    assert codegen.METRIC_COMPILATION_TIME().getCount() == compiled


def test_bad_input_is_answered_and_dead_lettered_not_fatal(spark, gateway_config) -> None:
    config = gateway_config
    create_gateway_topics(config)
    now = int(time.time() * 1000)
    good = kafka_python_batch([now])
    sent = produce_batches(config, [
        ("ct", 0, b"\x00garbage"),           # shorter than one batch frame: no batch at all
        ("nope", 0, good),                   # unknown topic
        ("ct", 7, good),                     # unknown partition
        ("bad topic!", 0, good),             # illegal topic name
        ("ct", 0, good[:-1] + b"\xff"),      # CRC mismatch
        ("ct", 0, good),                     # fine
    ])
    p = Producer({"bootstrap.servers": config.bootstrap_servers})
    p.produce(config.ingress_topic, value=good, headers=[("gw.partition", b"0")])  # no gw.topic
    p.produce(config.ingress_topic, value=good, headers=[("gw.topic", b"ct"), ("gw.partition", b"zero")])
    p.produce(config.ingress_topic, value=good, headers=[("gw.topic", b"ct"), ("gw.partition", b"0"), ("gw.acks", b"0")])
    assert p.flush(30) == 0

    run_available_now(spark, config)
    by_id = {r["request_id"]: r for r in read_responses(config)}
    codes = [by_id[s.request_id]["error_name"] for s in sent]
    assert codes == ["INVALID_RECORD", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION",
                     "INVALID_TOPIC_EXCEPTION", "CORRUPT_MESSAGE", None]
    headerless = [r for r in by_id.values() if r["client_id"] is None]
    assert sorted(r["error_name"] for r in headerless) == ["INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION"]
    assert all(":" in r["request_id"] for r in headerless)  # <ingress-partition>:<ingress-offset>
    assert len(by_id) == 8  # the gw.acks=0 batch gets no response ...
    # ... but every ingress message ends in exactly one place: appended or dead-lettered.
    letters = read_all(config, config.dlq_topic)
    assert len(letters) == 7
    assert {bytes(m.value()) for m in letters} >= {b"\x00garbage", good[:-1] + b"\xff"}
    appended = read_segment(config, "ct", 0)
    assert len(appended) == 2
    for m in letters:
        headers = dict(m.headers())
        assert int(headers["gw.errors.code"]) != 0 and headers["gw.errors.name"]
        assert headers["gw.errors.ingress.topic"].decode() == config.ingress_topic


def test_observers_get_each_micro_batch_from_the_query_progress_and_the_listener_leaves(spark, gateway_config) -> None:
    """The query's sink is Spark's foreachBatch; every micro-batch with input reaches the observers once, after
    Spark committed it, with its tasks' counts and Spark's addBatch time, and the sink's listener is gone once
    the query's termination reached the sink."""
    config = gateway_config.with_overrides(max_offsets_per_trigger=4)
    create_gateway_topics(config)
    sent = produce_batches(config, round_of_batches(per_partition=3, records=2))
    listeners = len(spark._jsparkSession.streams().listListeners())
    seen: list[tuple[int, MicroBatchSummary]] = []
    query, sink = start_gateway(spark, config, available_now=True, observers=[lambda b, s: seen.append((b, s))])
    query.awaitTermination()
    assert query.exception() is None
    assert sink.wait_terminated(60), "the query's termination never reached its sink"
    progress = {p["batchId"]: p for p in query.recentProgress if p["numInputRows"] > 0}
    assert len(progress) > 1, "several micro-batches were meant to run"
    assert all("ForeachBatchSink" in p["sink"]["description"] for p in progress.values())
    assert [b for b, _ in seen] == sorted(progress)
    for batch_id, summary in seen:
        assert summary.batch_id == batch_id
        assert summary.sink_seconds == progress[batch_id]["durationMs"]["addBatch"] / 1000
        assert summary.partitions >= 1
    assert sum(s.appended_batches for _, s in seen) == len(sent)
    assert sum(s.responses for _, s in seen) == len(sent)
    assert sink.last_summary is seen[-1][1]
    # the retention schedule's listener leaves from its own thread once that thread sees the termination
    assert sink.retention is not None and sink.retention.join(60), "the retention schedule never stopped"
    assert len(spark._jsparkSession.streams().listListeners()) == listeners
