"""A dead letter (docs/design.md: dead-letter topic): the original batch bytes, unchanged and replayable, keyed by request id,
with `gw.errors.<field>` headers in the style of Kafka Connect's `__connect.errors.*`. The sink writes
them (`sinks.dlq.dead_letters`) and the DLQ tool reads them back (`sinks.dlq.format`) by these names.
"""

from __future__ import annotations

from enum import StrEnum

HEADER_PREFIX = "gw.errors."


class DeadLetterField(StrEnum):
    CODE = "code"  # Kafka's error code
    NAME = "name"  # Kafka's error name
    MESSAGE = "message"
    RECORD_ERRORS = "record.errors"  # JSON list of {batch_index, message} (KIP-467): the first ones, bounded
    RECORD_ERRORS_TOTAL = "record.errors.total"  # how many the batch had: more than the list when it is cut
    TOPIC = "topic"  # the target, as the ingress headers named it
    PARTITION = "partition"
    INGRESS_TOPIC = "ingress.topic"
    INGRESS_PARTITION = "ingress.partition"
    INGRESS_OFFSET = "ingress.offset"
    REQUEST_ID = "request.id"
    CLIENT_ID = "client.id"
    PRINCIPAL = "principal"  # who produced the batch through the front door (`User:alice`)
    REPLAY_OF = "replay.of"  # a rejected replay: `dlq replay` refuses to send it again
    WINDOW = "window"  # INVALID_TIMESTAMP: the accepted [now-before, now+after]

    @property
    def header(self) -> str:
        return HEADER_PREFIX + self.value
