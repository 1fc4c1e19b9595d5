"""`dlq`: the operators' tool for the dead-letter topic (DESIGN §4.4).

    python -m sinks.dlq_command stats  [filters]
    python -m sinks.dlq_command list   [filters] [--limit N]
    python -m sinks.dlq_command show   PARTITION:OFFSET | --request-id ID
    python -m sinks.dlq_command replay [filters] (--position P:O ... | --all) [--to-topic T] [--to-partition N] [--yes]

Common options: `--bootstrap-servers` (default $GATEWAY_BOOTSTRAP_SERVERS or 127.0.0.1:9092), `--topic`
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

Replay re-submits the dead letter's value unchanged (DESIGN §4.4: replayable as is) to the ingress
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
import json
import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from contract.ingress import HEADER_REPLAY_OF, ingress_headers, ingress_key
from contract.topics import DEFAULT_DLQ_TOPIC, DEFAULT_INGRESS_TOPIC
from sinks.dead_letters import HEADER_PREFIX
from validators.batch_dump import dump
from validators.errors import Errors

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "GATEWAY_BOOTSTRAP_SERVERS"

REPLAY_REQUEST_PREFIX = "replay:"

EXIT_OK = 0
EXIT_KAFKA = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3

_VALUE_PREVIEW_BYTES = 64


# ============================================================================ the pure part: parsing


@dataclass(frozen=True)
class DlqMessage:
    """One message of the dead-letter topic, as read (independent of the Kafka client's types)."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def position(self) -> str:
        return f"{self.partition}:{self.offset}"


@dataclass(frozen=True)
class RecordErrorView:
    batch_index: int
    message: str | None


@dataclass(frozen=True)
class DeadLetter:
    """A DLQ message read through the gateway's `gw.errors.*` contract. `foreign` when it has none of
    those headers; `problems` lists every header that is missing or does not parse."""

    message: DlqMessage
    foreign: bool
    problems: tuple[str, ...]
    error_code: int | None
    error_name: str | None
    error_message: str | None
    record_errors: tuple[RecordErrorView, ...]
    topic: str | None
    partition: int | None
    partition_text: str | None
    ingress_topic: str | None
    ingress_partition: int | None
    ingress_offset: int | None
    request_id: str | None
    client_id: str | None
    window: tuple[int, int] | None
    window_text: str | None
    replay_of: str | None  # the dead letter is the rejection of a replay of this DLQ position

    @property
    def position(self) -> str:
        return self.message.position

    @property
    def rejected_at_ms(self) -> int:
        return self.message.timestamp_ms

    @property
    def target(self) -> str:
        if self.topic is None and self.partition_text is None:
            return "-"
        part = str(self.partition) if self.partition is not None else (self.partition_text or "?")
        return f"{self.topic if self.topic is not None else '?'}-{part}"

    @property
    def is_replay(self) -> bool:
        return self.replay_of is not None


def _text(value: bytes | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace")


def _int(text: str | None) -> int | None:
    if text is None or text.strip() == "":
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


_WINDOW = re.compile(r"^\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]$")


def parse_dead_letter(message: DlqMessage) -> DeadLetter:
    """Read the `gw.errors.*` headers (first occurrence of each); never raises."""
    h: dict[str, str | None] = {}
    extra: dict[str, str | None] = {}
    for name, value in message.headers:
        if name.startswith(HEADER_PREFIX):
            h.setdefault(name[len(HEADER_PREFIX):], _text(value))
        else:
            extra.setdefault(name, _text(value))
    problems: list[str] = []
    foreign = not h
    if foreign:
        problems.append("no gw.errors.* headers: not a dead letter of the gateway")

    def required_int(name: str) -> int | None:
        raw = h.get(name)
        v = _int(raw)
        if not foreign and v is None:
            problems.append(f"gw.errors.{name} is missing or not a number: {raw!r}")
        return v

    def opt(name: str) -> str | None:
        v = h.get(name)
        return None if v is None or v == "" else v

    code = required_int("code")
    name = opt("name")
    if not foreign and name is None:
        problems.append("gw.errors.name is missing")
        if code is not None:
            try:
                name = Errors.for_code(code).name
            except KeyError:
                pass
    record_errors: list[RecordErrorView] = []
    raw_errors = h.get("record.errors")
    if raw_errors not in (None, ""):
        try:
            doc = json.loads(raw_errors)
            if not isinstance(doc, list):
                raise ValueError("not a list")
            for e in doc:
                record_errors.append(RecordErrorView(int(e["batch_index"]), e.get("message")))
        except (ValueError, TypeError, KeyError) as e:
            problems.append(f"gw.errors.record.errors is not a JSON list of {{batch_index, message}}: {e}")
    window_text = opt("window")
    window = None
    if window_text is not None:
        m = _WINDOW.match(window_text)
        if m:
            window = (int(m.group(1)), int(m.group(2)))
        else:
            problems.append(f"gw.errors.window does not read [lower, upper]: {window_text!r}")
    partition_text = opt("partition")
    ingress_partition = required_int("ingress.partition")
    ingress_offset = required_int("ingress.offset")
    request_id = opt("request.id")
    replay_of = extra.get(HEADER_REPLAY_OF) or h.get("replay.of") or None
    if replay_of is None and request_id is not None and request_id.startswith(REPLAY_REQUEST_PREFIX):
        replay_of = _replay_position_from_request_id(request_id)
    return DeadLetter(
        message=message,
        foreign=foreign,
        problems=tuple(problems),
        error_code=code,
        error_name=name,
        error_message=opt("message"),
        record_errors=tuple(record_errors),
        topic=opt("topic"),
        partition=_int(partition_text),
        partition_text=partition_text,
        ingress_topic=opt("ingress.topic"),
        ingress_partition=ingress_partition,
        ingress_offset=ingress_offset,
        request_id=request_id,
        client_id=opt("client.id"),
        window=window,
        window_text=window_text,
        replay_of=replay_of,
    )


def replay_request_id(dlq_topic: str, dl: DeadLetter) -> str:
    original = dl.request_id if dl.request_id is not None else ""
    return f"{REPLAY_REQUEST_PREFIX}{dlq_topic}:{dl.message.partition}:{dl.message.offset}:{original}"


def _replay_position_from_request_id(request_id: str) -> str:
    """`replay:<dlq-topic>:<p>:<o>:<original>` -> `<dlq-topic>:<p>:<o>` (or the whole rest when odd)."""
    parts = request_id[len(REPLAY_REQUEST_PREFIX):].split(":", 3)
    return ":".join(parts[:3]) if len(parts) >= 3 else request_id[len(REPLAY_REQUEST_PREFIX):]


# ============================================================================ time


def format_utc(ms: int | None) -> str:
    """Human-readable UTC with milliseconds (`2024-05-01T12:00:00.123Z`); Kafka's -1 is `none`."""
    if ms is None:
        return "-"
    if ms == -1:
        return "none"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return "out of range"


_RELATIVE = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from epoch ms, ISO-8601 (naive = UTC) or a relative `-<n><ms|s|m|h|d>`."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text) and not _RELATIVE.match(text):
        return int(text)
    m = _RELATIVE.match(text)
    if m:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - int(m.group(1)) * _UNIT_MS[m.group(2)]
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(
            f"cannot read time {text!r}: use epoch milliseconds, ISO-8601 (e.g. 2024-05-01T12:00:00Z) or -15m/-2h/-7d"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_position(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"a dead letter's position is PARTITION:OFFSET, got {text!r}")
    return int(m.group(1)), int(m.group(2))


# ============================================================================ filters and stats


@dataclass(frozen=True)
class Filter:
    """Which dead letters a command looks at; empty sets mean "any". Time bounds: since <= t < until."""

    error_names: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()
    partitions: frozenset[int] = frozenset()
    since_ms: int | None = None
    until_ms: int | None = None
    request_ids: frozenset[str] = frozenset()
    positions: frozenset[tuple[int, int]] = frozenset()

    @property
    def needs_gateway_headers(self) -> bool:
        return bool(self.error_names or self.topics or self.partitions or self.request_ids)

    def matches(self, dl: DeadLetter) -> bool:
        msg = dl.message
        if self.positions and (msg.partition, msg.offset) not in self.positions:
            return False
        if self.since_ms is not None and msg.timestamp_ms < self.since_ms:
            return False
        if self.until_ms is not None and msg.timestamp_ms >= self.until_ms:
            return False
        if self.error_names and (dl.error_name not in self.error_names and str(dl.error_code) not in self.error_names):
            return False
        if self.topics and dl.topic not in self.topics:
            return False
        if self.partitions and dl.partition not in self.partitions:
            return False
        if self.request_ids and dl.request_id not in self.request_ids:
            return False
        return True


@dataclass(frozen=True)
class DlqStats:
    total: int
    foreign: int
    malformed: int  # gateway dead letters with unreadable headers
    replays: int  # rejections of replayed dead letters
    first_ms: int | None
    last_ms: int | None
    by_error: tuple[tuple[str, int], ...]
    by_topic: tuple[tuple[str, int], ...]
    by_partition: tuple[tuple[str, int], ...]  # "<topic>-<partition>"
    bytes: int

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "foreign": self.foreign,
            "malformed": self.malformed,
            "replays": self.replays,
            "first_ms": self.first_ms,
            "first_utc": format_utc(self.first_ms) if self.first_ms is not None else None,
            "last_ms": self.last_ms,
            "last_utc": format_utc(self.last_ms) if self.last_ms is not None else None,
            "bytes": self.bytes,
            "by_error": dict(self.by_error),
            "by_topic": dict(self.by_topic),
            "by_partition": dict(self.by_partition),
        }


@dataclass
class StatsAccumulator:
    """Counts as dead letters stream by (O(distinct keys) memory)."""

    total: int = 0
    foreign: int = 0
    malformed: int = 0
    replays: int = 0
    bytes: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    by_error: Counter = field(default_factory=Counter)
    by_topic: Counter = field(default_factory=Counter)
    by_partition: Counter = field(default_factory=Counter)

    def add(self, dl: DeadLetter) -> None:
        self.total += 1
        self.bytes += len(dl.message.value or b"")
        ts = dl.rejected_at_ms
        self.first_ms = ts if self.first_ms is None else min(self.first_ms, ts)
        self.last_ms = ts if self.last_ms is None else max(self.last_ms, ts)
        if dl.foreign:
            self.foreign += 1
            self.by_error["(foreign)"] += 1
            return
        if dl.problems:
            self.malformed += 1
        if dl.is_replay:
            self.replays += 1
        self.by_error[dl.error_name or f"code {dl.error_code}"] += 1
        self.by_topic[dl.topic if dl.topic is not None else "(none)"] += 1
        self.by_partition[dl.target] += 1

    def result(self) -> DlqStats:
        def ordered(c: Counter) -> tuple[tuple[str, int], ...]:
            return tuple(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

        return DlqStats(
            self.total, self.foreign, self.malformed, self.replays, self.first_ms, self.last_ms,
            ordered(self.by_error), ordered(self.by_topic), ordered(self.by_partition), self.bytes,
        )


def compute_stats(dead_letters: Iterable[DeadLetter]) -> DlqStats:
    acc = StatsAccumulator()
    for dl in dead_letters:
        acc.add(dl)
    return acc.result()


# ============================================================================ list / show views


def _preview(data: bytes | None, limit: int = _VALUE_PREVIEW_BYTES) -> str:
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
        if text.isprintable():
            return text if len(text) <= limit else text[:limit] + "…"
    except UnicodeDecodeError:
        pass
    return "0x" + data[:limit].hex() + ("…" if len(data) > limit else "")


def _batch_summary(value: bytes | None) -> tuple[int | None, str | None]:
    """(record count, why not readable) from the batch header, without decoding records."""
    if value is None:
        return None, "null value"
    if len(value) >= 61 and value[16] == 2:
        return int.from_bytes(value[57:61], "big", signed=True), None
    if len(value) >= 17 and value[16] in (0, 1):
        return None, f"legacy magic {value[16]}"
    return None, "not a record batch"


def list_row(dl: DeadLetter) -> dict[str, Any]:
    count, unreadable = _batch_summary(dl.message.value)
    return {
        "position": dl.position,
        "rejected_at_ms": dl.rejected_at_ms,
        "rejected_at": format_utc(dl.rejected_at_ms),
        "error_code": dl.error_code,
        "error_name": "FOREIGN" if dl.foreign else dl.error_name,
        "target": dl.target,
        "request_id": dl.request_id,
        "client_id": dl.client_id,
        "records": count,
        "bytes": len(dl.message.value or b""),
        "replay_of": dl.replay_of,
        "message": dl.problems[0] if dl.foreign else dl.error_message,
        "problems": list(dl.problems),
        "unreadable": unreadable,
    }


def _bound(ms: int) -> str:
    """A window bound as a date; the default unlimited before-window wraps to a huge negative (Kafka prints
    it as is), which is no date at all."""
    text = format_utc(ms)
    return "unbounded" if text == "out of range" else text


def _terminal_text(text: str | None, encoding: str | None) -> str | None:
    """A key/value for a table: hex (0x...) when it is binary or holds control characters."""
    if text is None:
        return None
    if encoding == "hex":
        return "0x" + text
    return text if text.isprintable() else "0x" + text.encode("utf-8").hex()


def show_view(dl: DeadLetter) -> dict[str, Any]:
    """Everything about one dead letter, records decoded (offsets as sent: the batch index)."""
    msg = dl.message
    view: dict[str, Any] = {
        "position": dl.position,
        "rejected_at_ms": dl.rejected_at_ms,
        "rejected_at": format_utc(dl.rejected_at_ms),
        "key": _preview(msg.key, 1 << 20),
        "foreign": dl.foreign,
        "problems": list(dl.problems),
        "headers": [{"key": k, "value": _preview(v, 1 << 20)} for k, v in msg.headers],
        "error": {
            "code": dl.error_code,
            "name": dl.error_name,
            "message": dl.error_message,
            "record_errors": [{"batch_index": e.batch_index, "message": e.message} for e in dl.record_errors],
        },
        "target": {"topic": dl.topic, "partition": dl.partition, "partition_header": dl.partition_text},
        "ingress": {"topic": dl.ingress_topic, "partition": dl.ingress_partition, "offset": dl.ingress_offset},
        "request_id": dl.request_id,
        "client_id": dl.client_id,
        "replay_of": dl.replay_of,
        "window": None,
        "value_bytes": None if msg.value is None else len(msg.value),
        "batch": None,
        "batch_error": None,
    }
    if dl.window is not None:
        lower, upper = dl.window
        view["window"] = {"text": dl.window_text, "lower_ms": lower, "upper_ms": upper,
                          "lower": _bound(lower), "upper": _bound(upper)}
    if msg.value is None:
        view["batch_error"] = "null value"
        return view
    try:
        batch = dump(msg.value)
    except Exception as e:  # noqa: BLE001 — anything undecodable is shown, not fatal
        view["batch_error"] = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
        view["value_preview"] = "0x" + msg.value[:256].hex() + ("…" if len(msg.value) > 256 else "")
        return view
    errors_by_index = {e.batch_index: e.message for e in dl.record_errors}
    records = batch.pop("records", [])
    for i, r in enumerate(records):
        r["batchIndex"] = i
        r["timestampUtc"] = format_utc(r.get("timestamp"))
        if "createTime" in r:
            r["createTimeUtc"] = format_utc(r["createTime"])
        if dl.window is not None and r.get("timestamp") not in (None, -1):
            r["inWindow"] = dl.window[0] <= r["timestamp"] <= dl.window[1]
        r["recordError"] = errors_by_index.get(i)
    for ts_field in ("baseTimestamp", "maxTimestamp"):
        if ts_field in batch:
            batch[ts_field + "Utc"] = format_utc(batch[ts_field])
    view["batch"] = batch
    view["records"] = records
    return view


# ============================================================================ replay planning


@dataclass(frozen=True)
class ReplayPlan:
    dead_letter: DeadLetter
    ingress_topic: str
    target_topic: str | None
    target_partition: int | None
    request_id: str | None
    refused: str | None  # why this dead letter is not replayed; None: it is (or would be)

    @property
    def key(self) -> bytes:
        return ingress_key(self.target_topic or "", self.target_partition)

    def headers(self, dlq_topic: str) -> list[tuple[str, bytes]]:
        dl = self.dead_letter
        return ingress_headers(
            self.target_topic or "", self.target_partition, self.request_id or "", client_id=dl.client_id,
            replay_of=f"{dlq_topic}:{dl.message.partition}:{dl.message.offset}",
        )


def plan_replay(
    dl: DeadLetter, dlq_topic: str, ingress_topic: str | None = None,
    to_topic: str | None = None, to_partition: int | None = None,
) -> ReplayPlan:
    ingress = ingress_topic or dl.ingress_topic or DEFAULT_INGRESS_TOPIC
    topic = to_topic if to_topic is not None else dl.topic
    partition = to_partition if to_partition is not None else dl.partition
    refused = None
    if dl.foreign:
        refused = "not a dead letter of the gateway (no gw.errors.* headers)"
    elif dl.is_replay:
        refused = f"already a replay (of {dl.replay_of}): replaying it again could loop"
    elif dl.message.value is None:
        refused = "null value: nothing to replay"
    elif topic is None:
        refused = "no target topic (gw.topic was missing): give --to-topic"
    elif partition is None:
        refused = f"no target partition (gw.partition was {dl.partition_text!r}): give --to-partition"
    return ReplayPlan(dl, ingress, topic, partition, None if dl.foreign else replay_request_id(dlq_topic, dl), refused)


# ============================================================================ Kafka I/O


class DlqError(Exception):
    """A problem with the topic or the broker, reported to the operator (exit code 1)."""


def _consumer(bootstrap_servers: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"gw-dlq-{uuid.uuid4().hex}",  # never committed: assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "allow.auto.create.topics": False,
    })


def _to_message(m: Any) -> DlqMessage:
    _ts_type, ts = m.timestamp()
    return DlqMessage(
        partition=m.partition(), offset=m.offset(), timestamp_ms=ts, key=m.key(), value=m.value(),
        headers=tuple((k, v) for k, v in (m.headers() or [])),
    )


class DlqReader:
    """Reads the dead-letter topic up to the end offsets seen when it was opened."""

    def __init__(self, bootstrap_servers: str, topic: str, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self.consumer = _consumer(bootstrap_servers)
        try:
            meta = self.consumer.list_topics(topic, timeout=timeout_s)
        except Exception as e:  # KafkaException: broker unreachable
            self.consumer.close()
            raise DlqError(f"cannot read metadata of {topic} from {bootstrap_servers}: {e}") from None
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            self.consumer.close()
            why = tmeta.error.str() if tmeta is not None and tmeta.error is not None else "no partitions"
            raise DlqError(f"dead-letter topic {topic} does not exist on {bootstrap_servers} ({why})")
        self.partitions = sorted(tmeta.partitions)
        self.watermarks = {p: self._watermarks(p) for p in self.partitions}

    def _watermarks(self, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        return self.consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=self.timeout_s)

    @property
    def is_empty(self) -> bool:
        return all(lo >= hi for lo, hi in self.watermarks.values())

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> DlqReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_offsets(self, since_ms: int | None) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        starts = {p: lo for p, (lo, _hi) in self.watermarks.items()}
        if since_ms is None:
            return starts
        found = self.consumer.offsets_for_times(
            [TopicPartition(self.topic, p, since_ms) for p in self.partitions], timeout=self.timeout_s
        )
        for tp in found:
            # -1: no message at or after since_ms: nothing to read in that partition
            starts[tp.partition] = tp.offset if tp.offset >= 0 else self.watermarks[tp.partition][1]
        return starts

    def scan(self, since_ms: int | None = None, partitions: Iterable[int] | None = None,
             starts: dict[int, int] | None = None) -> Iterator[DlqMessage]:
        """Every message from the start offsets to the end offsets captured at open, partition by
        partition interleaved as the broker returns them."""
        from confluent_kafka import TopicPartition

        wanted = set(self.partitions if partitions is None else partitions) & set(self.partitions)
        begin = starts if starts is not None else self.start_offsets(since_ms)
        ends = {p: self.watermarks[p][1] for p in wanted}
        remaining = {p: ends[p] for p in wanted if begin.get(p, ends[p]) < ends[p]}
        if not remaining:
            return
        self.consumer.assign([TopicPartition(self.topic, p, begin[p]) for p in sorted(remaining)])
        next_offset = {p: begin[p] for p in remaining}
        last_progress = time.monotonic()
        try:
            while remaining:
                # consume() waits until it has num_messages or the timeout passed: ask for no more than is left
                left = sum(end - next_offset[p] for p, end in remaining.items())
                batch = self.consumer.consume(num_messages=max(1, min(500, left)), timeout=0.5)
                if not batch:
                    # offsets can be skipped (aborted transactions, compaction): ask where we are
                    for tp in self.consumer.position([TopicPartition(self.topic, p) for p in list(remaining)]):
                        if tp.offset >= 0 and tp.offset >= remaining[tp.partition]:
                            remaining.pop(tp.partition, None)
                    if time.monotonic() - last_progress > self.timeout_s:
                        raise DlqError(
                            f"no progress reading {self.topic} for {self.timeout_s:.0f} s; still to read: "
                            + ", ".join(f"{p} up to {e}" for p, e in sorted(remaining.items()))
                        )
                    continue
                last_progress = time.monotonic()
                for m in batch:
                    if m.error() is not None:
                        raise DlqError(f"reading {self.topic}: {m.error()}")
                    p = m.partition()
                    end = remaining.get(p)
                    if end is None or m.offset() >= end:
                        continue  # arrived after the command started
                    next_offset[p] = m.offset() + 1
                    yield _to_message(m)
                    if m.offset() + 1 >= end:
                        remaining.pop(p, None)
                        self.consumer.pause([TopicPartition(self.topic, p)])
        finally:
            self.consumer.unassign()

    def fetch(self, partition: int, offset: int) -> DlqMessage | None:
        """The message at exactly partition:offset, or None when there is none."""
        if partition not in self.watermarks:
            return None
        lo, hi = self.watermarks[partition]
        if not lo <= offset < hi:
            return None
        for m in self.scan(partitions=[partition], starts={partition: offset}):
            return m if m.offset == offset else None
        return None


def read_dead_letters(reader: DlqReader, flt: Filter) -> Iterator[DeadLetter]:
    """The dead letters `flt` selects, streamed. Positions are fetched directly (one seek each)."""
    if flt.positions:
        for partition, offset in sorted(flt.positions):
            m = reader.fetch(partition, offset)
            if m is not None:
                dl = parse_dead_letter(m)
                if flt.matches(dl):
                    yield dl
        return
    for m in reader.scan(since_ms=flt.since_ms):
        dl = parse_dead_letter(m)
        if flt.matches(dl):
            yield dl


@dataclass(frozen=True)
class ReplayOutcome:
    plan: ReplayPlan
    sent: bool
    ingress_partition: int | None = None
    ingress_offset: int | None = None
    error: str | None = None


class ReplaySender:
    """One idempotent producer for a whole replay; `send` waits for every delivery report of its plans."""

    def __init__(self, bootstrap_servers: str, dlq_topic: str, timeout_s: float) -> None:
        from confluent_kafka import Producer

        self.dlq_topic = dlq_topic
        self.timeout_s = timeout_s
        self.producer = Producer({
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "message.max.bytes": 64 * 1024 * 1024,
            "client.id": "gw-dlq-replay",
        })

    def send(self, plans: Sequence[ReplayPlan]) -> list[ReplayOutcome]:
        reports: dict[int, tuple[int | None, int | None, str | None]] = {}

        def on_delivery(index: int) -> Any:
            def report(err: Any, msg: Any) -> None:
                reports[index] = (None, None, str(err)) if err is not None else (msg.partition(), msg.offset(), None)
            return report

        for i, plan in enumerate(plans):
            if plan.refused is not None:
                continue
            while True:
                try:
                    self.producer.produce(
                        plan.ingress_topic, key=plan.key, value=plan.dead_letter.message.value,
                        headers=plan.headers(self.dlq_topic), on_delivery=on_delivery(i),
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)  # local queue full: serve delivery reports, then retry
        self.producer.flush(self.timeout_s)
        out = []
        for i, plan in enumerate(plans):
            if plan.refused is not None:
                out.append(ReplayOutcome(plan, False))
                continue
            p, o, err = reports.get(i, (None, None, f"no delivery report within {self.timeout_s:.0f} s"))
            out.append(ReplayOutcome(plan, err is None, p, o, err))
        return out


# ============================================================================ output


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    s = str(v).replace("\n", " ")
    return s


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO, max_width: int = 60) -> None:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in row] for row in cells]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _jsonl(obj: Any, out: TextIO) -> None:
    # ASCII-only: no control character (C0, DEL, C1) from a hostile header ever reaches a terminal raw
    out.write(json.dumps(obj, ensure_ascii=True, default=str) + "\n")


class _SafeWriter:
    """Table output: topic names, request ids and messages come from producers' headers; escape every
    control character (terminal escape sequences included) except the line breaks we write."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> int:
        if not text.replace("\n", "").isprintable():
            text = "".join(c if c == "\n" or c.isprintable() else c.encode("unicode_escape").decode() for c in text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def _write_stats(stats: DlqStats, topic: str, fmt: str, out: TextIO) -> None:
    if fmt == "jsonl":
        _jsonl({"topic": topic, **stats.as_json()}, out)
        return
    if stats.total == 0:
        out.write(f"{topic}: no dead letters\n")
        return
    out.write(f"{topic}: {stats.total} dead letter(s), {stats.bytes} bytes, rejected from {format_utc(stats.first_ms)} "
              f"to {format_utc(stats.last_ms)}\n")
    if stats.foreign:
        out.write(f"  {stats.foreign} foreign message(s) without gw.errors.* headers\n")
    if stats.malformed:
        out.write(f"  {stats.malformed} dead letter(s) with unreadable gw.errors.* headers\n")
    if stats.replays:
        out.write(f"  {stats.replays} rejection(s) of replayed dead letters\n")
    for title, pairs in (("error", stats.by_error), ("topic", stats.by_topic), ("partition", stats.by_partition)):
        out.write("\n")
        render_table([{title: k, "count": n} for k, n in pairs], [title, "count"], out)


_LIST_COLUMNS = ("position", "rejected_at", "error_name", "target", "records", "bytes", "request_id", "client_id",
                 "message")


def _write_show(view: dict[str, Any], out: TextIO) -> None:
    err = view["error"]
    w = out.write
    w(f"dead letter {view['position']}\n")
    w(f"  rejected at   {view['rejected_at']} ({view['rejected_at_ms']})\n")
    if view["foreign"]:
        w("  FOREIGN       no gw.errors.* headers: not a dead letter of the gateway\n")
    else:
        w(f"  error         {err['name']} ({err['code']}): {err['message']}\n")
        tgt = view["target"]
        w(f"  target        topic {tgt['topic']!s}, partition {tgt['partition'] if tgt['partition'] is not None else tgt['partition_header']!s}\n")
        ing = view["ingress"]
        w(f"  ingress       {ing['topic']} {ing['partition']}:{ing['offset']}\n")
        w(f"  request id    {view['request_id']}\n  client id     {view['client_id']}\n")
        if view["replay_of"]:
            w(f"  replay of     {view['replay_of']}\n")
        if view["window"]:
            win = view["window"]
            w(f"  window        {win['text']} = [{win['lower']}, {win['upper']}]\n")
    for p in view["problems"]:
        w(f"  problem       {p}\n")
    w(f"  key           {view['key']}\n")
    w("headers:\n")
    for h in view["headers"]:
        w(f"  {h['key']} = {h['value']}\n")
    if err["record_errors"]:
        w("record errors:\n")
        for e in err["record_errors"]:
            w(f"  [{e['batch_index']}] {e['message']}\n")
    w(f"value: {view['value_bytes']} bytes\n")
    if view["batch_error"]:
        w(f"  not decodable: {view['batch_error']}\n")
        if view.get("value_preview"):
            w(f"  {view['value_preview']}\n")
        return
    b = view["batch"]
    if b is None:
        return
    w("batch: " + ", ".join(f"{k}={b[k]}" for k in (
        "magic", "timestampType", "compresscodec", "count", "baseTimestamp", "maxTimestamp", "producerId",
        "producerEpoch", "baseSequence", "isValid", "crc", "computedCrc") if k in b) + "\n")
    if b.get("recordsError"):
        w(f"  records not decodable: {b['recordsError']}\n")
    rows = []
    for r in view.get("records", []):
        rows.append({
            "offset": r.get("offset"), "timestamp": r.get("timestamp"), "utc": r.get("timestampUtc"),
            "in_window": {True: "yes", False: "NO"}.get(r.get("inWindow"), "-"),
            "key": _terminal_text(r.get("key"), r.get("keyEncoding")),
            "value": _terminal_text(r.get("value"), r.get("valueEncoding")),
            "headers": ",".join(h["key"] for h in r.get("headers", [])) or None,
            "error": r.get("recordError"),
        })
    if rows:
        w("records (offsets as sent):\n")
        render_table(rows, ["offset", "timestamp", "utc", "in_window", "key", "value", "headers", "error"], out, 80)


# ============================================================================ the command


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP))
    p.add_argument("--topic", default=DEFAULT_DLQ_TOPIC, help="the dead-letter topic (default %(default)s)")
    p.add_argument("--ingress-topic", default=None,
                   help="where replays go (default: the dead letter's gw.errors.ingress.topic, else gateway.ingress)")
    p.add_argument("--format", choices=("table", "jsonl"), default="table")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds without progress before giving up")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--error", action="append", default=[], metavar="NAME|CODE", help="error name or code (repeatable)")
    p.add_argument("--target-topic", action="append", default=[], help="target topic of the rejected batch")
    p.add_argument("--target-partition", action="append", type=int, default=[])
    p.add_argument("--since", help="rejected at or after (epoch ms, ISO-8601, -2h)")
    p.add_argument("--until", help="rejected before")
    p.add_argument("--request-id", action="append", default=[])
    p.add_argument("--position", action="append", default=[], metavar="P:O", help="DLQ partition:offset (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sinks dlq", description="Inspect and replay the gateway's dead letters.")
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
    p.add_argument("position", nargs="?", help="DLQ partition:offset")
    p.add_argument("--request-id", help="the first dead letter with this request id")
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

    with DlqReader(args.bootstrap_servers, args.topic, args.timeout) as reader:
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
            view = show_view(dl)
            _jsonl(view, out) if fmt == "jsonl" else _write_show(view, out)
            return EXIT_OK
        return _cmd_replay(reader, flt, args, out, err)


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


def _cmd_replay(reader: DlqReader, flt: Filter, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    sender = ReplaySender(args.bootstrap_servers, args.topic, max(args.timeout, 10.0)) if args.yes else None
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


def _join_relative_times(argv: list[str]) -> list[str]:
    """`--since -2h` would read as an unknown option to argparse: pass it as `--since=-2h`."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--since", "--until") and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(_join_relative_times(list(argv) if argv is not None else sys.argv[1:]))
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
