"""`dlq`: the operators' tool for the dead-letter topic (docs/design.md: dead-letter topic).

    python -m sinks dlq stats  [filters]
    python -m sinks dlq list   [filters] [--limit N]
    python -m sinks dlq show   PARTITION:OFFSET | --request-id ID [--raw FILE]
    python -m sinks dlq replay [filters] (--position P:O ... | --all) [--to-topic T] [--to-partition N] [--yes]

Common options: `--config` (a gateway config: its `bootstrap_servers` and its `kafka` security block, so
the command reaches a secured cluster as the gateway does), `--bootstrap-servers` (default: the config's, else
$GATEWAY_BOOTSTRAP_SERVERS or 127.0.0.1:9092), `--topic`
(the dead-letter topic, default gateway.dlq), `--ingress-topic` (where replays go; default: the
`gw.errors.ingress.topic` the dead letter came from, else gateway.ingress), `--format table|jsonl`,
`--timeout` (seconds without progress before giving up on the broker).
Filters: `--error NAME|CODE`, `--target-topic`, `--target-partition`, `--since`, `--until` (epoch ms,
ISO-8601 — UTC unless it names a zone — or relative `-15m`, `-2h`, `-7d`), `--request-id`,
`--position P:O`. The time filters apply to the dead letter's Kafka timestamp, the rejection time.

Reading: the end offsets of every partition are captured when the command starts and the topic is
consumed up to them, message by message (never loaded whole), from the first offset whose timestamp
is >= `--since` (ListOffsets by time). A message without `gw.errors.*` headers ("foreign"), or with
headers that do not parse, is reported as such — never a crash. Nothing is committed: the command
uses a throw-away consumer group id and `assign`, so it never disturbs other readers.

Replay re-submits the dead letter's value unchanged (docs/design.md: dead-letter topic: replayable as is) to the ingress
topic with fresh gateway headers: `gw.topic`/`gw.partition` (the original target, or `--to-topic` /
`--to-partition`), `gw.client.id` (the original), `gw.request.id = replay:<dlq-topic>:<p>:<o>:<original
request id>` and `gw.replay.of = <dlq-topic>:<p>:<o>`. It is a dry run unless `--yes` is given. Loops
are impossible: a dead letter that is itself the rejection of a replay is refused. The gateway echoes
only the request id into its dead letters, so that is what marks them (`replay:` prefix); a
`gw.replay.of` or `gw.errors.replay.of` header on the dead letter (should the gateway copy ingress
headers one day) is honoured as well.

Exit codes: 0 done; 1 a Kafka problem (topic missing, broker unreachable, delivery failed);
2 usage; 3 nothing to show (`show` found no such dead letter) or some selected dead letters were
refused for replay.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from contract.topics import DEFAULT_DLQ_TOPIC
from sinks.dlq.reader import DlqError, DlqReader, read_dead_letters
from sinks.dlq.render import _LIST_COLUMNS, _jsonl, _SafeWriter, _write_show, _write_stats, render_table
from sinks.dlq.replay import ReplayOutcome, ReplayPlan, ReplaySender, plan_replay
from sinks.dlq.report import Filter, compute_stats, list_row, show_view
from sinks.dlq.times import parse_position
from sinks.kafka_security import KafkaCluster, KafkaSecurityError, load_cluster_file
from sinks.time_arguments import TIME_FORMS, parse_time, protect_relative_times

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "GATEWAY_BOOTSTRAP_SERVERS"


EXIT_OK = 0
EXIT_KAFKA = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=None,
                   help="the gateway's config file, for its bootstrap_servers and kafka security block (TLS, SASL) "
                        "(default: none; plaintext to --bootstrap-servers)")
    p.add_argument("--bootstrap-servers", default=None,
                   help=f"the Kafka cluster (default: the config's, else ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--topic", default=DEFAULT_DLQ_TOPIC, help="the dead-letter topic (default %(default)s)")
    p.add_argument("--ingress-topic", default=None,
                   help="where replays go (default: the dead letter's gw.errors.ingress.topic, else gateway.ingress)")
    p.add_argument("--format", choices=("table", "jsonl"), default="table",
                   help="a table, or one JSON object per line (default %(default)s)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds without progress before giving up")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--error", action="append", default=[], metavar="NAME|CODE", help="error name or code (repeatable)")
    p.add_argument("--target-topic", action="append", default=[],
                   help="target topic of the rejected batch (repeatable)")
    p.add_argument("--target-partition", action="append", type=int, default=[],
                   help="target partition of the rejected batch (repeatable)")
    p.add_argument("--since", help=f"rejected at or after this time: {TIME_FORMS}")
    p.add_argument("--until", help="rejected before this time (the same forms)")
    p.add_argument("--request-id", action="append", default=[], help="the batch's request id (repeatable)")
    p.add_argument("--position", action="append", default=[], metavar="P:O", help="DLQ partition:offset (repeatable)")
    p.add_argument("--principal", action="append", default=[], metavar="User:NAME",
                   help="who produced the batch through the front door (repeatable)")


EPILOG = """exit status: 0 done; 1 a Kafka problem (topic missing, broker unreachable, delivery failed); 2 usage;
3 nothing to show (`show` found no such dead letter) or some selected dead letters were refused for replay"""


def build_parser(prog: str = "python -m sinks dlq") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Inspect and replay the gateway's dead letters.",
                                     epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="counts by error name, target topic and partition, and the time range")
    _common(p)
    _filters(p)
    p = sub.add_parser("list", help="one line per dead letter")
    _common(p)
    _filters(p)
    p.add_argument("--limit", type=int, default=None, help="stop after N dead letters")
    p = sub.add_parser("show", help="one dead letter in full: headers, error, window, decoded records")
    _common(p)
    p.add_argument("position", nargs="?", help="the dead letter's PARTITION:OFFSET on the dead-letter topic")
    p.add_argument("--request-id", help="the first dead letter with this request id")
    p.add_argument("--raw", type=Path, metavar="FILE",
                   help="also write the rejected batch's bytes, unchanged, to FILE (input for `validators decide`)")
    p = sub.add_parser("replay", help="re-submit dead letters to the ingress topic (dry run without --yes)")
    _common(p)
    _filters(p)
    p.add_argument("--all", action="store_true", help="select every dead letter the filters match (also none)")
    p.add_argument("--to-topic", help="replay to this target topic instead of the original")
    p.add_argument("--to-partition", type=int, help="replay to this target partition instead of the original")
    p.add_argument("--yes", action="store_true", help="really send (default: dry run)")
    return parser


def _filter_from(args: argparse.Namespace) -> Filter:
    now = int(time.time() * 1000)
    return Filter(
        error_names=frozenset(e.strip() for e in args.error),
        topics=frozenset(args.target_topic),
        partitions=frozenset(args.target_partition),
        since_ms=parse_time(args.since, now) if args.since else None,
        until_ms=parse_time(args.until, now) if args.until else None,
        request_ids=frozenset(args.request_id),
        positions=frozenset(parse_position(p) for p in args.position),
        principals=frozenset(args.principal),
    )


def _has_selector(flt: Filter) -> bool:
    return bool(flt.needs_gateway_headers or flt.positions or flt.since_ms is not None or flt.until_ms is not None)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    fmt = args.format
    if fmt == "table":
        out = _SafeWriter(out)  # type: ignore[assignment]
    err = _SafeWriter(err)  # type: ignore[assignment]
    if args.command == "replay":
        flt = _filter_from(args)
        if not (_has_selector(flt) or args.all):
            err.write("replay: choose dead letters with --position/--error/--request-id/... or say --all\n")
            return EXIT_USAGE
    elif args.command in ("stats", "list"):
        flt = _filter_from(args)
    else:
        if (args.position is None) == (args.request_id is None):
            err.write("show: give exactly one of PARTITION:OFFSET or --request-id\n")
            return EXIT_USAGE
        flt = (Filter(positions=frozenset([parse_position(args.position)])) if args.position is not None
               else Filter(request_ids=frozenset([args.request_id])))

    try:
        cluster = _cluster(args)
    except KafkaSecurityError as e:
        err.write(f"{e}\n")
        return EXIT_USAGE
    with DlqReader(cluster, args.topic, args.timeout) as reader:
        if reader.is_empty and args.command != "stats":
            err.write(f"{args.topic}: no dead letters (the topic is empty)\n")
            if args.command == "show":
                return EXIT_NOTHING
            if fmt == "table" and args.command == "list":
                out.write(f"{args.topic}: no dead letters\n")
            return EXIT_OK
        if args.command == "stats":
            _write_stats(compute_stats(read_dead_letters(reader, flt)), args.topic, fmt, out)
            return EXIT_OK
        if args.command == "list":
            return _cmd_list(reader, flt, args, out)
        if args.command == "show":
            dl = next(iter(read_dead_letters(reader, flt)), None)
            if dl is None:
                err.write(f"{args.topic}: no dead letter at {args.position or 'request id ' + str(args.request_id)}\n")
                return EXIT_NOTHING
            if args.raw is not None:
                if dl.message.value is None:
                    err.write(f"{dl.position}: the dead letter has no value: nothing written to {args.raw}\n")
                    return EXIT_NOTHING
                try:
                    args.raw.write_bytes(dl.message.value)
                except OSError as e:
                    err.write(f"dlq: cannot write {args.raw}: {e.strerror or e}\n")
                    return EXIT_USAGE
                err.write(f"wrote the batch's {len(dl.message.value)} bytes to {args.raw}\n")
            view = show_view(dl)
            _jsonl(view, out) if fmt == "jsonl" else _write_show(view, out)
            return EXIT_OK
        return _cmd_replay(reader, flt, args, cluster, out, err)


def _cluster(args: argparse.Namespace) -> KafkaCluster:
    if args.config is not None:
        return load_cluster_file(args.config, args.bootstrap_servers)
    return KafkaCluster(args.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP))


def _cmd_list(reader: DlqReader, flt: Filter, args: argparse.Namespace, out: TextIO) -> int:
    n = 0
    if args.format == "jsonl":
        for dl in read_dead_letters(reader, flt):
            if args.limit is not None and n >= args.limit:
                break
            _jsonl(list_row(dl), out)
            n += 1
        return EXIT_OK
    # table: column widths need the rows; buffer a page at a time so memory stays bounded
    page: list[dict[str, Any]] = []
    for dl in read_dead_letters(reader, flt):
        if args.limit is not None and n >= args.limit:
            break
        page.append(list_row(dl))
        n += 1
        if len(page) == 1000:
            render_table(page, _LIST_COLUMNS, out)
            page = []
    if page:
        render_table(page, _LIST_COLUMNS, out)
    if n == 0:
        out.write(f"{args.topic}: no dead letters match\n")
    return EXIT_OK


_REPLAY_CHUNK = 500  # dead letters planned, sent and printed at a time: a huge DLQ is never held whole
_REPLAY_COLUMNS = ("position", "status", "error_name", "target", "ingress_topic", "ingress_position", "request_id",
                   "reason")


def _replay_row(o: ReplayOutcome, sending: bool) -> dict[str, Any]:
    p = o.plan
    if p.refused is not None:
        status = "refused"
    elif not sending:
        status = "dry-run"
    else:
        status = "sent" if o.sent else "failed"
    return {
        "position": p.dead_letter.position, "status": status, "error_name": p.dead_letter.error_name,
        "ingress_topic": p.ingress_topic,
        "target": f"{p.target_topic}-{p.target_partition}" if p.refused is None else p.dead_letter.target,
        "request_id": p.request_id,
        "ingress_position": None if o.ingress_partition is None else f"{o.ingress_partition}:{o.ingress_offset}",
        "reason": p.refused or o.error,
    }


def _cmd_replay(reader: DlqReader, flt: Filter, args: argparse.Namespace, cluster: KafkaCluster, out: TextIO,
                err: TextIO) -> int:
    sender = ReplaySender(cluster, args.topic, max(args.timeout, 10.0)) if args.yes else None
    counts: Counter = Counter()
    found: set[tuple[int, int]] = set()

    def emit(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            counts[r["status"]] += 1
        if args.format == "jsonl":
            for r in rows:
                _jsonl(r, out)
        elif rows:
            render_table(rows, _REPLAY_COLUMNS, out, 80)

    def flush(chunk: list[ReplayPlan]) -> None:
        outcomes = sender.send(chunk) if sender is not None else [ReplayOutcome(p, False) for p in chunk]
        emit([_replay_row(o, sender is not None) for o in outcomes])

    chunk: list[ReplayPlan] = []
    for dl in read_dead_letters(reader, flt):
        if flt.positions:
            found.add((dl.message.partition, dl.message.offset))
        chunk.append(plan_replay(dl, args.topic, args.ingress_topic, args.to_topic, args.to_partition))
        if len(chunk) >= _REPLAY_CHUNK:
            flush(chunk)
            chunk = []
    flush(chunk)
    emit([{"position": f"{p}:{o}", "status": "missing", "reason": "no such message in the DLQ"}
          for p, o in sorted(flt.positions - found)])
    if args.format == "table":
        if not counts:
            out.write(f"{args.topic}: no dead letters match\n")
        verb = "sent" if args.yes else "would send (dry run; add --yes to send)"
        out.write(f"{verb}: {counts['sent'] + counts['dry-run']}, refused: {counts['refused']}, "
                  f"missing: {counts['missing']}" + (f", failed: {counts['failed']}" if args.yes else "") + "\n")
    if counts["failed"]:
        err.write("replay: some deliveries failed\n")
        return EXIT_KAFKA
    if counts["refused"] or counts["missing"]:
        return EXIT_NOTHING
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None,
         prog: str = "python -m sinks dlq") -> int:
    """`prog` is how the command names itself in its help and usage (`gateway dlq` through `gateway`)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = build_parser(prog)
    try:
        args = parser.parse_args(protect_relative_times(list(argv) if argv is not None else sys.argv[1:]))
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    try:
        return run(args, out, err)
    except ValueError as e:  # bad --since/--position
        err.write(f"dlq: {e}\n")
        return EXIT_USAGE
    except DlqError as e:
        err.write(f"dlq: {e}\n")
        return EXIT_KAFKA
    except BrokenPipeError:  # `dlq list | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
