"""`make bench`: measurements, reported not asserted.

1. The pure core: decision throughput (records/s on one core) for codec × timestamp type × value
   size × records per batch, beside the floor (CRC-32C and decompression of the same bytes); the hot
   path's Python work per batch, phase by phase, native and reference (`tests.bench_hot_path`); what a
   micro-batch and a Fetch pay as the active segment fills and as segments are retained
   (`tests.bench_active_segment`).
2. End to end on the real stack (`tests.bench_stack`): the gateway beside Apache Kafka (sequential
   and pipelined produce of the same batches) and Spark's floor; Kafka's clients (Java, librdkafka)
   through the front door beside the same clients against Kafka (`tests.bench_clients`); the scaling table.

Run: `make bench` (or `.venv/bin/python -m tests.bench [--quick] [--only clients|backlog|secured-backlog]`).
`--only backlog`: the gateway's backlog beside Spark's floor, beside itself on a SASL_SSL broker, and the
scaling fit. `--only secured-backlog`: just the gateway's backlog on a SASL_SSL (SCRAM-SHA-512) broker beside
the plaintext one, alternating which goes first, with the ratios of records/s and drain time; a smoke run of
it: `.venv/bin/python -m tests.bench --quick --only secured-backlog --per-trigger 100` (400 batches a drain).
`--only shape`: the figures the sink's shape is judged by, each beside Spark's floor of the same shape — the
backlog, the marginal cost per batch, a lone produce's round trip — then Kafka's clients through the front door.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial

from crc32c import crc32c

from tests.bench_active_segment import bench_active_segment, bench_retained_segments
from tests.bench_hot_path import bench_hot_path, native
from validators.append_result import PartitionState
from validators.codec import record_batch as rb
from validators.codec.compression import CompressionType, decompress
from validators.codec.record_batch import build_record_batch
from validators.log_validator import validate_and_assign
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
    print(f"{'codec':6} {'type':13} {'value':>6} {'recs':>5} {'decision':>14} {'reference':>14} {'ratio':>6} {'floor':>14}"
          "  reference = pure-Python walk and zlib; floor = crc32c (+ decompress)")
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
        for ts_type in ("CreateTime", "LogAppendTime"):
            config = topic_config("bench", 1, {"message.timestamp.type": ts_type}, {})
            for value_size in (100, 1024):
                for records in (1, 100, 1000):
                    batch = _batch(codec, records, value_size, now)
                    state = PartitionState()
                    decide = partial(validate_and_assign, batch, "bench", 0, config, state, now)
                    decision = _rate(decide, records, min_seconds)
                    with native(False):
                        reference = _rate(decide, records, min_seconds)
                    floor_rate = _rate(partial(_floor, codec, batch), records, min_seconds)
                    print(f"{codec.name.lower():6} {ts_type:13} {value_size:>6} {records:>5} {decision:>14,.0f} "
                          f"{reference:>14,.0f} {decision / reference:>5.1f}x {floor_rate:>14,.0f}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench")
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--core-only", action="store_true", help="only the pure core's micro-benchmarks")
    parser.add_argument("--end-to-end-only", action="store_true", help="only the end-to-end sections")
    # "front-door": another name of the clients' rows (they run through the front door)
    parser.add_argument("--only", choices=["clients", "front-door", "backlog", "secured-backlog", "secured-door",
                                           "doors", "shape", "scale", "spread", "transactions"],
                        help="just these end-to-end rows: Kafka clients against Kafka and through the front door "
                             "(clients), the gateway's backlog beside Spark's floor, on SASL_SSL and the scaling fit "
                             "(backlog), only the backlog on SASL_SSL beside plaintext (secured-backlog), or the "
                             "front door's SASL_SSL listener beside PLAINTEXT and beside a login flood (secured-door), "
                             "one and two front doors as processes of their own (doors), or the sink's shape beside "
                             "Spark's floor of the same shape (shape), or micro-batches spread over 4 to 1 000 target "
                             "partitions with append + commit beside 10 to 10 000 retained segments (scale), or a producer "
                             "spreading 2 000 records/s over 4 and 1 000 partitions beside a lone producer, through "
                             "the front door and against Kafka (spread), or a transactional producer committing every "
                             "100 ms beside the same without transactions, through the front door and against Kafka "
                             "(transactions)")
    parser.add_argument("--per-trigger", type=int, metavar="N",
                        help="batches per micro-batch of the 100 x 100 B backlog (4 micro-batches are queued; "
                             "default 10000, --quick 1000), e.g. small for a smoke run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.only == "front-door":
        args.only = "clients"
    if not args.end_to_end_only and not args.only:
        bench_core(0.2 if args.quick else 1.0)
        bench_hot_path(rounds=3 if args.quick else 7)
        bench_active_segment(samples=5 if args.quick else 9)
        bench_retained_segments(samples=5 if args.quick else 31)
    if args.only == "scale":
        bench_retained_segments(samples=5 if args.quick else 31)
    if not args.core_only:
        from tests.bench_stack import bench_end_to_end

        bench_end_to_end(quick=args.quick, only=args.only, backlog_per_trigger=args.per_trigger)
    return 0


if __name__ == "__main__":
    sys.exit(main())
