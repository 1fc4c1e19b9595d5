"""`make bench --only spread`: a load spread over every partition of a topic, beside a lone producer.

A librdkafka producer in a process of its own sends 100 B records at 2 000 records/s, record i to partition i % N
(linger 5 ms, acks=all), for a minute, over a topic of 4 and of 1 000 partitions; beside it, another process sends
one record at a time to a 4-partition topic and waits for each delivery report. The same against the bench's
Apache Kafka broker (the anchor) and through the front door of a running gateway (after a short run of each
layout, not counted: the gateway's first minute is not its steady state), in one run, the door's pairs twice. Then
Kafka's Java `ProducerPerformance` with the documented settings for the partitions it writes to (docs/clients.md:
`batch.size` cut so that `buffer.memory` holds every partition's batches) and `RoundRobinPartitioner`, 4 and 1 000
partitions, against Kafka and through the door: its rate at 1 000 over its rate at 4, beside Kafka's. Last, a
librdkafka consumer waiting at the end of the 1 000 partitions: the cores the door's process (with the driver) and
Kafka's broker use to serve it, beside the same with no consumer.

Reported per row: the share of the load's records delivered while it ran (a delivery report before its last
record was sent), the load's delivery latency p50, and the lone producer's round trip p50 / p99; the lone p99
ratio also over both pairs' round trips pooled; for each of the door's pairs, its micro-batches' p50 / p99 and
the machine's CPU by role (`tests.cpu_ledger`) per record of the load delivered. Printed, never asserted.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.bench_clients import ACKS_ALL, RECORD_SIZE, _last_batch, _progress_since, java_documented_props
from tests.bench_front_door import gateway_with_front_door
from tests.bench_stack import (
    BENCH_PARTITIONS,
    BENCH_TOPIC,
    CLIENT_ANCHOR_TOPIC,
    CLIENT_PARTITIONS,
    CLIENT_TOPIC,
    KAFKA_VERSION,
    Stack,
    quantile,
)
from tests.cpu_ledger import RowCpu, print_ledgers
from tests.librdkafka_client import Deliveries, run_in_own_process
from tests.producer_performance import run_producer_performance

RATE = 2000.0
LOAD_CONFIG = {"linger.ms": "5", "acks": "all", "queue.buffering.max.messages": "1000000"}
LONE_CONFIG = {"linger.ms": "0", "acks": "all"}
# Kafka's Java producer spreading over every partition with Kafka's own RoundRobinPartitioner (its default
# sticky partitioner writes a few partitions at a time)
ROUND_ROBIN = {"partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"}
JAVA_TIMEOUT_S = 120.0


def java_props(partitions: int) -> dict[str, str]:
    """The documented settings for a producer writing to `partitions` partitions at once, round robin."""
    return {**dict(ACKS_ALL + java_documented_props(partitions)), **ROUND_ROBIN}


def _java_rate(work: Path, bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """`ProducerPerformance` with `java_props`: its records/s (what it acknowledged per second of its run when it
    did not finish within `JAVA_TIMEOUT_S`)."""
    props = java_props(partitions)
    run = run_producer_performance(bootstrap, topic, records, RECORD_SIZE, props, work, JAVA_TIMEOUT_S)
    rate = run.summary.records_per_s if run.summary is not None else \
        sum(r for r, _rate in run.windows) / max(run.seconds, 1.0)
    print(f"    Java, RoundRobinPartitioner, batch.size {props['batch.size']}, {topic}: {rate:,.0f} records/s"
          + (f"   problems: {'; '.join(run.problems())}" if run.problems() else ""), flush=True)
    return rate


def _run_pair(work: Path, bootstrap: str, load_topic: str, partitions: int, lone_topic: str,
              seconds: float) -> tuple[Deliveries, Deliveries]:
    """The spread load and the lone producer, each in a process of its own, at the same time."""
    results: dict[str, Deliveries] = {}
    count = int(RATE * seconds)

    def load() -> None:
        results["load"] = run_in_own_process("spread", work / "load", bootstrap, load_topic, LOAD_CONFIG, count, 100,
                                             seconds + 5, rate=RATE, partitions=partitions)

    def lone() -> None:
        results["lone"] = run_in_own_process("send-and-wait", work / "lone", bootstrap, lone_topic, LONE_CONFIG,
                                             100_000, 100, seconds)

    threads = [threading.Thread(target=load), threading.Thread(target=lone)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results["load"], results["lone"]


def _lone_rtts(lone: Deliveries) -> list[float]:
    return [1000 * (lone.delivered[i] - lone.sent[i]) for i in lone.ok()]


def _row(where: str, partitions: int, load: Deliveries, lone: Deliveries) -> dict[str, float]:
    sent = [t for t in load.sent if t > 0.0]
    last_sent = max(sent) if sent else 0.0
    during = sum(1 for i in load.ok() if load.delivered[i] <= last_sent)
    latencies = [1000 * (load.delivered[i] - load.sent[i]) for i in load.ok()]
    rtt = _lone_rtts(lone)
    row = {"during": during / max(len(load.sent), 1), "load_p50": statistics.median(latencies) if latencies else -1.0,
           "lone_p50": statistics.median(rtt) if rtt else -1.0, "lone_p99": quantile(rtt, 0.99) or -1.0}
    print(f"{where:>14} {partitions:>6} {100 * row['during']:>9.1f} % {row['load_p50']:>10.1f} "
          f"{row['lone_p50']:>9.1f} {row['lone_p99']:>9.1f} {len(rtt):>6}"
          + (f"   problems: {'; '.join(load.problems() + lone.problems())}" if load.problems() or lone.problems()
             else ""), flush=True)
    return row


# A librdkafka consumer (its defaults) assigned every partition at its end, polling: a process of its own, so the
# bench's process (the driver and the door) and the broker count only what serving it costs
_TAIL_CONSUMER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_END
bootstrap, topic, partitions, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tail", "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
print("assigned", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    consumer.poll(0.2)
consumer.close()
"""
TAIL_SETTLE_S = 5.0


def tail_consumer_cpu(stack: Stack, bootstrap: str, topic: str, partitions: int, seconds: float) -> tuple[float, float]:
    """The cores the bench's process (the driver and the door) and the stack's broker use while a consumer waits
    at the end of `partitions` partitions of `topic` at `bootstrap`, after it settled: (process, broker)."""
    child = subprocess.Popen([sys.executable, "-c", _TAIL_CONSUMER, bootstrap, topic, str(partitions),
                              str(seconds + TAIL_SETTLE_S + 5)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "assigned"
        time.sleep(TAIL_SETTLE_S)  # its first fetches, from the offsets it looked up, out of the window
        with stack.cpu_measured() as window:
            time.sleep(seconds)
    finally:
        child.wait(timeout=seconds + 60)
    used = window.used
    if used is None:
        return -1.0, -1.0
    return used.bench / window.seconds, used.broker / window.seconds


def idle_cpu(stack: Stack, seconds: float) -> tuple[float, float]:
    """The same cores with no consumer: the floor of `tail_consumer_cpu`."""
    with stack.cpu_measured() as window:
        time.sleep(seconds)
    used = window.used
    return (-1.0, -1.0) if used is None else (used.bench / window.seconds, used.broker / window.seconds)


def bench_spread(work: Path, quick: bool) -> None:
    seconds = 20.0 if quick else 60.0
    warm_up = 5.0 if quick else 20.0
    print(f"\n== spread load: {RATE:.0f} records/s round-robin over every partition, beside one produce at a time; "
          f"local[2], {KAFKA_VERSION} broker on loopback ==")
    print(f"{'':>14} {'parts':>6} {'delivered while running':>11} {'load p50 ms':>10} {'lone p50':>9} "
          f"{'lone p99':>9} {'lone n':>6}")
    java_records = 50_000 if quick else 200_000
    java: dict[tuple[str, int], float] = {}
    kafka_rows: dict[int, dict[str, float]] = {}
    door_rows: dict[int, list[dict[str, float]]] = {CLIENT_PARTITIONS: [], BENCH_PARTITIONS: []}
    door_rtts: dict[int, list[float]] = {CLIENT_PARTITIONS: [], BENCH_PARTITIONS: []}  # both pairs' lone round trips
    door_cpu: dict[str, RowCpu] = {}
    with Stack(work) as stack:
        kafka = stack.broker.bootstrap_servers
        for partitions, topic in ((CLIENT_PARTITIONS, CLIENT_ANCHOR_TOPIC), (BENCH_PARTITIONS, "kafka-anchor")):
            load, lone = _run_pair(work / f"kafka-{partitions}", kafka, topic, partitions, CLIENT_ANCHOR_TOPIC, seconds)
            kafka_rows[partitions] = _row("Kafka", partitions, load, lone)
        for partitions, topic in ((CLIENT_PARTITIONS, CLIENT_ANCHOR_TOPIC), (BENCH_PARTITIONS, "kafka-anchor")):
            java[("kafka", partitions)] = _java_rate(work / f"java-kafka-{partitions}", kafka, topic, partitions,
                                                     java_records)
        with gateway_with_front_door(stack) as (door, query):
            # the gateway's first minute (its JVM's compilation, its workers' imports, the first opens of 1 000
            # partitions) is not the steady state the pairs compare: a short run of each layout first, not counted
            for partitions, topic in ((CLIENT_PARTITIONS, CLIENT_TOPIC), (BENCH_PARTITIONS, BENCH_TOPIC)):
                load, lone = _run_pair(work / f"door-warm-{partitions}", door, topic, partitions, CLIENT_TOPIC,
                                       warm_up)
                _row("(warm-up)", partitions, load, lone)
            for i, (partitions, topic) in enumerate(((CLIENT_PARTITIONS, CLIENT_TOPIC), (BENCH_PARTITIONS, BENCH_TOPIC),
                                                     (CLIENT_PARTITIONS, CLIENT_TOPIC), (BENCH_PARTITIONS, BENCH_TOPIC))):
                before = _last_batch(query)
                with stack.cpu_measured() as window:
                    load, lone = _run_pair(work / f"door-{i}", door, topic, partitions, CLIENT_TOPIC, seconds)
                door_rows[partitions].append(_row("front door", partitions, load, lone))
                # a lone round trip is one micro-batch or two (docs/performance.md): the pair's own, beside it
                batches = _progress_since(query, before)
                if batches:
                    print(f"{'':>14} micro-batches: p50 {statistics.median(batches):.3f} s, p99 "
                          f"{quantile(batches, 0.99) or 0.0:.3f} s ({len(batches)}, at most Spark's last 100)", flush=True)
                door_rtts[partitions] += _lone_rtts(lone)
                door_cpu[f"front door, {partitions} partitions, pair {i // 2 + 1}"] = RowCpu(window, len(load.ok()))
            for partitions, topic in ((CLIENT_PARTITIONS, CLIENT_TOPIC), (BENCH_PARTITIONS, BENCH_TOPIC)):
                java[("door", partitions)] = _java_rate(work / f"java-door-{partitions}", door, topic, partitions,
                                                        java_records)
            tail_seconds = 10.0 if quick else 20.0
            idle = idle_cpu(stack, tail_seconds)
            tail = tail_consumer_cpu(stack, door, BENCH_TOPIC, BENCH_PARTITIONS, tail_seconds)
        kafka_idle = idle_cpu(stack, tail_seconds)
        kafka_tail = tail_consumer_cpu(stack, kafka, "kafka-anchor", BENCH_PARTITIONS, tail_seconds)
    few, many = door_rows[CLIENT_PARTITIONS], door_rows[BENCH_PARTITIONS]
    # the micro-batches run back to back, so the cores are full at both layouts; what a record costs decides how
    # long a micro-batch of the records that came during the one before takes (docs/performance.md)
    print("\nCPU µs per record of the load delivered, by role, over each of the door's pairs:")
    print_ledgers(door_cpu)
    print("\nratios and targets (spread):")
    shares = ", ".join(f"{100 * r['during']:.1f} %" for r in many)
    print(f"  front door, delivered while running at {BENCH_PARTITIONS} partitions: {shares}  (target >= 95 %)")
    # a p99 of one pair's 200-400 round trips is its 2nd-4th slowest: both pairs' pooled are the steadier figure
    pooled = {n: quantile(rtts, 0.99) or -1.0 for n, rtts in door_rtts.items()}
    print(f"  front door, lone p99 at {BENCH_PARTITIONS} / at {CLIENT_PARTITIONS}, both pairs' round trips pooled: "
          f"{pooled[BENCH_PARTITIONS]:.1f} / {pooled[CLIENT_PARTITIONS]:.1f} ms = "
          f"{pooled[BENCH_PARTITIONS] / pooled[CLIENT_PARTITIONS]:.2f}  (target <= 1.5); each pair: "
          + ", ".join(f"{b['lone_p99'] / a['lone_p99']:.2f}" for a, b in zip(few, many, strict=True)))
    kafka_ratio = java[("kafka", BENCH_PARTITIONS)] / java[("kafka", CLIENT_PARTITIONS)]
    door_ratio = java[("door", BENCH_PARTITIONS)] / max(java[("door", CLIENT_PARTITIONS)], 1e-9)
    print(f"  Java RoundRobinPartitioner, {BENCH_PARTITIONS} / {CLIENT_PARTITIONS} partitions: front door "
          f"{door_ratio:.3f}, Kafka {kafka_ratio:.3f}; door ratio / Kafka's {door_ratio / kafka_ratio:.2f}  (target >= 0.7)")
    print(f"  a consumer at the end of {BENCH_PARTITIONS} partitions (librdkafka, its defaults), cores over "
          f"{tail_seconds:.0f} s: the door's process {tail[0]:.3f} (without it {idle[0]:.3f}); Kafka's broker "
          f"{kafka_tail[1]:.3f} (without it {kafka_idle[1]:.3f})")
    k4, k1000 = kafka_rows[CLIENT_PARTITIONS], kafka_rows[BENCH_PARTITIONS]
    print(f"  Kafka, lone p99 at {BENCH_PARTITIONS} / at {CLIENT_PARTITIONS}: {k1000['lone_p99'] / k4['lone_p99']:.2f}")
