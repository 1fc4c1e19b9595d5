"""Exceptions the gateway clients raise, shaped like Kafka's client exceptions.

A failed produce surfaces as `GatewayError`: Kafka's error code and name (`INVALID_TIMESTAMP`), the
Java exception class Kafka would raise (`InvalidTimestampException`), the message, and the batch's
record errors (KIP-467). Per record, the message follows the Java producer (`Sender.failBatch`):
a record with its own record error gets that error's message; when the batch has record errors
but not for this record, "Failed to append record because it was part of a batch which had one or
more invalid records"; otherwise the batch's message (or Kafka's default text for the code).
"""

from __future__ import annotations

from dataclasses import dataclass

from validators.errors import Errors

PART_OF_INVALID_BATCH = (
    "Failed to append record because it was part of a batch which had one or more invalid records"
)

# Kafka's RetriableException subclasses among the produce errors (a Java producer would retry them).
RETRIABLE = frozenset({
    "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT",
    "KAFKA_STORAGE_ERROR", "OUT_OF_ORDER_SEQUENCE_NUMBER", "NETWORK_EXCEPTION",
})


@dataclass(frozen=True)
class RecordError:
    """Kafka's `ProduceResponse.RecordError`: 0-based index of the record in its batch, and why."""

    batch_index: int
    message: str | None


class GatewayError(Exception):
    """A produce that the gateway (or the transport to it) did not accept."""

    def __init__(
        self,
        error_code: int,
        error_name: str,
        message: str,
        record_errors: tuple[RecordError, ...] = (),
        *,
        batch_message: str | None = None,
        record_error: RecordError | None = None,
        request_id: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.error_name = error_name
        self.message = message
        self.batch_message = batch_message if batch_message is not None else message
        self.record_errors = record_errors
        self.record_error = record_error
        self.request_id = request_id
        self.topic = topic
        self.partition = partition

    @property
    def exception_name(self) -> str:
        """The Java exception class a Kafka producer would hand this record's callback."""
        if self.record_errors and self.record_error is None:
            return "KafkaException"
        if len(self.record_errors) > 1:
            return "InvalidRecordException"
        try:
            return Errors.for_name(self.error_name).exception_name or "KafkaException"
        except KeyError:
            return "KafkaException"

    @property
    def retriable(self) -> bool:
        return self.error_name in RETRIABLE

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message}"

    def __repr__(self) -> str:
        return (f"GatewayError(error_name={self.error_name!r}, error_code={self.error_code}, message={self.message!r}, "
                f"record_errors={self.record_errors!r}, request_id={self.request_id!r})")


class KafkaTimeoutError(GatewayError):
    """No response within `delivery_timeout_ms` (Kafka's `TimeoutException`, REQUEST_TIMED_OUT). As with
    Kafka, the batch may still have been appended: the gateway answers later, or the answer was lost."""

    def __init__(self, message: str, *, request_id: str | None = None, topic: str | None = None,
                 partition: int | None = None) -> None:
        super().__init__(7, "REQUEST_TIMED_OUT", message, request_id=request_id, topic=topic, partition=partition)

    @property
    def exception_name(self) -> str:
        return "TimeoutException"


class RecordTooLargeError(GatewayError):
    """A record bigger than `max_request_size`, refused before sending (Kafka's client-side check)."""

    def __init__(self, message: str, *, topic: str | None = None, partition: int | None = None) -> None:
        super().__init__(10, "MESSAGE_TOO_LARGE", message, topic=topic, partition=partition)

    @property
    def exception_name(self) -> str:
        return "RecordTooLargeException"


class TransportError(GatewayError):
    """The ingress produce itself failed (Kafka broker unreachable, ingress topic missing, ...)."""

    def __init__(self, message: str, *, kafka_error_name: str = "UNKNOWN_SERVER_ERROR", kafka_error_code: int = -1,
                 request_id: str | None = None, topic: str | None = None, partition: int | None = None) -> None:
        super().__init__(kafka_error_code, kafka_error_name, message, request_id=request_id, topic=topic,
                         partition=partition)


def error_for_record(response: dict, batch_index: int) -> GatewayError:
    """The exception for record `batch_index` of a batch the gateway answered with an error."""
    code = int(response["error_code"])
    name = response.get("error_name")
    if not name:
        try:
            name = Errors.for_code(code).name
        except KeyError:
            name = f"UNKNOWN_ERROR_{code}"
    batch_message = response.get("error_message")
    if batch_message is None:
        try:
            batch_message = Errors.for_code(code).default_message or name
        except KeyError:
            batch_message = name
    record_errors = tuple(RecordError(int(e["batch_index"]), e.get("message")) for e in response.get("record_errors") or ())
    own = next((e for e in record_errors if e.batch_index == batch_index), None)
    if own is not None:
        message = own.message if own.message is not None else batch_message
    elif record_errors:
        message = PART_OF_INVALID_BATCH
    else:
        message = batch_message
    return GatewayError(
        code, name, message, record_errors, batch_message=batch_message, record_error=own,
        request_id=response.get("request_id"), topic=response.get("topic"), partition=response.get("partition"),
    )
