"""Segment storage benchmark (run by hand; prints numbers, asserts nothing).

    .venv/bin/python -m tests.bench_segments [--mb 64] [--dir /tmp] [--batch-kb 16]

1. Append throughput (MB/s, batches/s) through `append_batches` (indexes, append-time index, fsync,
   commit record per partition and micro-batch) for 1 and 100 partitions, beside a raw sequential
   write + fsync of the same bytes with the same fsync cadence (one per partition per micro-batch).
2. `offsets_for_times` latency as the segment count grows (fresh reader per call, and a reused
   `PartitionReader`).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from storage.batch_appender import append_batches
from storage.log_reader import PartitionReader, offsets_for_times
from validators.codec.record_batch import TimestampType, assign_offsets_and_timestamp
from validators.topic_config import TopicConfig

T0 = 1_700_000_000_000


def template(batch_bytes: int) -> tuple[bytes, int]:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    n = 0
    while builder.size() < batch_bytes:
        builder.append(n, T0 + n, f"key-{n}".encode(), os.urandom(100), [])
        n += 1
    return bytes(builder.build()), n


def workload(partitions: int, total_bytes: int, batch_bytes: int, batches_per_micro_batch: int):
    """Per micro-batch, per partition: a list of (base, last, bytes, append_time); built before timing."""
    raw, n = template(batch_bytes)
    per_partition = max(1, total_bytes // len(raw) // partitions)
    micro_batches = max(1, per_partition // batches_per_micro_batch)
    plan = []
    offsets = [0] * partitions
    for mb in range(micro_batches):
        step = []
        for p in range(partitions):
            items = []
            for j in range(batches_per_micro_batch):
                clock = T0 + mb * 1000 + j
                data = assign_offsets_and_timestamp(raw, offsets[p], TimestampType.CREATE_TIME, T0 + n - 1, 0)
                items.append((offsets[p], offsets[p] + n - 1, data, clock))
                offsets[p] += n
            step.append(items)
        plan.append(step)
    return plan


def bench_append(base: Path, partitions: int, total_bytes: int, batch_bytes: int, per_mb: int) -> None:
    plan = workload(partitions, total_bytes, batch_bytes, per_mb)
    nbytes = sum(len(d) for step in plan for items in step for _b, _l, d, _t in items)
    nbatches = sum(len(items) for step in plan for items in step)
    config = TopicConfig(name="bench", partitions=partitions, segment_bytes=64 * 1024 * 1024)

    root = base / f"storage-{partitions}"
    start = time.perf_counter()
    for mb, step in enumerate(plan):
        for p, items in enumerate(step):
            append_batches(root, "bench", p, mb, items, config)
    storage_s = time.perf_counter() - start

    raw_dir = base / f"raw-{partitions}"
    raw_dir.mkdir()
    fds = [os.open(raw_dir / f"{p}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) for p in range(partitions)]
    start = time.perf_counter()
    for step in plan:
        for p, items in enumerate(step):
            for _b, _l, data, _t in items:
                os.write(fds[p], data)
            os.fsync(fds[p])
    raw_s = time.perf_counter() - start
    for fd in fds:
        os.close(fd)

    mb_total = nbytes / 1e6
    print(f"  {partitions:>3} partitions, {len(plan)} micro-batches, {nbatches} batches of {nbytes // nbatches} B "
          f"({mb_total:.1f} MB)")
    print(f"      segment storage : {mb_total / storage_s:8.1f} MB/s  {nbatches / storage_s:9.0f} batches/s  "
          f"{storage_s:6.2f} s")
    print(f"      raw write+fsync : {mb_total / raw_s:8.1f} MB/s  {nbatches / raw_s:9.0f} batches/s  {raw_s:6.2f} s"
          f"   (storage/raw time = {storage_s / raw_s:.2f}x)")
    shutil.rmtree(root)
    shutil.rmtree(raw_dir)


def bench_offsets_for_times(base: Path, segment_counts: list[int], queries: int) -> None:
    raw, n = template(2048)
    print(f"  offsets_for_times, {queries} random timestamps per size (2 KiB batches, 8 per segment)")
    for count in segment_counts:
        root = base / f"oft-{count}"
        config = TopicConfig(name="oft", partitions=1, segment_bytes=len(raw) * 8, index_interval_bytes=4096)
        offset = 0
        total = count * 8
        for mb in range(0, total, 64):
            items = []
            for i in range(mb, min(mb + 64, total)):
                ts = T0 + i * 10
                data = assign_offsets_and_timestamp(raw, offset, TimestampType.LOG_APPEND_TIME, ts, 0)
                items.append((offset, offset + n - 1, data, ts))
                offset += n
            append_batches(root, "oft", 0, mb, items, config)
        rng = random.Random(count)
        targets = [T0 + rng.randrange(total * 10) for _ in range(queries)]
        fresh = []
        for t in targets:
            start = time.perf_counter()
            offsets_for_times(root, "oft", 0, t)
            fresh.append(time.perf_counter() - start)
        with PartitionReader(root, "oft", 0) as reader:
            reused = []
            segments = len(reader.segments)
            for t in targets:
                start = time.perf_counter()
                reader.offsets_for_times(t)
                reused.append(time.perf_counter() - start)
        print(f"      {segments:>5} segments: fresh reader median {statistics.median(fresh) * 1e3:7.3f} ms "
              f"p99 {sorted(fresh)[int(len(fresh) * 0.99) - 1] * 1e3:7.3f} ms | reused reader median "
              f"{statistics.median(reused) * 1e3:7.3f} ms")
        shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="MB appended per append benchmark")
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-segments-", dir=args.dir))
    try:
        print("append throughput")
        bench_append(base, 1, args.mb * 1_000_000, args.batch_kb * 1024, per_mb=16)
        bench_append(base, 100, args.mb * 1_000_000, args.batch_kb * 1024, per_mb=2)
        bench_offsets_for_times(base, [10, 100, 1000], args.queries)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
