"""`python -m sinks segments ...`: inspect, check and repair segment storage (docs/design.md: segment storage).

    python -m sinks segments dump ROOT TOPIC PARTITION [--deep]          batches and index entries
    python -m sinks segments verify ROOT [TOPIC PARTITION] [--index-interval-bytes N]
    python -m sinks segments read ROOT TOPIC PARTITION [--offset N] [--max N]
    python -m sinks segments offsets-for-times ROOT TOPIC PARTITION TIME|latest|earliest|max-timestamp
    python -m sinks segments truncate ROOT TOPIC PARTITION --to OFFSET --yes   operator repair (see storage/recovery.py)

Every command prints a table, or JSON with `--json`. TIME takes the forms of `dlq --since`
(`sinks.time_arguments`). Exit status: 0 done; 1 `verify` found a problem; 2 bad arguments, damaged or
missing files (one `error:` line naming the file), or `truncate` without `--yes`.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sinks.text_table import table_lines
from sinks.time_arguments import TIME_FORMS, parse_time
from storage.errors import KafkaStorageError
from storage.file_names import list_partitions, partition_dir
from storage.log_reader import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    PartitionReader,
    batch_records,
    offsets_for_times,
)
from storage.partition_log import PartitionLog
from storage.verify import verify_partition

_SPECIAL = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}
EPILOG = ("exit status: 0 done; 1 verify found a problem; 2 bad arguments, damaged or missing files, "
          "or truncate without --yes")


def _bytes(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode()


def _table(rows: list[dict[str, Any]]) -> str:
    return "\n".join(table_lines(rows)) if rows else "(none)"


def _emit(args: argparse.Namespace, doc: Any, tables: list[tuple[str, list[dict[str, Any]]]]) -> None:
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return
    for title, rows in tables:
        if title:
            print(f"== {title}")
        print(_table(rows))


def _dump(args: argparse.Namespace) -> int:
    with PartitionReader(Path(args.root), args.topic, args.partition) as reader:
        doc: dict[str, Any] = {
            "topic": args.topic, "partition": args.partition, "log_start_offset": reader.log_start_offset,
            "log_end_offset": reader.log_end_offset,
            "commit": json.loads(reader.commit.to_json()) if reader.commit else None, "segments": [],
        }
        tables = [("partition", [{k: doc[k] for k in ("topic", "partition", "log_start_offset", "log_end_offset")}])]
        for view in reader.segments:
            seg = view.segment
            batches = []
            for b in seg.batches_from(0):
                h = b.header
                row = {
                    "baseOffset": h.base_offset, "lastOffset": h.last_offset, "count": h.records_count,
                    "position": b.position, "size": b.size, "timestampType": h.timestamp_type.kafka_name,
                    "maxTimestamp": h.max_timestamp, "baseTimestamp": h.base_timestamp,
                    "compresscodec": h.compression_id, "partitionLeaderEpoch": h.partition_leader_epoch,
                    "crc": h.crc, "appendTime": seg.append_time_index.lookup(h.last_offset),
                }
                if args.deep:
                    row["records"] = [
                        {"offset": r.offset, "timestamp": r.timestamp, "createTime": r.create_time,
                         "key": _bytes(r.key), "value": _bytes(r.value)}
                        for r in batch_records(seg.read_bytes(b.position, b.size))
                    ]
                batches.append(row)
            seg_doc = {
                "file": seg.log_path.name, "base_offset": seg.base_offset, "size": seg.size,
                "problems": list(view.problems),  # damaged indexes, shown as rebuilt from the log
                "batches": batches,
                "offset_index": [asdict(e) for e in seg.offset_index.all_entries()],
                "time_index": [asdict(e) for e in seg.time_index.all_entries()],
                "append_time_index": [asdict(e) for e in seg.append_time_index.all_entries()],
            }
            doc["segments"].append(seg_doc)
            if view.problems:
                tables.append(("problems (indexes shown rebuilt from the log)", [{"problem": p} for p in view.problems]))
            tables.append((f"{seg.log_path.name} ({seg.size} bytes)",
                           [{k: v for k, v in r.items() if k != "records"} for r in batches]))
            tables.append((f"{seg.offset_index.path.name}", seg_doc["offset_index"]))
            tables.append((f"{seg.time_index.path.name}", seg_doc["time_index"]))
    _emit(args, doc, tables)
    return 0


def _verify(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if (args.topic is None) != (args.partition is None):
        raise ValueError("verify takes ROOT alone, or ROOT TOPIC PARTITION")
    if args.topic is not None:
        targets = [(args.topic, args.partition)]
    else:
        if not root.is_dir():
            raise FileNotFoundError(f"no segment storage at {root}")
        targets = list_partitions(root)
    reports = [verify_partition(root, t, p, args.index_interval_bytes) for t, p in targets]
    rows = [{"partition": f"{r.topic}-{r.partition}", "segments": len(r.segments), "log_start_offset": r.log_start_offset,
             "log_end_offset": r.log_end_offset, "ok": r.ok, "problems": "; ".join(r.problems)} for r in reports]
    _emit(args, [asdict(r) for r in reports], [("", rows)])
    return 0 if all(r.ok for r in reports) else 1


def _read(args: argparse.Namespace) -> int:
    with PartitionReader(Path(args.root), args.topic, args.partition) as reader:
        records = list(reader.read(args.offset, args.max))
    rows = [{"offset": r.offset, "timestamp": r.timestamp, "timestampType": r.timestamp_type,
             "createTime": r.create_time, "logAppendTime": r.log_append_time, "key": _bytes(r.key),
             "value": _bytes(r.value), "headers": [(k, _bytes(v)) for k, v in r.headers]} for r in records]
    _emit(args, rows, [("", rows)])
    return 0


def _offsets_for_times(args: argparse.Namespace) -> int:
    target = _SPECIAL.get(args.timestamp.strip())
    if target is None:
        try:
            target = parse_time(args.timestamp)
        except ValueError:
            raise ValueError(f"cannot read time {args.timestamp.strip()!r}: use {TIME_FORMS}, "
                             f"or {', '.join(_SPECIAL)}") from None
    result = offsets_for_times(Path(args.root), args.topic, args.partition, target)
    doc = {"target": target, **asdict(result)}
    _emit(args, doc, [("", [doc])])
    return 0


def _truncate(args: argparse.Namespace) -> int:
    directory = partition_dir(Path(args.root), args.topic, args.partition)
    if not directory.is_dir():
        print(f"no partition directory {directory}", file=sys.stderr)
        return 2
    if not args.yes:  # destructive: the dropped batches are gone (their responses were published)
        print(f"truncate would drop every batch of {args.topic}-{args.partition} at or after offset {args.to} "
              f"in {args.root}, for good; add --yes to do it", file=sys.stderr)
        return 2
    with PartitionLog.open(Path(args.root), args.topic, args.partition) as plog:
        commit = plog.truncate_to(args.to)
    doc = {"log_end_offset": commit.log_end_offset, "segments": commit.segment_count, "batch_id": commit.batch_id}
    _emit(args, doc, [("", [doc])])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `segments` command group to a parser's subcommands."""
    seg = sub.add_parser("segments", help="inspect, check and repair segment storage", epilog=EPILOG)
    cmds = seg.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, partition_required: bool = True) -> None:
        p.add_argument("root", help="the segments root (segments_root of the gateway config, e.g. var/segments)")
        if partition_required:
            p.add_argument("topic", help="the target topic")
            p.add_argument("partition", type=int, help="the target partition")
        p.add_argument("--json", action="store_true", help="JSON instead of a table")

    p = cmds.add_parser("dump", help="batches and index entries of every segment", epilog=EPILOG)
    common(p)
    p.add_argument("--deep", action="store_true", help="also every record (JSON output)")
    p.set_defaults(func=_dump)
    p = cmds.add_parser("verify", help="check files, indexes and commit record; exit 1 on a problem", epilog=EPILOG)
    common(p, partition_required=False)
    p.add_argument("topic", nargs="?", help="only this target topic (with PARTITION; default: every partition)")
    p.add_argument("partition", nargs="?", type=int, help="only this target partition")
    p.add_argument("--index-interval-bytes", type=int, default=None,
                   help="also check the offset index against the index.interval.bytes rule")
    p.set_defaults(func=_verify)
    p = cmds.add_parser("read", help="records as a consumer sees them, with create and append time", epilog=EPILOG)
    common(p)
    p.add_argument("--offset", type=int, default=0, help="the first offset to read (default %(default)s)")
    p.add_argument("--max", type=int, default=20, help="at most this many records (default %(default)s)")
    p.set_defaults(func=_read)
    p = cmds.add_parser("offsets-for-times", help="ListOffsets for a time (or latest/earliest/max-timestamp)",
                        epilog=EPILOG)
    common(p)
    p.add_argument("timestamp", metavar="TIME",
                   help=f"{TIME_FORMS}; or latest, earliest, max-timestamp (Kafka's special ListOffsets targets)")
    p.set_defaults(func=_offsets_for_times)
    p = cmds.add_parser("truncate", help="drop every batch at or after an offset, and commit (needs --yes)",
                        epilog=EPILOG)
    common(p)
    p.add_argument("--to", type=int, required=True, metavar="OFFSET",
                   help="the new log end offset: batches at or after it are dropped")
    p.add_argument("--yes", action="store_true", help="really truncate (without it: refuse and say what would go)")
    p.set_defaults(func=_truncate)


def run(args: argparse.Namespace) -> int:
    """Run a parsed `segments` command: damaged or missing files and bad offsets become one `error:` line
    naming the file (exit 2), never a traceback."""
    try:
        return args.func(args)
    except (KafkaStorageError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
