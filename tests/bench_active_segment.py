"""`make bench`: what a micro-batch and a Fetch pay as the active segment fills, and as segments are
retained (prints, asserts nothing).

A gateway runs for months, and its active segment holds up to `segment.bytes` (1 GiB) — one `.appendtimeindex`
entry per batch, an `.index` and `.timeindex` entry per `index.interval.bytes`. Every micro-batch reopens
the partition's active segment to append, and the front door opens it for every Fetch and ListOffsets.
Neither may cost more as the segment fills. One partition of one-record batches (100 B values, the batches
a linger-0 producer sends) is filled to each size, then timed: one micro-batch of one batch appended and
committed (`append_batches`), and one front-door Fetch of the last batch (`front_door.apis.fetch.read_partition`).
Medians, ms. Then the same micro-batch of one batch beside 10, 1 000 and 10 000 retained segments (a topic with
`segment.ms` of an hour keeps 720 for a month's retention).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from front_door.apis.fetch import read_partition
from storage.batch_appender import append_batches
from storage.log_config import SegmentConfig
from validators.codec.record_batch import TimestampType, assign_offsets_and_timestamp, build_record_batch
from validators.topic_config import topic_config

T0 = 1_700_000_000_000
FILL_CHUNK = 20_000


def _item(raw: bytes, offset: int) -> tuple[int, int, bytes, int]:
    data = assign_offsets_and_timestamp(raw, offset, TimestampType.CREATE_TIME, T0, 0)
    return offset, offset, data, T0 + offset


def bench_active_segment(sizes: tuple[int, ...] = (1_000, 100_000, 400_000), samples: int = 9) -> None:
    config = topic_config("t", 1, {}, {})
    raw = build_record_batch([(T0, b"key", b"v" * 100)])
    print(f"\n== active segment: cost per micro-batch and per Fetch as it fills ({len(raw)} B one-record batches) ==")
    print(f"{'batches in segment':>19} {'segment MB':>11} {'append + commit ms':>19} {'front-door Fetch ms':>20}")
    with tempfile.TemporaryDirectory(prefix="gateway-active-segment-") as tmp:
        root = Path(tmp)
        offset = batch_id = 0
        for size in sizes:
            while offset < size:
                end = min(size, offset + FILL_CHUNK)
                append_batches(root, "t", 0, batch_id, [_item(raw, o) for o in range(offset, end)], config)
                offset, batch_id = end, batch_id + 1
            appends, fetches = [], []
            for _ in range(samples):
                item = [_item(raw, offset)]
                start = time.perf_counter()
                append_batches(root, "t", 0, batch_id, item, config)
                appends.append(time.perf_counter() - start)
                offset, batch_id = offset + 1, batch_id + 1
                start = time.perf_counter()
                read_partition(root, "t", 0, offset - 1, 1 << 20, True)
                fetches.append(time.perf_counter() - start)
            print(f"{offset:>19,} {offset * len(raw) / 1e6:>11.1f} {1e3 * statistics.median(appends):>19.2f} "
                  f"{1e3 * statistics.median(fetches):>20.2f}")


def bench_retained_segments(counts: tuple[int, ...] = (10, 1_000, 10_000), samples: int = 31) -> None:
    """The partitions are filled first, then sampled in turn (10, 1 000, 10 000, 10, ...), so a drift of the
    machine's fsync latency, most of each figure, falls on every count alike instead of on whichever ran last."""
    raw = build_record_batch([(T0, b"key", b"v" * 400)])
    rolling = SegmentConfig(segment_bytes=len(raw) + 1)  # one batch per segment while filling
    config = SegmentConfig()
    print("\n== retained segments: one micro-batch of one batch, append + commit (ms, median, sampled in turn) ==")
    print(f"{'segments':>9} {'append + commit ms':>19}")
    with ExitStack() as stack:
        roots = {count: Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gateway-retained-")))
                 for count in counts}
        offsets: dict[int, int] = {}
        for count, root in roots.items():
            for batch_id, start in enumerate(range(0, count, 100)):
                items = [_item(raw, o) for o in range(start, min(count, start + 100))]
                append_batches(root, "t", 0, batch_id, items, rolling)
                offsets[count] = items[-1][0] + 1
        times: dict[int, list[float]] = {count: [] for count in counts}
        for i in range(samples):
            for count, root in roots.items():
                start_s = time.perf_counter()
                append_batches(root, "t", 0, count + i, [_item(raw, offsets[count])], config)
                times[count].append(time.perf_counter() - start_s)
                offsets[count] += 1
    medians = {count: statistics.median(values) for count, values in times.items()}
    for count in counts:
        print(f"{count:>9,} {1e3 * medians[count]:>19.2f}")
    print(f"  {counts[-1]:,} / {counts[0]:,} segments: {medians[counts[-1]] / medians[counts[0]]:.2f}  (target <= 1.2)")
