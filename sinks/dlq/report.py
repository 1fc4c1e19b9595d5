"""Selecting and summarising dead letters: filters, stats, the list row and the show view.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sinks.dlq.format import DeadLetter
from sinks.dlq.times import format_utc
from validators.batch_dump import dump

_VALUE_PREVIEW_BYTES = 64


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
    principals: frozenset[str] = frozenset()

    @property
    def needs_gateway_headers(self) -> bool:
        return bool(self.error_names or self.topics or self.partitions or self.request_ids or self.principals)

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
        if self.principals and dl.principal not in self.principals:
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
        "principal": dl.principal,
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
            "record_errors_total": dl.record_error_count,  # more than listed when the sink cut the list
        },
        "target": {"topic": dl.topic, "partition": dl.partition, "partition_header": dl.partition_text},
        "ingress": {"topic": dl.ingress_topic, "partition": dl.ingress_partition, "offset": dl.ingress_offset},
        "request_id": dl.request_id,
        "client_id": dl.client_id,
        "principal": dl.principal,
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
