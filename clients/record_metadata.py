"""Kafka's `RecordMetadata` for a record sent through the gateway, built from the produce response
(KIP-32: the timestamp is LogAppendTime on LogAppendTime topics, else the record's CreateTime).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clients.errors import GatewayError
from validators.codec.record_batch import NO_TIMESTAMP, TimestampType

Callback = Callable[["RecordMetadata", "GatewayError | None"], None]


@dataclass(frozen=True)
class RecordMetadata:
    """Kafka's `RecordMetadata`, plus what the gateway's response adds."""

    topic: str
    partition: int
    offset: int  # -1: unknown (acks=0, or an error)
    timestamp: int  # log append time if the topic stamps it, else the record's CreateTime; -1 on error
    timestamp_type: TimestampType
    serialized_key_size: int
    serialized_value_size: int
    log_start_offset: int = -1
    request_id: str | None = None
    batch_index: int = 0

    def has_offset(self) -> bool:
        return self.offset != -1

    def has_timestamp(self) -> bool:
        return self.timestamp != NO_TIMESTAMP


def metadata_from_response(
    response: Mapping[str, Any], batch_index: int, create_time: int, key_size: int, value_size: int,
    topic: str, partition: int,
) -> RecordMetadata:
    """Kafka's FutureRecordMetadata.value(): offset = baseOffset + batchIndex (-1 stays -1); timestamp =
    logAppendTime when it is not -1, else the record's CreateTime (KIP-32)."""
    base = int(response["base_offset"])
    lat = int(response["log_append_time_ms"])
    return RecordMetadata(
        topic=topic,
        partition=partition,
        offset=-1 if base == -1 else base + batch_index,
        timestamp=lat if lat != NO_TIMESTAMP else create_time,
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat != NO_TIMESTAMP else TimestampType.CREATE_TIME,
        serialized_key_size=key_size,
        serialized_value_size=value_size,
        log_start_offset=int(response.get("log_start_offset", -1)),
        request_id=response.get("request_id"),
        batch_index=batch_index,
    )


def error_metadata(topic: str, partition: int, batch_index: int, request_id: str | None) -> RecordMetadata:
    """What Kafka hands a callback with an exception: the partition, everything else -1."""
    return RecordMetadata(topic, partition, -1, NO_TIMESTAMP, TimestampType.CREATE_TIME, -1, -1, -1, request_id, batch_index)
