"""Writing dead letters (docs/design.md: dead-letter topic) in the sink's tasks: the contract is `contract.dead_letters`."""

from __future__ import annotations

from contract.dead_letters import DeadLetterField as F
from contract.decision_row import DecisionRow
from kafka_cluster.publisher import OutgoingMessage


def dead_letter(row: DecisionRow, ingress_topic: str) -> OutgoingMessage:
    """The message timestamp is the rejection time: the micro-batch clock that decided it."""
    partition = row.partition_header if row.partition is None else row.partition
    headers: dict[F, str] = {
        F.CODE: str(row.error_code),
        F.NAME: row.error_name or "",
        F.MESSAGE: row.error_message or "",
        F.RECORD_ERRORS: row.record_errors,
        F.RECORD_ERRORS_TOTAL: str(row.record_error_count),
        F.TOPIC: row.topic or "",
        F.PARTITION: "" if partition is None else str(partition),
        F.INGRESS_TOPIC: ingress_topic,
        F.INGRESS_PARTITION: str(row.ingress_partition),
        F.INGRESS_OFFSET: str(row.ingress_offset),
        F.REQUEST_ID: row.request_id,
        F.CLIENT_ID: row.client_id or "",
    }
    if row.principal:
        headers[F.PRINCIPAL] = row.principal
    if row.replay_of:  # a rejected replay: `dlq replay` refuses to send it again
        headers[F.REPLAY_OF] = row.replay_of
    if row.window:  # the validator's [now-before, now+after] of an INVALID_TIMESTAMP rejection
        headers[F.WINDOW] = row.window
    return OutgoingMessage(
        key=row.request_id.encode(),
        value=row.batch,
        headers=[(k.header, v.encode()) for k, v in headers.items()],
        timestamp_ms=row.batch_time_ms,
    )
