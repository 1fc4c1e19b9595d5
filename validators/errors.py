"""Kafka's error codes for the produce path (clients/.../protocol/Errors.java)."""

from __future__ import annotations

from enum import Enum


class Errors(Enum):
    """(code, default message) exactly as Kafka's `Errors` enum; `name` is Kafka's error name."""

    NONE = (0, None)
    UNKNOWN_SERVER_ERROR = (-1, "The server experienced an unexpected error when processing the request.")
    CORRUPT_MESSAGE = (
        2,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt.",
    )
    UNKNOWN_TOPIC_OR_PARTITION = (3, "This server does not host this topic-partition.")
    MESSAGE_TOO_LARGE = (10, "The request included a message larger than the max message size the server will accept.")
    INVALID_TOPIC_EXCEPTION = (17, "The request attempted to perform an operation on an invalid topic.")
    RECORD_LIST_TOO_LARGE = (18, "The request included message batch larger than the configured segment size on the server.")
    INVALID_TIMESTAMP = (32, "The timestamp of the message is out of acceptable range.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, "The message format version on the broker does not support the request.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, "The broker received an out of order sequence number.")
    INVALID_PRODUCER_EPOCH = (47, "Producer attempted to produce with an old epoch.")
    INVALID_RECORD = (87, "This record has failed the validation on broker and hence will be rejected.")

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def default_message(self) -> str | None:
        return self.value[1]

    @classmethod
    def for_code(cls, code: int) -> Errors:
        for e in cls:
            if e.code == code:
                return e
        raise KeyError(code)
