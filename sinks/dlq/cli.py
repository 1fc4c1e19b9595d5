"""`dlq`: the operators' tool for the dead-letter topic (docs/design.md: dead-letter topic).

    python -m sinks dlq stats  [filters]
    python -m sinks dlq list   [filters] [--limit N]
    python -m sinks dlq show   PARTITION:OFFSET | --request-id ID [--raw FILE]
    python -m sinks dlq replay [filters] (--position P:O ... | --all) [--to-topic T] [--to-partition N] [--yes]

Common options: `--config` (a gateway config: its `bootstrap_servers`, its `kafka` security block, so
the command reaches a secured cluster as the gateway does, and its `dlq_topic` and `ingress_topic`),
`--bootstrap-servers` (default: the config's, else $GATEWAY_BOOTSTRAP_SERVERS or 127.0.0.1:9092), `--topic`
(the dead-letter topic, default: the config's dlq_topic, else gateway.dlq), `--ingress-topic` (where replays go;
default: the `gw.errors.ingress.topic` the dead letter came from, else the config's ingress_topic, else
gateway.ingress), `--format table|jsonl`, `--timeout` (seconds without an answer or progress before giving up on
the cluster: an unreachable one is one line after it).
Filters: `--error NAME|CODE` (a Kafka error the gateway rejects with), `--target-topic`, `--target-partition`,
`--since`, `--until` (epoch ms, ISO-8601 — UTC unless it names a zone — or relative `-15m`, `-2h`, `-7d`),
`--request-id`, `--position P:O`. The time filters apply to the dead letter's Kafka timestamp, the rejection time.

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
import difflib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from contract.topics import DEFAULT_DLQ_TOPIC, DEFAULT_INGRESS_TOPIC
from kafka_cluster.security import KafkaCluster, KafkaSecurityError, load_cluster_file
from sinks.command_line import (
    CommandParser,
    bootstrap_servers,
    positive_seconds,
    principal,
    topic_name,
    whole_number,
)
from sinks.dlq.reader import DlqError, DlqReader, read_dead_letters
from sinks.dlq.render import _LIST_COLUMNS, _jsonl, _SafeWriter, _write_show, _write_stats, render_table
from sinks.dlq.replay import ReplayOutcome, ReplayPlan, ReplaySender, plan_replay
from sinks.dlq.report import Filter, compute_stats, list_row, show_view
from sinks.dlq.times import parse_position
from sinks.time_arguments import TIME_FORMS, parse_time, protect_relative_times
from validators.errors import Errors
from validators.topic_config import topic_name_error

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "GATEWAY_BOOTSTRAP_SERVERS"


EXIT_OK = 0
EXIT_KAFKA = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DlqConfig:
    """What the command takes from a gateway config: its cluster, its dead-letter topic and its ingress topic."""

    cluster: KafkaCluster
    dlq_topic: str = DEFAULT_DLQ_TOPIC
    ingress_topic: str = DEFAULT_INGRESS_TOPIC


# The reader of `--config` (path, --bootstrap-servers): `gateway dlq` checks the whole config (streaming.config);
# `python -m sinks dlq` reads the cluster and the topics of it.
ConfigReader = Callable[[Path, str | None], DlqConfig]


def read_config_file(path: Path, bootstrap_servers: str | None) -> DlqConfig:
    cluster = load_cluster_file(path, bootstrap_servers)
    doc = json.loads(path.read_text())  # JSON: load_cluster_file has just read it
    topics = {key: doc.get(key, default) for key, default in (("dlq_topic", DEFAULT_DLQ_TOPIC),
                                                              ("ingress_topic", DEFAULT_INGRESS_TOPIC))}
    for key, topic in topics.items():
        if not isinstance(topic, str) or topic_name_error(topic) is not None:
            raise ValueError(f"{path}: {key} = {json.dumps(topic)}: expected a Kafka topic name")
    return DlqConfig(cluster, topics["dlq_topic"], topics["ingress_topic"])


# The Kafka errors a dead letter can carry (Kafka's names and codes; NONE is never a rejection)
_ERRORS = {e.name: e for e in Errors if e is not Errors.NONE}


def error_name(text: str) -> str:
    """`--error`: a Kafka error's name (any case) or code, as the name."""
    name = text.strip().upper()
    if name in _ERRORS:
        return name
    by_code = {str(e.value[0]): e.name for e in _ERRORS.values()}
    if name in by_code:
        return by_code[name]
    close = difflib.get_close_matches(name, _ERRORS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(f"{text!r} is not a Kafka error the gateway rejects with; {hint}one of "
                                     f"{', '.join(_ERRORS)} (or their codes)")


def position(text: str) -> tuple[int, int]:
    try:
        return parse_position(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def time_argument(text: str) -> str:
    """A time as written (it is read relative to when the command runs), checked."""
    try:
        parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=None,
                   help="the gateway's config file, for its bootstrap_servers, kafka security block (TLS, SASL), "
                        "dlq_topic and ingress_topic (default: none; plaintext to --bootstrap-servers)")
    p.add_argument("--bootstrap-servers", type=bootstrap_servers, default=None,
                   help=f"the Kafka cluster (default: the config's, else ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--topic", type=topic_name, default=None,
                   help=f"the dead-letter topic (default: the config's dlq_topic, else {DEFAULT_DLQ_TOPIC})")
    p.add_argument("--ingress-topic", type=topic_name, default=None,
                   help="where replays go (default: the dead letter's gw.errors.ingress.topic, else the config's "
                        f"ingress_topic, else {DEFAULT_INGRESS_TOPIC})")
    p.add_argument("--format", choices=("table", "jsonl"), default="table",
                   help="a table, or one JSON object per line (default %(default)s)")
    p.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="seconds without an answer or progress from the cluster before giving up (default "
                        "%(default)s)")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--error", action="append", type=error_name, default=[], metavar="NAME|CODE",
                   help="the Kafka error name or code of the rejection (repeatable)")
    p.add_argument("--target-topic", action="append", type=topic_name, default=[],
                   help="target topic of the rejected batch (repeatable)")
    p.add_argument("--target-partition", action="append", type=whole_number(0), default=[],
                   help="target partition of the rejected batch (repeatable)")
    p.add_argument("--since", type=time_argument, help=f"rejected at or after this time: {TIME_FORMS}")
    p.add_argument("--until", type=time_argument, help="rejected before this time (the same forms)")
    p.add_argument("--request-id", action="append", default=[], help="the batch's request id (repeatable)")
    p.add_argument("--position", action="append", type=position, default=[], metavar="P:O",
                   help="DLQ partition:offset (repeatable)")
    p.add_argument("--principal", action="append", type=principal, default=[], metavar="User:NAME",
                   help="who produced the batch through the front door (repeatable)")


EPILOG = """exit status: 0 done; 1 a Kafka problem (topic missing, broker unreachable, delivery failed); 2 usage;
3 nothing to show (`show` found no such dead letter) or some selected dead letters were refused for replay"""


def build_parser(prog: str = "python -m sinks dlq") -> argparse.ArgumentParser:
    parser = CommandParser(prog=prog, description="Inspect and replay the gateway's dead letters.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="counts by error name, target topic and partition, and the time range")
    _common(p)
    _filters(p)
    p = sub.add_parser("list", help="one line per dead letter")
    _common(p)
    _filters(p)
    p.add_argument("--limit", type=whole_number(1), default=None, help="stop after N dead letters")
    p = sub.add_parser("show", help="one dead letter in full: headers, error, window, decoded records")
    _common(p)
    p.add_argument("position", nargs="?", type=position,
                   help="the dead letter's PARTITION:OFFSET on the dead-letter topic")
    p.add_argument("--request-id", help="the first dead letter with this request id")
    p.add_argument("--raw", type=Path, metavar="FILE",
                   help="also write the rejected batch's bytes, unchanged, to FILE (input for `validators decide`)")
    p = sub.add_parser("replay", help="re-submit dead letters to the ingress topic (dry run without --yes)")
    _common(p)
    _filters(p)
    p.add_argument("--all", action="store_true", help="select every dead letter the filters match (also none)")
    p.add_argument("--to-topic", type=topic_name, help="replay to this target topic instead of the original")
    p.add_argument("--to-partition", type=whole_number(0),
                   help="replay to this target partition instead of the original")
    p.add_argument("--yes", action="store_true", help="really send (default: dry run)")
    return parser


def _filter_from(args: argparse.Namespace) -> Filter:
    now = int(time.time() * 1000)
    return Filter(
        error_names=frozenset(args.error),
        topics=frozenset(args.target_topic),
        partitions=frozenset(args.target_partition),
        since_ms=parse_time(args.since, now) if args.since else None,
        until_ms=parse_time(args.until, now) if args.until else None,
        request_ids=frozenset(args.request_id),
        positions=frozenset(args.position),
        principals=frozenset(args.principal),
    )


def _has_selector(flt: Filter) -> bool:
    return bool(flt.needs_gateway_headers or flt.positions or flt.since_ms is not None or flt.until_ms is not None)


def run(args: argparse.Namespace, out: TextIO, err: TextIO, read_config: ConfigReader = read_config_file) -> int:
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
        flt = (Filter(positions=frozenset([args.position])) if args.position is not None
               else Filter(request_ids=frozenset([args.request_id])))

    try:
        config = _config(args, read_config)
    except KafkaSecurityError as e:
        err.write(f"{e}\n")
        return EXIT_USAGE
    topic = args.topic or config.dlq_topic
    with DlqReader(config.cluster, topic, args.timeout) as reader:
        if reader.is_empty and args.command != "stats":
            err.write(f"{topic}: no dead letters (the topic is empty)\n")
            if args.command == "show":
                return EXIT_NOTHING
            if fmt == "table" and args.command == "list":
                out.write(f"{topic}: no dead letters\n")
            return EXIT_OK
        if args.command == "stats":
            _write_stats(compute_stats(read_dead_letters(reader, flt)), topic, fmt, out)
            return EXIT_OK
        if args.command == "list":
            return _cmd_list(reader, flt, args, out)
        if args.command == "show":
            dl = next(iter(read_dead_letters(reader, flt)), None)
            if dl is None:
                where = f"{args.position[0]}:{args.position[1]}" if args.position else f"request id {args.request_id}"
                err.write(f"{topic}: no dead letter at {where}\n")
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
        return _cmd_replay(reader, flt, args, config, out, err)


def _config(args: argparse.Namespace, read_config: ConfigReader) -> DlqConfig:
    if args.config is not None:
        return read_config(args.config, args.bootstrap_servers)
    return DlqConfig(KafkaCluster(args.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP)))


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
        out.write(f"{reader.topic}: no dead letters match\n")
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


def _cmd_replay(reader: DlqReader, flt: Filter, args: argparse.Namespace, config: DlqConfig, out: TextIO,
                err: TextIO) -> int:
    sender = ReplaySender(config.cluster, reader.topic, max(args.timeout, 10.0)) if args.yes else None
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
        chunk.append(plan_replay(dl, reader.topic, args.ingress_topic, args.to_topic, args.to_partition,
                                 config.ingress_topic))
        if len(chunk) >= _REPLAY_CHUNK:
            flush(chunk)
            chunk = []
    flush(chunk)
    emit([{"position": f"{p}:{o}", "status": "missing", "reason": "no such message in the DLQ"}
          for p, o in sorted(flt.positions - found)])
    if args.format == "table":
        if not counts:
            out.write(f"{reader.topic}: no dead letters match\n")
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
         prog: str = "python -m sinks dlq", read_config: ConfigReader = read_config_file) -> int:
    """`prog` is how the command names itself in its help and usage (`gateway dlq` through `gateway`);
    `read_config` reads `--config`."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = build_parser(prog)
    try:
        args = parser.parse_args(protect_relative_times(list(argv) if argv is not None else sys.argv[1:]))
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    try:
        return run(args, out, err, read_config)
    except ValueError as e:  # a config that cannot be used: a line per problem
        err.writelines(f"error: {line}\n" for line in str(e).splitlines())
        return EXIT_USAGE
    except DlqError as e:
        err.write(f"dlq: {e}\n")
        return EXIT_KAFKA
    except BrokenPipeError:  # `dlq list | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
