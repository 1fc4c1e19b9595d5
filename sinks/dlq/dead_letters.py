"""Dead letters (DESIGN §4.4): the original batch bytes, unchanged and replayable, with
`gw.errors.*` headers in the style of Kafka Connect's `__connect.errors.*`."""

from __future__ import annotations

from typing import Any

from sinks.kafka_publisher import OutgoingMessage

HEADER_PREFIX = "gw.errors."


def dead_letter(row: Any, ingress_topic: str) -> OutgoingMessage:
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
    if s(row.replay_of):  # a rejected replay: `dlq replay` refuses to send it again
        headers["replay.of"] = s(row.replay_of)
    if s(row.window):  # the validator's [now-before, now+after] of an INVALID_TIMESTAMP rejection
        headers["window"] = s(row.window)
    return OutgoingMessage(
        key=s(row.request_id).encode(),
        value=bytes(row.batch),
        headers=[(HEADER_PREFIX + k, v.encode()) for k, v in headers.items()],
        timestamp_ms=int(row.batch_time_ms),
    )
