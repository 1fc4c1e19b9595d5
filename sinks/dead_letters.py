"""Dead letters (DESIGN §4.4): the original batch bytes, unchanged and replayable, with
`gw.errors.*` headers in the style of Kafka Connect's `__connect.errors.*`."""

from __future__ import annotations

from typing import Any

from sinks.kafka_publisher import OutgoingMessage
from validators.errors import Errors
from validators.topic_config import TopicRegistry

HEADER_PREFIX = "gw.errors."


def _wrap_long(v: int) -> int:
    """Java long arithmetic, so the window prints as Kafka's message does (reference §2.2)."""
    return (v + 2**63) % 2**64 - 2**63


def timestamp_window(registry: TopicRegistry, topic: str | None, now_ms: int) -> str | None:
    config = registry.get(topic) if topic else None
    if config is None:
        return None
    lower = _wrap_long(now_ms - config.message_timestamp_before_max_ms)
    upper = _wrap_long(now_ms + config.message_timestamp_after_max_ms)
    return f"[{lower}, {upper}]"


def dead_letter(row: Any, ingress_topic: str, registry: TopicRegistry) -> OutgoingMessage:
    """The message timestamp is the rejection time: the micro-batch clock that decided it."""
    def s(v: Any) -> str:
        return "" if v is None or (isinstance(v, float) and v != v) else str(v)

    headers = {
        "code": str(int(row.error_code)),
        "name": s(row.error_name),
        "message": s(row.error_message),
        "record.errors": row.record_errors,
        "topic": s(row.topic),
        "partition": s(row.partition_header if s(row.partition) == "" else int(row.partition)),
        "ingress.topic": ingress_topic,
        "ingress.partition": str(int(row.ingress_partition)),
        "ingress.offset": str(int(row.ingress_offset)),
        "request.id": s(row.request_id),
        "client.id": s(row.client_id),
    }
    if int(row.error_code) == Errors.INVALID_TIMESTAMP.code:
        window = timestamp_window(registry, s(row.topic) or None, int(row.batch_time_ms))
        if window is not None:
            headers["window"] = window
    return OutgoingMessage(
        key=s(row.request_id).encode(),
        value=bytes(row.batch),
        headers=[(HEADER_PREFIX + k, v.encode()) for k, v in headers.items()],
        timestamp_ms=int(row.batch_time_ms),
    )
