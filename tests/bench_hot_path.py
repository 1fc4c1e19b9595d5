"""`make bench`: the per-batch Python work of a micro-batch, phase by phase, outside Spark.

One target partition's micro-batch of N raw 100 x 100 B batches (LogAppendTime) goes through the same
functions the query's stateful stage runs, in its one Python worker, timed one phase at a time: reading its
pandas frame, deciding (`decide_group`), then the sink's work — appending (write, index entries, fsync,
commit), encoding responses, metric deltas. Publishing is left out (a Kafka round trip, not per-batch work). Each phase runs with the native
modules and with their pure-Python references, side by side: the native column is today's hot path, the
reference column what it costs without them. Medians of several rounds, µs per batch; printed, never asserted.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from kafka_cluster.security import KafkaCluster
from sinks import responses
from sinks.batch_metrics import aggregate_decisions
from sinks.partition_task import SinkConfig, append_partition, outgoing_messages
from streaming.stage import PACKED_COLUMN, _ingress_batches, decide_group, pack_fields
from streaming.worker_memory import keep_worker_memory
from validators.append_result import PartitionState
from validators.codec import native_inflate, native_walk
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

PHASES = ("stage: read frame", "stage: decide", "sink: append + commit", "sink: responses", "sink: metric deltas")


@contextmanager
def native(enabled: bool) -> Iterator[None]:
    """The native modules as loaded, or (disabled) their pure-Python references and zlib."""
    saved = native_walk.NATIVE_WALK, responses.NATIVE_RESPONSES, native_inflate.NATIVE_INFLATE
    if not enabled:
        native_walk.NATIVE_WALK, responses.NATIVE_RESPONSES, native_inflate.NATIVE_INFLATE = None, None, None
    try:
        yield
    finally:
        native_walk.NATIVE_WALK, responses.NATIVE_RESPONSES, native_inflate.NATIVE_INFLATE = saved


def _ingress_frame(batches: int, now_ms: int) -> pd.DataFrame:
    batch = build_record_batch([(now_ms - 1000 + i, b"key-%d" % i, b"v" * 100) for i in range(100)])
    return pd.DataFrame({
        "topic": ["t"] * batches, "partition": [0] * batches, "batch": [batch] * batches,
        "request_id": [f"req-{i}" for i in range(batches)],
        PACKED_COLUMN: [pack_fields([0, i, now_ms - 50, "bench", -1, "0", None, None, None, None, 0])
                        for i in range(batches)],
    })


def _round(frame: pd.DataFrame, registry: TopicRegistry, now_ms: int, work: Path, batch_id: int) -> dict[str, float]:
    times: dict[str, float] = {}
    clock = time.perf_counter

    def timed(name: str, fn: Callable[[], object]) -> object:
        start = clock()
        result = fn()
        times[name] = clock() - start
        return result

    items = timed(PHASES[0], lambda: list(_ingress_batches(frame)))
    decided, _ = timed(PHASES[1], lambda: decide_group("t", 0, items, registry, PartitionState(), now_ms))  # type: ignore[misc]
    timed(PHASES[2], lambda: append_partition(work / f"round-{batch_id}", batch_id, decided, registry))  # type: ignore[arg-type]
    config = SinkConfig(KafkaCluster("unused:9092"), work, "ingress", "responses", "dlq", 1 << 20)
    timed(PHASES[3], lambda: outgoing_messages(decided, config, frozenset(registry.topics), {("t", 0): 0}))  # type: ignore[arg-type]
    timed(PHASES[4], lambda: aggregate_decisions(decided, {"t": 1}))  # type: ignore[arg-type]
    return times


def bench_hot_path(batches: int = 2000, rounds: int = 5) -> None:
    keep_worker_memory()  # as the stage's worker does
    now_ms = int(time.time() * 1000)
    registry = TopicRegistry(topics={"t": topic_config("t", 1, {"message.timestamp.type": "LogAppendTime"}, {})})
    frame = _ingress_frame(batches, now_ms)
    medians: dict[bool, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gateway-hot-path-") as tmp:
        for enabled in (True, False):
            with native(enabled):
                work = Path(tmp) / ("native" if enabled else "reference")
                samples = [_round(frame, registry, now_ms, work, i + 1) for i in range(rounds)]
            medians[enabled] = {p: statistics.median(s[p] for s in samples) * 1e6 / batches for p in PHASES}
    print(f"\n== hot path: Python work per batch (µs), one partition's micro-batch of {batches} raw 100 x 100 B "
          f"batches, LogAppendTime, median of {rounds} ==")
    print(f"{'phase':28} {'native':>9} {'reference':>10}")
    for p in PHASES:
        print(f"{p:28} {medians[True][p]:>9.1f} {medians[False][p]:>10.1f}")
    print(f"{'total':28} {sum(medians[True].values()):>9.1f} {sum(medians[False].values()):>10.1f}")
    batch = frame["batch"][0]
    with tempfile.TemporaryDirectory(prefix="gateway-page-cache-") as tmp:
        fresh, cached = page_cache_write_us(Path(tmp), batch, batches, rounds)
    print(f"of the append, the kernel's copy of each {len(batch):,} B batch into the log file: {fresh:.1f} µs into new "
          f"pages (every append: the page cache allocates them), {cached:.1f} µs into pages already cached")


def page_cache_write_us(work: Path, batch: bytes, batches: int, rounds: int) -> tuple[float, float]:
    """µs per batch to `pwritev` `batches` copies of `batch` (~1 MB per call, as the segment writes them) into a
    new file, and again over the same, already cached range: medians of `rounds`. The first is what storing the
    log costs the kernel per batch, which Spark's floor, storing nothing, does not pay."""
    per_call = max(1, (1 << 20) // len(batch))
    samples: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        path = work / f"round-{r}.log"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for fresh in (True, False):
                start = time.perf_counter()
                for first in range(0, batches, per_call):
                    n = min(per_call, batches - first)
                    os.pwritev(fd, [batch] * n, first * len(batch))
                samples[fresh].append((time.perf_counter() - start) * 1e6 / batches)
        finally:
            os.close(fd)
            path.unlink()
    return statistics.median(samples[True]), statistics.median(samples[False])
