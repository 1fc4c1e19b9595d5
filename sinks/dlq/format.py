"""Reading a dead letter back (the parse half of `dead_letters.py`): the message, its `gw.errors.*`
headers and what they say, hostile bytes included.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from contract.dead_letters import HEADER_PREFIX
from contract.dead_letters import DeadLetterField as F
from contract.ingress import HEADER_REPLAY_OF
from validators.errors import Errors

REPLAY_REQUEST_PREFIX = "replay:"


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
    record_errors: tuple[RecordErrorView, ...]  # the first ones: the sink bounds the list (contract.record_errors)
    record_error_count: int  # how many the batch had (`record.errors.total`; absent before it was written: the list's)
    topic: str | None
    partition: int | None
    partition_text: str | None
    ingress_topic: str | None
    ingress_partition: int | None
    ingress_offset: int | None
    request_id: str | None
    client_id: str | None
    principal: str | None  # who produced the batch through the front door
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
    def record_errors_truncated(self) -> bool:
        return self.record_error_count > len(self.record_errors)

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
            problems.append(f"{HEADER_PREFIX}{name} is missing or not a number: {raw!r}")
        return v

    def opt(name: str) -> str | None:
        v = h.get(name)
        return None if v is None or v == "" else v

    code = required_int(F.CODE)
    name = opt(F.NAME)
    if not foreign and name is None:
        problems.append(f"{F.NAME.header} is missing")
        if code is not None:
            try:
                name = Errors.for_code(code).name
            except KeyError:
                pass
    record_errors: list[RecordErrorView] = []
    raw_errors = h.get(F.RECORD_ERRORS)
    if raw_errors not in (None, ""):
        try:
            doc = json.loads(raw_errors)
            if not isinstance(doc, list):
                raise ValueError("not a list")
            for e in doc:
                record_errors.append(RecordErrorView(int(e["batch_index"]), e.get("message")))
        except (ValueError, TypeError, KeyError) as e:
            problems.append(f"{F.RECORD_ERRORS.header} is not a JSON list of {{batch_index, message}}: {e}")
    raw_total = h.get(F.RECORD_ERRORS_TOTAL)
    record_error_count = _int(raw_total)
    if record_error_count is None or record_error_count < len(record_errors):
        if raw_total is not None:
            problems.append(f"{F.RECORD_ERRORS_TOTAL.header} is not a count of at least the listed "
                            f"{len(record_errors)}: {raw_total!r}")
        record_error_count = len(record_errors)
    window_text = opt(F.WINDOW)
    window = None
    if window_text is not None:
        m = _WINDOW.match(window_text)
        if m:
            window = (int(m.group(1)), int(m.group(2)))
        else:
            problems.append(f"{F.WINDOW.header} does not read [lower, upper]: {window_text!r}")
    partition_text = opt(F.PARTITION)
    ingress_partition = required_int(F.INGRESS_PARTITION)
    ingress_offset = required_int(F.INGRESS_OFFSET)
    request_id = opt(F.REQUEST_ID)
    replay_of = extra.get(HEADER_REPLAY_OF) or h.get(F.REPLAY_OF) or None
    if replay_of is None and request_id is not None and request_id.startswith(REPLAY_REQUEST_PREFIX):
        replay_of = _replay_position_from_request_id(request_id)
    return DeadLetter(
        message=message,
        foreign=foreign,
        problems=tuple(problems),
        error_code=code,
        error_name=name,
        error_message=opt(F.MESSAGE),
        record_errors=tuple(record_errors),
        record_error_count=record_error_count,
        topic=opt(F.TOPIC),
        partition=_int(partition_text),
        partition_text=partition_text,
        ingress_topic=opt(F.INGRESS_TOPIC),
        ingress_partition=ingress_partition,
        ingress_offset=ingress_offset,
        request_id=request_id,
        client_id=opt(F.CLIENT_ID),
        principal=opt(F.PRINCIPAL),
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
