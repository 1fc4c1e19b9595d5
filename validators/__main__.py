"""Command line for the pure core: decide one batch, or dump one.

    python -m validators decide --config '{"message.timestamp.type": "LogAppendTime"}' --now 1700000000000 \\
        [--log-end-offset N] [--log-start-offset N] [--last-append-time MS] [--producers JSON] \\
        [--topic T] [--partition P] [--partitions N] [--registry conf/topics.json] [--out stored.bin] < batch.bin
    python -m validators dump [--all] < batch.bin

`decide` prints the decision as one JSON object on its last stdout line (log lines go to stderr):
error_code (0 when accepted), error_name (null when accepted), error_message, record_errors
[{batch_index, message}], base_offset (-1 when rejected), last_offset, log_append_time_ms (-1 for
CreateTime and when rejected), log_start_offset, max_timestamp, record_count, append_time_ms,
clock_held, duplicate, future_timestamp_count, window, stored_size and the new partition state.
Exit status: 0 accepted, 1 rejected (the decision is printed either way), 2 bad arguments, configuration or
input (no bytes, a truncated batch: one `error:` line on stderr, no decision).

`dump` prints `batch_dump.dump()` (or `dump_all()` with --all) as JSON; exit status 0, or 1 when the bytes do
not decode (one `error:` line).

A batch to try: `gateway dlq show --raw batch.bin PARTITION:OFFSET` writes a dead letter's batch, unchanged.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from validators.append_result import Accepted, PartitionState
from validators.codec.record_batch import LOG_OVERHEAD
from validators.log_validator import next_batch_size, validate_and_assign
from validators.producer_state import producers_from_json, producers_to_json
from validators.topic_config import INTERNAL_TOPICS, ConfigError, TopicConfig, TopicRegistry, topic_config

EXIT_ACCEPTED = 0
EXIT_REJECTED = 1
EXIT_INVALID = 2
DECIDE_EPILOG = ("exit status: 0 accepted; 1 rejected (the decision is printed either way); 2 bad arguments, "
                 "configuration or input (no bytes, a truncated batch). A batch to try: "
                 "`gateway dlq show --raw batch.bin PARTITION:OFFSET` writes a dead letter's batch.")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validators", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decide", help="validate one produce batch from stdin and print the decision as JSON",
                       epilog=DECIDE_EPILOG)
    d.add_argument("--config", default="{}", help="JSON object of Kafka topic configs (default: Kafka 4.x defaults)")
    d.add_argument("--defaults", default="{}", help="JSON object of gateway-wide defaults named like broker configs")
    d.add_argument("--registry", help="topic registry file (conf/topics.json); overrides --config/--defaults")
    d.add_argument("--now", type=int, required=True, help="the batch clock, epoch ms")
    d.add_argument("--topic", default="topic", help="the target topic (default %(default)s)")
    d.add_argument("--partition", type=int, default=0, help="the target partition (default %(default)s)")
    d.add_argument("--partitions", type=int, help="partition count of the topic (default: partition + 1)")
    d.add_argument("--log-start-offset", type=int, default=0, help="the partition's log start offset (default 0)")
    d.add_argument("--log-end-offset", type=int, default=0,
                   help="the partition's log end offset: the accepted batch's base offset (default 0)")
    d.add_argument("--last-append-time", type=int, default=-1, help="the partition's last append time, epoch ms")
    d.add_argument("--producers", default="", help="producer state as producers_to_json prints it")
    d.add_argument("--out", help="write the stored batch bytes to this file when accepted")
    u = sub.add_parser("dump", help="print one batch from stdin as JSON (DumpLogSegments field names)",
                       epilog="exit status: 0 done; 1 the bytes do not decode (one error: line)")
    u.add_argument("--all", action="store_true", help="dump every back-to-back batch")
    return p


def _topic_config(args: argparse.Namespace) -> TopicConfig | None:
    if args.registry:
        return TopicRegistry.load(args.registry).get(args.topic)
    try:
        configs = json.loads(args.config)
        defaults = json.loads(args.defaults)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--config/--defaults must be JSON objects: {e}") from None
    if not isinstance(configs, dict) or not isinstance(defaults, dict):
        raise ConfigError("--config/--defaults must be JSON objects")
    partitions = args.partitions if args.partitions is not None else max(args.partition + 1, 1)
    if args.topic in INTERNAL_TOPICS:
        return None  # the decision reports "Cannot append to internal topic"
    try:
        return topic_config(args.topic, partitions, configs, defaults)
    except ConfigError as e:
        if "Topic name is invalid" in str(e):
            return None  # let the decision report INVALID_TOPIC_EXCEPTION for the name
        raise


def decision_json(result: Any) -> dict[str, Any]:
    if isinstance(result, Accepted):
        state = result.state
        return {
            "error_code": 0,
            "error_name": None,
            "error_message": None,
            "record_errors": [],
            "base_offset": result.base_offset,
            "last_offset": result.last_offset,
            "log_append_time_ms": result.log_append_time_ms,
            "log_start_offset": state.log_start_offset,
            "max_timestamp": result.max_timestamp,
            "record_count": result.record_count,
            "append_time_ms": result.append_time_ms,
            "clock_held": result.clock_held,
            "duplicate": result.duplicate,
            "future_timestamp_count": result.future_timestamp_count,
            "rebuilt": result.rebuilt,
            "input_magic": result.input_magic,
            "window": None,
            "stored_size": len(result.records),
            "state": {
                "log_start_offset": state.log_start_offset,
                "log_end_offset": state.log_end_offset,
                "last_append_time_ms": state.last_append_time_ms,
                "producers": producers_to_json(state.producers),
            },
        }
    return {
        "error_code": result.error.code,
        "error_name": result.error.name,
        "error_message": result.message,
        "record_errors": [{"batch_index": e.batch_index, "message": e.message} for e in result.record_errors],
        "base_offset": -1,
        "last_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": result.log_start_offset,
        "max_timestamp": -1,
        "record_count": 0,
        "append_time_ms": -1,
        "clock_held": False,
        "duplicate": False,
        "future_timestamp_count": 0,
        "rebuilt": False,
        "input_magic": None,
        "window": list(result.window) if result.window is not None else None,
        "stored_size": 0,
        "state": None,
    }


def incomplete_input(data: bytes) -> str | None:
    """Why `data` holds no complete batch, for a person reading a file (a cut-off download, a short read),
    or None when it does. The decision itself answers such bytes as Kafka does (`frame_batch`: INVALID_RECORD,
    "must have at least one record batch"), which names neither the cause nor the sizes."""
    if not data:
        return "no bytes: expected one produce batch (RecordBatch v2 or a legacy message set)"
    if len(data) < LOG_OVERHEAD:
        return f"truncated: {len(data)} bytes, fewer than a batch's {LOG_OVERHEAD}-byte offset and size fields"
    if next_batch_size(data, 0) is not None:
        return None  # complete, or framing Kafka rejects with its own clear text (size, magic)
    size = int.from_bytes(data[8:12], "big", signed=True)
    return f"truncated: the batch's size field says {size + LOG_OVERHEAD} bytes, {len(data)} present"


def _decide(args: argparse.Namespace) -> int:
    try:
        config = _topic_config(args)
        producers = producers_from_json(args.producers)
    except (ConfigError, ValueError, OSError) as e:  # OSError: --registry FILE unreadable
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID
    state = PartitionState(args.log_start_offset, args.log_end_offset, args.last_append_time, producers)
    batch = sys.stdin.buffer.read()
    incomplete = incomplete_input(batch)
    if incomplete is not None:  # the gateway would reject it with Kafka's text; a person needs the cause
        print(f"error: stdin: {incomplete}", file=sys.stderr)
        return EXIT_INVALID
    result = validate_and_assign(batch, args.topic, args.partition, config, state, args.now)
    if args.out and isinstance(result, Accepted):
        try:
            with open(args.out, "wb") as f:
                f.write(result.records)
        except OSError as e:
            print(f"error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
            return EXIT_INVALID
    print(json.dumps(decision_json(result)))
    return EXIT_ACCEPTED if isinstance(result, Accepted) else EXIT_REJECTED


def _dump(args: argparse.Namespace) -> int:
    from validators import batch_dump

    data = sys.stdin.buffer.read()
    try:
        doc: Any = batch_dump.dump_all(data) if args.all else batch_dump.dump(data)
    except ValueError as e:  # CorruptRecordError and friends
        print(f"error: {getattr(e, 'message', None) or e}", file=sys.stderr)
        return 1
    print(json.dumps(doc, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    if args.command == "decide":
        return _decide(args)
    return _dump(args)


if __name__ == "__main__":
    sys.exit(main())
