"""`make bench`: measurements, reported not asserted.

1. The pure core: decision throughput (records/s on one core) for codec × timestamp type × value
   size × records per batch, beside the floor (CRC-32C and decompression of the same bytes).
2. End to end on the real stack: the same batches through the gateway (local Kafka + local Spark)
   and, side by side, produced straight to an Apache Kafka topic with the same topic configs via a
   plain ProduceRequest (Kafka's own produce path is the anchor).

Run: `make bench` (or `.venv/bin/python -m tests.bench [--quick]`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path

from crc32c import crc32c

from validators import record_batch as rb
from validators.compression import CompressionType, decompress
from validators.log_validator import PartitionState, validate_and_assign
from validators.record_batch import build_record_batch
from validators.topic_config import topic_config


def _batch(codec: CompressionType, records: int, value_size: int, now: int) -> bytes:
    value = b"v" * value_size
    return build_record_batch([(now - 1000 + i, b"key-%d" % i, value) for i in range(records)], compression=codec)


def _rate(fn, records: int, min_seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return n * records / elapsed


def _floor(codec: CompressionType, batch: bytes) -> None:
    crc32c(memoryview(batch)[rb.ATTRIBUTES_OFFSET :])
    if codec != CompressionType.NONE:
        decompress(codec, batch[rb.RECORD_BATCH_OVERHEAD :])


def bench_core(min_seconds: float) -> None:
    now = int(time.time() * 1000)
    print("\n== core: validate_and_assign, records/s on one core ==")
    print(f"{'codec':6} {'type':13} {'value':>6} {'recs':>5} {'decision':>14} {'floor':>14}  floor = crc32c (+ decompress)")
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
        for ts_type in ("CreateTime", "LogAppendTime"):
            config = topic_config("bench", 1, {"message.timestamp.type": ts_type}, {})
            for value_size in (100, 1024):
                for records in (1, 100, 1000):
                    batch = _batch(codec, records, value_size, now)
                    state = PartitionState()
                    decision = _rate(partial(validate_and_assign, batch, "bench", 0, config, state, now), records, min_seconds)
                    floor_rate = _rate(partial(_floor, codec, batch), records, min_seconds)
                    print(f"{codec.name.lower():6} {ts_type:13} {value_size:>6} {records:>5} {decision:>14,.0f} {floor_rate:>14,.0f}")


def bench_end_to_end(batches: int, records: int, latency_batches: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    from sinks.responses import decode_response
    from streaming.config import GatewayConfig
    from streaming.local_kafka import LocalKafka, create_topics
    from streaming.query import start_gateway, stop_gracefully, topic_specs
    from streaming.session import build_spark_session
    from tests.integration.gateway_io import produce_batches
    from tests.kafka_wire import ProduceConnection

    work = Path(tempfile.mkdtemp(prefix="gateway-bench-"))
    print(f"\n== end to end: {batches} batches x {records} records (100-byte values), LogAppendTime ==")
    with LocalKafka(work / "kafka") as broker:
        topics = work / "topics.json"
        topics.write_text('{"topics": {"bench": {"partitions": 4, "configs": {"message.timestamp.type": "LogAppendTime"}}}}')
        run = uuid.uuid4().hex[:6]
        config = GatewayConfig(
            bootstrap_servers=broker.bootstrap_servers, ingress_topic=f"in-{run}", ingress_partitions=4,
            response_topic=f"resp-{run}", dlq_topic=f"dlq-{run}", topics_file=str(topics),
            segments_root=str(work / "segments"), checkpoint_root=str(work / "checkpoints"), query_name=f"bench_{run}",
            spark_master="local[2]", shuffle_partitions=4, ui_enabled=False, max_offsets_per_trigger=100_000,
        )
        create_topics(config.bootstrap_servers, topic_specs(config) + [("kafka-anchor", 4, {"message.timestamp.type": "LogAppendTime"})])
        now = int(time.time() * 1000)
        payloads = [("bench", i % 4, _batch(CompressionType.NONE, records, 100, now)) for i in range(batches)]
        total_bytes = sum(len(b) for _, _, b in payloads)

        # Kafka's produce path: the same batches, one ProduceRequest each (acks=-1), sequentially.
        start = time.perf_counter()
        latencies = []
        with ProduceConnection(broker.bootstrap_servers) as conn:
            for _, partition, batch in payloads:
                t0 = time.perf_counter()
                result = conn.produce("kafka-anchor", partition, batch)
                latencies.append((time.perf_counter() - t0) * 1000)
                assert result.error_code == 0, result
        kafka_s = time.perf_counter() - start
        _report("Apache Kafka 4.2.1 (sequential produce)", batches * records, total_bytes, kafka_s, latencies)

        spark = build_spark_session(config, app_name="gateway-bench")
        try:
            # Throughput: everything queued up front, drained in several micro-batches; the first
            # micro-batch (query start, JIT, worker start) is reported apart from the steady state.
            produce_batches(config, payloads)
            per_trigger = max(1, batches // 3)
            query, _ = start_gateway(spark, config.with_overrides(max_offsets_per_trigger=per_trigger), available_now=True)
            query.awaitTermination()
            progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
            steady = progress[1:] or progress
            rows = sum(p["numInputRows"] for p in steady)
            seconds = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
            print(f"gateway steady state ({len(steady)} micro-batches of {per_trigger} batches): "
                  f"{rows * records / seconds:,.0f} records/s, {rows * len(payloads[0][2]) / seconds / 1e6:.2f} MB/s; "
                  f"first micro-batch {progress[0]['durationMs']['triggerExecution'] / 1000:.1f} s")
            print(f"ratio gateway/Kafka throughput: {(rows * records / seconds) / (batches * records / kafka_s):.2f}")

            # Latency: a running query (200 ms trigger) on fresh topics, a producer at 10 batches/s.
            config = config.with_overrides(
                trigger_interval="200 milliseconds", query_name=f"bench_latency_{run}",
                ingress_topic=f"in-lat-{run}", response_topic=f"resp-lat-{run}", dlq_topic=f"dlq-lat-{run}",
                checkpoint_root=str(work / "checkpoints-latency"), segments_root=str(work / "segments-latency"),
            )
            create_topics(config.bootstrap_servers, topic_specs(config))
            query, _ = start_gateway(spark, config)
            c = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": f"bench-{run}"})
            c.assign([TopicPartition(config.response_topic, p, 0) for p in range(config.ingress_partitions)])
            producer = Producer({"bootstrap.servers": config.bootstrap_servers, "linger.ms": 0})
            produced_at: dict[str, int] = {}
            for i in range(latency_batches):
                topic, partition, batch = payloads[i % len(payloads)]
                rid = uuid.uuid4().hex
                produced_at[rid] = int(time.time() * 1000)
                producer.produce(config.ingress_topic, key=f"{topic}/{partition}".encode(), value=batch,
                                 headers=[("gw.topic", topic.encode()), ("gw.partition", str(partition).encode()),
                                          ("gw.request.id", rid.encode())])
                producer.poll(0)
                time.sleep(0.1)  # the offered load: 10 batches/s (pacing, not synchronisation)
            producer.flush(30)
            sent = list(produced_at)
            lat: list[float] = []
            deadline = time.monotonic() + 120
            while len(lat) < len(sent) and time.monotonic() < deadline:
                m = c.poll(1)
                if m is None or m.error():
                    continue
                r = decode_response(m.value())
                if r["request_id"] in produced_at:
                    lat.append(m.timestamp()[1] - produced_at[r["request_id"]])
            c.close()
            stop_gracefully(query)
            _report(f"gateway produce -> response at 10 batches/s ({len(lat)} of {len(sent)})",
                    len(lat) * records, len(lat) * len(payloads[0][2]), max(1e-9, len(sent) * 0.1), lat)
        finally:
            spark.stop()


def _report(name: str, records: int, nbytes: int, seconds: float, latencies_ms: list[float]) -> None:
    q = statistics.quantiles(latencies_ms, n=100) if len(latencies_ms) > 1 else [0.0] * 99
    print(f"{name}: {records / seconds:,.0f} records/s, {nbytes / seconds / 1e6:.2f} MB/s, "
          f"latency ms p50 {q[49]:.1f} p95 {q[94]:.1f} p99 {q[98]:.1f} ({seconds:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench")
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--core-only", action="store_true")
    parser.add_argument("--end-to-end-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.end_to_end_only:
        bench_core(0.2 if args.quick else 1.0)
    if not args.core_only:
        bench_end_to_end(batches=500 if args.quick else 3000, records=100, latency_batches=50 if args.quick else 200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
