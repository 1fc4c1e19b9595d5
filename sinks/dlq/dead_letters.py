"""Writing dead letters (DESIGN §4.4) in the sink's tasks: the contract is `contract.dead_letters`."""

from __future__ import annotations

from typing import Any

from contract.dead_letters import DeadLetterField as F
from sinks.kafka_publisher import OutgoingMessage


def dead_letter(row: Any, ingress_topic: str) -> OutgoingMessage:
    """The message timestamp is the rejection time: the micro-batch clock that decided it."""
    def s(v: Any) -> str:
        return "" if v is None or (isinstance(v, float) and v != v) else str(v)

    headers: dict[F, str] = {
        F.CODE: str(int(row.error_code)),
        F.NAME: s(row.error_name),
        F.MESSAGE: s(row.error_message),
        F.RECORD_ERRORS: row.record_errors,
        F.TOPIC: s(row.topic),
        F.PARTITION: s(row.partition_header if s(row.partition) == "" else int(row.partition)),
        F.INGRESS_TOPIC: ingress_topic,
        F.INGRESS_PARTITION: str(int(row.ingress_partition)),
        F.INGRESS_OFFSET: str(int(row.ingress_offset)),
        F.REQUEST_ID: s(row.request_id),
        F.CLIENT_ID: s(row.client_id),
    }
    if s(row.replay_of):  # a rejected replay: `dlq replay` refuses to send it again
        headers[F.REPLAY_OF] = s(row.replay_of)
    if s(row.window):  # the validator's [now-before, now+after] of an INVALID_TIMESTAMP rejection
        headers[F.WINDOW] = s(row.window)
    return OutgoingMessage(
        key=s(row.request_id).encode(),
        value=bytes(row.batch),
        headers=[(k.header, v.encode()) for k, v in headers.items()],
        timestamp_ms=int(row.batch_time_ms),
    )
