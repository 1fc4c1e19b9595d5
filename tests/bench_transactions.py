"""`make bench --only transactions`: a transactional producer that commits every 100 ms, beside the same producer
without transactions (idempotent, flushing every 100 ms), against the bench's Apache Kafka broker and through
the front door of a running gateway, in one run.

librdkafka (confluent-kafka) in a process of its own, 100 B records, acks=all, linger 5 ms, to a 4-partition
topic; each cycle produces for 100 ms as fast as the client takes records, then commits (or flushes). Reported
per row, the median of three 15 s runs (5 s with --quick): records committed per second, commits per second,
and the commit's p50 / p99 (EndTxn with its flush; the flush alone without transactions). Printed, never
asserted.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from tests.bench_front_door import gateway_with_front_door
from tests.bench_stack import (
    CLIENT_ANCHOR_TOPIC,
    CLIENT_PARTITIONS,
    CLIENT_TOPIC,
    KAFKA_VERSION,
    Stack,
    quantile,
)

CYCLE_S = 0.1
VALUE = b"x" * 100
CONFIG = {"linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 100_000}


def run_cycles(bootstrap: str, topic: str, transactional: bool, seconds: float) -> dict[str, object]:
    """The producer's loop (in the child process): records acknowledged, and each commit's (or flush's) seconds."""
    config = {"bootstrap.servers": bootstrap, **CONFIG}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(60)
    acked, commits = 0, []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        if transactional:
            producer.begin_transaction()
        cycle_end = time.monotonic() + CYCLE_S
        sent = 0
        while time.monotonic() < cycle_end:
            try:
                producer.produce(topic, VALUE, partition=i % CLIENT_PARTITIONS)
                sent += 1
                i += 1
            except BufferError:
                producer.poll(0.001)
            producer.poll(0)
        started = time.monotonic()
        if transactional:
            producer.commit_transaction(60)
        else:
            producer.flush(60)
        commits.append(time.monotonic() - started)
        acked += sent
    return {"records": acked, "commits": commits, "seconds": seconds}


def _child(bootstrap: str, topic: str, transactional: bool, seconds: float) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", __name__, bootstrap, topic, "1" if transactional else "0",
                           str(seconds)], capture_output=True, text=True, timeout=seconds + 180, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(where: str, mode: str, runs: list[dict[str, object]]) -> dict[str, float]:
    errors = [str(r["error"]) for r in runs if "error" in r]
    ok = [r for r in runs if "error" not in r]
    rates = [r["records"] / r["seconds"] for r in ok]  # type: ignore[operator]
    commit_rates = [len(r["commits"]) / r["seconds"] for r in ok]  # type: ignore[arg-type,operator]
    latencies = [1000 * c for r in ok for c in r["commits"]]  # type: ignore[attr-defined]
    row = {"rate": statistics.median(rates) if rates else 0.0,
           "commits": statistics.median(commit_rates) if commit_rates else 0.0,
           "p50": statistics.median(latencies) if latencies else -1.0, "p99": quantile(latencies, 0.99) or -1.0}
    print(f"{where:>12} {mode:>16} {row['rate']:>12,.0f} {row['commits']:>9.1f} {row['p50']:>9.1f} "
          f"{row['p99']:>9.1f}" + (f"   problems: {'; '.join(errors)}" if errors else ""), flush=True)
    return row


def bench_transactions(work: Path, quick: bool) -> None:
    seconds = 5.0 if quick else 15.0
    print(f"\n== transactions: librdkafka, 100 B records, commit every {1000 * CYCLE_S:.0f} ms (or flush without "
          f"transactions), median of 3 runs of {seconds:.0f} s; local[2], {KAFKA_VERSION} broker on loopback ==")
    print(f"{'':>12} {'':>16} {'records/s':>12} {'commits/s':>9} {'commit p50':>9} {'p99 ms':>9}")
    rows: dict[tuple[str, bool], dict[str, float]] = {}
    with Stack(work) as stack:
        kafka = stack.broker.bootstrap_servers
        for transactional in (True, False):
            runs = [_child(kafka, CLIENT_ANCHOR_TOPIC, transactional, seconds) for _ in range(3)]
            rows[("kafka", transactional)] = _row("Kafka", "transactional" if transactional else "idempotent", runs)
        with gateway_with_front_door(stack) as (door, _query):
            for transactional in (True, False):
                runs = [_child(door, CLIENT_TOPIC, transactional, seconds) for _ in range(3)]
                rows[("door", transactional)] = _row("front door", "transactional" if transactional else "idempotent",
                                                     runs)
    print("\nratios (transactions):")
    for where in ("kafka", "door"):
        txn, plain = rows[(where, True)], rows[(where, False)]
        print(f"  {where}: transactional / idempotent records/s {txn['rate'] / max(plain['rate'], 1e-9):.2f}")
    print(f"  front door / Kafka, transactional records/s "
          f"{rows[('door', True)]['rate'] / max(rows[('kafka', True)]['rate'], 1e-9):.2f}")


if __name__ == "__main__":
    result = run_cycles(sys.argv[1], sys.argv[2], sys.argv[3] == "1", float(sys.argv[4]))
    print(json.dumps(result))
