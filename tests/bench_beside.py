"""The gateway's own backlog with a producer's traffic beside it: how much of the gap to the backlog is the traffic.

The clients section compares each throughput row through the front door with the gateway's own backlog (raw batches queued
on the ingress topic before the query starts). The backlog has the machine to itself; a front-door row shares it
with its producer, the broker that takes the producer's requests (the ingress hop) and the front door. For each
documented row the clients section drains the backlog again, alone and while Kafka's `ProducerPerformance`, throttled
to that row's records/s, sends to Kafka's anchor topic (`backlog_beside`), and prints the row's ratio to the
backlog beside the same traffic. (First measured with a scratch script, 2026-11-27: 280 000 and 390 000 records/s
beside it left the backlog 0.58 and 0.46 of its rate alone; the bench's own pairs later the same day, 0.65-1.21.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from embedded.local_kafka import log4j2_config, spawn_tied_to_parent
from tests.bench_stack import Row, Stack, drain_row
from tests.jvm_threads import jvm_cpu
from tests.producer_performance import WINDOW, heap_for, producer_command, stop_group


@dataclass(frozen=True)
class Traffic:
    """What the producer beside the backlog sends: its settings, the Kafka topic and the records' value size."""

    props: Mapping[str, str]
    topic: str
    record_size: int

# The producer has reached its rate when it prints its first window (every 5 s); a producer that prints none
# by then has failed, and the row says so.
READY_TIMEOUT_S = 60.0
# Records for the producer to send: more than a drain takes at the rate (it is stopped when the drain ends).
BESIDE_SECONDS = 600


@contextmanager
def producer_beside(stack: Stack, traffic: Traffic, records_per_s: int, work: Path) -> Iterator[int]:
    """`ProducerPerformance` throttled to `records_per_s` against the stack's broker while the block runs, entered
    once it has reached its rate (its first window printed); yields its process id."""
    work.mkdir(parents=True, exist_ok=True)
    log_config, out_path = work / "beside.log4j2.xml", work / f"beside-{records_per_s}.out"
    log_config.write_text(log4j2_config(work / "beside.client.log", level="WARN"))
    cmd = producer_command(stack.broker.bootstrap_servers, traffic.topic, records_per_s * BESIDE_SECONDS,
                           traffic.record_size, traffic.props, log_config, heap_for(traffic.props),
                           throughput=records_per_s)
    with out_path.open("wb") as out:
        proc = spawn_tied_to_parent(cmd, stdout=out, stderr=out, cwd=work)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any(WINDOW.match(line) for line in out_path.read_text(errors="replace").splitlines()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the producer beside the backlog did not start: {out_path.read_text()[-500:]!r}")
            time.sleep(0.2)  # polling the tool's output file: it has no other signal
        yield proc.pid
    finally:
        stop_group(proc)


def backlog_beside(stack: Stack, traffic: Traffic, records_per_s: float, payloads: list[tuple[str, int, bytes]],
                   per_trigger: int, work: Path) -> Row:
    """The gateway's backlog drained while `producer_beside` sends `records_per_s` to Kafka; never raises (a row
    that could not run says why)."""
    rate = max(1, round(records_per_s))
    name = f"gateway's backlog, {rate:,} records/s to Kafka beside it"
    try:
        with producer_beside(stack, traffic, rate, work) as pid:
            before, began = jvm_cpu(pid), time.monotonic()
            row = drain_row(name, stack.drain("gateway", payloads, per_trigger), payloads)
            after = jvm_cpu(pid)
            if before is not None and after is not None:
                row.note += f"; the producer used {after.since(before).total_s / (time.monotonic() - began):.2f} cores"
        return row
    except Exception as e:  # reported, never raised: the other rows still run
        return Row(name, note=f"failed: {e!r}"[:200])
