"""The clients end to end on the real broker and a running gateway query (processing-time trigger):
GatewayProducer → ingress → gateway → responses → futures and callbacks (RecordMetadata semantics for
both timestamp types, rejected batches with Kafka's error and record errors, idempotent sequences
after a rejection, acks=0, delivery timeout, client-side size check), then GatewayConsumer over the
segments the gateway wrote (KIP-32 timestamps, both clocks, offsets_for_times)."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from concurrent.futures import Future

import pytest

from clients import (
    GatewayConsumer,
    GatewayError,
    GatewayProducer,
    KafkaTimeoutError,
    ProducerConfig,
    RecordMetadata,
    RecordTooLargeError,
    TopicPartition,
)
from clients.errors import PART_OF_INVALID_BATCH
from clients.partitioner import partition_for_key
from kafka_cluster.admin import create_topics
from streaming.query import start_gateway, stop_gracefully
from tests.integration.gateway_io import create_gateway_topics
from validators.codec.record_batch import TimestampType

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


class Calls:
    """Callback outcomes in the order the producer fired them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, RecordMetadata, GatewayError | None]] = []

    def __call__(self, name: str):
        def on_completion(metadata: RecordMetadata, error: GatewayError | None) -> None:
            self.seen.append((name, metadata, error))
        return on_completion

    def of(self, name: str) -> tuple[RecordMetadata, GatewayError | None]:
        (hit,) = [(m, e) for n, m, e in self.seen if n == name]
        return hit


def producer_config(config, **kw) -> ProducerConfig:
    base = dict(bootstrap_servers=config.bootstrap_servers, ingress_topic=config.ingress_topic,
                response_topic=config.response_topic, client_id="e2e", linger_ms=20,
                partitions={"ct": 2, "lat": 2}, delivery_timeout_ms=120_000)
    base.update(kw)
    return ProducerConfig(**base)


def test_producer_callbacks_and_consumer_for_both_timestamp_types(spark, gateway_config) -> None:
    config = gateway_config.with_overrides(trigger_interval="500 milliseconds")
    create_gateway_topics(config)
    query, _ = start_gateway(spark, config)
    producers: list[GatewayProducer] = []
    try:
        t0 = int(time.time() * 1000)
        calls = Calls()

        # ---- accepted records of both timestamp types; keyed ct records are partitioned like Kafka
        p = GatewayProducer(producer_config(config, compression="lz4"))
        producers.append(p)
        ct_sent: dict[str, tuple[Future, bytes, int]] = {}
        for i in range(10):
            key = f"key-{i}".encode()
            ts = t0 - 1000 + i
            ct_sent[f"ct{i}"] = (p.send("ct", f"ct-value-{i}".encode(), key=key, timestamp_ms=ts,
                                        headers=[("n", str(i).encode())], callback=calls(f"ct{i}")), key, ts)
        lat_sent = {f"lat{i}": (p.send("lat", f"lat-value-{i}".encode(), partition=1, timestamp_ms=t0 - DAY_MS + i,
                                       callback=calls(f"lat{i}")), t0 - DAY_MS + i) for i in range(6)}
        assert p.flush(120) == 0

        per_partition: dict[int, list[int]] = defaultdict(list)
        for name, (future, key, ts) in ct_sent.items():
            md = future.result(0)
            assert calls.of(name) == (md, None)
            assert md.partition == partition_for_key(key, 2) and md.topic == "ct"
            assert (md.timestamp, md.timestamp_type) == (ts, TimestampType.CREATE_TIME)  # KIP-32: CreateTime
            assert md.serialized_key_size == len(key) and md.request_id.startswith("e2e-")
            per_partition[md.partition].append(md.offset)
        for offsets in per_partition.values():  # send order = offset order within a partition
            assert offsets == list(range(len(offsets)))
        lat_md = {name: f.result(0) for name, (f, _) in lat_sent.items()}
        assert [m.offset for m in lat_md.values()] == list(range(6))
        for md in lat_md.values():  # KIP-32: the broker's append time, not the producer's create time
            assert md.timestamp_type == TimestampType.LOG_APPEND_TIME and md.timestamp >= t0
        assert sorted(n for n, _, _ in calls.seen) == sorted(list(ct_sent) + list(lat_sent))
        # callbacks of one partition fire in send order
        order = [n for n, m, _ in calls.seen if n.startswith("ct") and m.partition == 0]
        assert order == [n for n, (f, _, _) in ct_sent.items() if f.result(0).partition == 0]

        # ---- a rejected batch: every record's callback gets INVALID_TIMESTAMP and the record errors
        one_batch = GatewayProducer(producer_config(config, linger_ms=600_000, client_id="e2e-rejected"))
        producers.append(one_batch)
        bad = [one_batch.send("ct", f"r{i}".encode(), partition=1, timestamp_ms=ts, callback=calls(f"bad{i}"))
               for i, ts in enumerate([t0, t0 + 2 * HOUR_MS, t0 + 1])]
        assert one_batch.flush(120) == 0
        errors = [f.exception(0) for f in bad]
        assert all(isinstance(e, GatewayError) and e.error_name == "INVALID_TIMESTAMP" and e.error_code == 32
                   for e in errors)
        assert all([(r.batch_index, r.message.startswith("Timestamp ")) for r in e.record_errors] == [(1, True)]
                   for e in errors)
        assert errors[1].message.startswith(f"Timestamp {t0 + 2 * HOUR_MS} of message with offset 1 is out of range")
        assert errors[1].exception_name == "InvalidTimestampException"
        assert errors[0].message == errors[2].message == PART_OF_INVALID_BATCH
        assert errors[0].batch_message == "One or more records have been rejected due to invalid timestamp"
        for i in range(3):
            md, err = calls.of(f"bad{i}")
            assert err is errors[i] and (md.topic, md.partition, md.offset, md.timestamp) == ("ct", 1, -1, -1)

        # ---- idempotence: after a rejected batch the sequence is given back, the next batch is accepted
        idem = GatewayProducer(producer_config(config, client_id="e2e-idempotent", enable_idempotence=True,
                                               producer_id=777_001))
        producers.append(idem)
        first = [idem.send("ct", b"a", partition=0, timestamp_ms=t0) for _ in range(2)]  # sequences 0, 1
        assert idem.flush(120) == 0
        rejected = idem.send("ct", b"late", partition=0, timestamp_ms=t0 + 5 * HOUR_MS)  # sequence 2: rejected
        idem.flush(120)
        assert rejected.exception(0).error_name == "INVALID_TIMESTAMP"
        after = idem.send("ct", b"b", partition=0, timestamp_ms=t0)  # sequence 2 again, not 3 (a gap: error 45)
        assert idem.flush(120) == 0
        assert after.exception(0) is None, after.exception(0)
        assert [f.result(0).offset for f in first] == [first[0].result(0).offset, first[0].result(0).offset + 1]
        assert after.result(0).offset == first[1].result(0).offset + 1 and idem.producer_epoch == 0

        # ---- acks=0: done when the ingress message is written; offset unknown, timestamp = CreateTime
        fire = GatewayProducer(producer_config(config, acks=0, client_id="e2e-acks0"))
        producers.append(fire)
        f0 = fire.send("ct", b"fire-and-forget", partition=0, timestamp_ms=t0 + 7)
        md0 = f0.result(60)
        assert (md0.offset, md0.timestamp, md0.timestamp_type) == (-1, t0 + 7, TimestampType.CREATE_TIME)
        # a later acknowledged batch of the same partition is appended after it
        marker = p.send("ct", b"marker", partition=0, timestamp_ms=t0 + 8)
        assert p.flush(120) == 0
        marker_offset = marker.result(0).offset

        # ---- client-side errors: too large for max.request.size; no answer within delivery.timeout.ms
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            p.send("ct", bytes(2 * 1024 * 1024), partition=0).result(0)
        unread = f"unread-ingress-{uuid.uuid4().hex[:6]}"
        create_topics(config.cluster, [(unread, 1, {})])
        lonely = GatewayProducer(producer_config(config, ingress_topic=unread, delivery_timeout_ms=1500,
                                                 client_id="e2e-timeout"))
        producers.append(lonely)
        timed_out = lonely.send("ct", b"nobody answers", partition=0)
        err = timed_out.exception(30)
        assert isinstance(err, KafkaTimeoutError) and err.error_name == "REQUEST_TIMED_OUT"
        assert err.message.startswith("Expiring 1 record(s) for ct-0:")

        # ---- the consumer reads what the producer was told, with both clocks
        consumer = GatewayConsumer(config.path(config.segments_root))
        tps = [TopicPartition("ct", 0), TopicPartition("ct", 1), TopicPartition("lat", 0), TopicPartition("lat", 1)]
        consumer.assign(tps)
        records = consumer.poll(timeout_s=5, max_records=10_000)
        got = {(r.topic, r.partition, r.offset): r for r in records}
        for name, (future, key, ts) in ct_sent.items():
            md = future.result(0)
            r = got[("ct", md.partition, md.offset)]
            assert (r.key, r.value, r.timestamp, r.timestamp_type) == (key, f"ct-value-{name[2:]}".encode(), ts,
                                                                      TimestampType.CREATE_TIME)
            assert r.create_time == ts and r.log_append_time >= t0  # wall-clock append time from the index
            assert r.headers == (("n", name[2:].encode()),)
        for name, md in lat_md.items():
            r = got[("lat", 1, md.offset)]
            assert (r.timestamp, r.timestamp_type, r.log_append_time) == (md.timestamp, TimestampType.LOG_APPEND_TIME,
                                                                         md.timestamp)
            assert r.create_time == lat_sent[name][1]  # the producer's CreateTime survives inside the batch
        fired = [r for r in records if r.value == b"fire-and-forget"]
        assert len(fired) == 1 and fired[0].partition == 0 and fired[0].offset < marker_offset
        assert not [r for r in records if r.value in (b"r0", b"r1", b"r2", b"late", b"nobody answers")]
        # ListOffsets by time: the first ct-0 record at or after the third ct-0 record's timestamp
        ct0 = sorted((r for r in records if (r.topic, r.partition) == ("ct", 0)), key=lambda r: r.offset)
        target = ct0[2].timestamp
        expected = min(r.offset for r in ct0 if r.timestamp >= target)
        found = consumer.offsets_for_times({TopicPartition("ct", 0): target})[TopicPartition("ct", 0)]
        assert found is not None and found.offset == expected and found.timestamp >= target
        assert consumer.end_offsets([TopicPartition("lat", 1), TopicPartition("lat", 0)]) == {
            TopicPartition("lat", 1): 6, TopicPartition("lat", 0): 0}
        consumer.close()
    finally:
        for producer in producers:
            producer.close(10)
        stop_gracefully(query)
