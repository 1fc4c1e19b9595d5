"""Kafka's error codes for the produce path and the transaction coordinator (clients/.../protocol/Errors.java),
Kafka's `Errors`.

Codes, names and default texts are Kafka's own. `exception_name` is the Java exception class a
broker raises for the code (what Kafka logs and what `Errors.forException` maps back from).
"""

from __future__ import annotations

from enum import Enum


class Errors(Enum):
    """(code, default message, exception class) exactly as Kafka's `Errors` enum; `name` is Kafka's name."""

    NONE = (0, None, None)
    UNKNOWN_SERVER_ERROR = (
        -1,
        "The server experienced an unexpected error when processing the request.",
        "UnknownServerException",
    )
    CORRUPT_MESSAGE = (
        2,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt.",
        "CorruptRecordException",
    )
    UNKNOWN_TOPIC_OR_PARTITION = (
        3, "This server does not host this topic-partition.", "UnknownTopicOrPartitionException")
    NOT_LEADER_OR_FOLLOWER = (
        6,
        "For requests intended only for the leader, this error indicates that the broker is not the current "
        "leader. For requests intended for any replica, this error indicates that the broker is not a replica "
        "of the topic partition.",
        "NotLeaderOrFollowerException",
    )
    MESSAGE_TOO_LARGE = (
        10,
        "The request included a message larger than the max message size the server will accept.",
        "RecordTooLargeException",
    )
    NETWORK_EXCEPTION = (13, "The server disconnected before a response was received.", "NetworkException")
    COORDINATOR_LOAD_IN_PROGRESS = (
        14, "The coordinator is loading and hence can't process requests.", "CoordinatorLoadInProgressException")
    COORDINATOR_NOT_AVAILABLE = (
        15, "The coordinator is not available.", "CoordinatorNotAvailableException")
    NOT_COORDINATOR = (16, "This is not the correct coordinator.", "NotCoordinatorException")
    INVALID_TOPIC_EXCEPTION = (
        17, "The request attempted to perform an operation on an invalid topic.", "InvalidTopicException")
    RECORD_LIST_TOO_LARGE = (
        18,
        "The request included message batch larger than the configured segment size on the server.",
        "RecordBatchTooLargeException",
    )
    NOT_ENOUGH_REPLICAS = (
        19, "Messages are rejected since there are fewer in-sync replicas than required.",
        "NotEnoughReplicasException")
    INVALID_REQUIRED_ACKS = (
        21, "Produce request specified an invalid value for required acks.", "InvalidRequiredAcksException")
    CLUSTER_AUTHORIZATION_FAILED = (31, "Cluster authorization failed.", "ClusterAuthorizationException")
    INVALID_TIMESTAMP = (
        32, "The timestamp of the message is out of acceptable range.", "InvalidTimestampException")
    INVALID_REQUEST = (
        42,
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details.",
        "InvalidRequestException",
    )
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (
        43,
        "The message format version on the broker does not support the request.",
        "UnsupportedForMessageFormatException",
    )
    OUT_OF_ORDER_SEQUENCE_NUMBER = (
        45, "The broker received an out of order sequence number.", "OutOfOrderSequenceException")
    DUPLICATE_SEQUENCE_NUMBER = (
        46, "The broker received a duplicate sequence number.", "DuplicateSequenceException")
    INVALID_PRODUCER_EPOCH = (
        47, "Producer attempted to produce with an old epoch.", "InvalidProducerEpochException")
    INVALID_TXN_STATE = (
        48,
        "The producer attempted a transactional operation in an invalid state.",
        "InvalidTxnStateException",
    )
    INVALID_PRODUCER_ID_MAPPING = (
        49,
        "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
        "InvalidPidMappingException",
    )
    INVALID_TRANSACTION_TIMEOUT = (
        50,
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by "
        "transaction.max.timeout.ms).",
        "InvalidTxnTimeoutException",
    )
    CONCURRENT_TRANSACTIONS = (
        51,
        "The producer attempted to update a transaction while another concurrent operation on the same "
        "transaction was ongoing.",
        "ConcurrentTransactionsException",
    )
    TRANSACTION_COORDINATOR_FENCED = (
        52,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator "
        "for a given producer.",
        "TransactionCoordinatorFencedException",
    )
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (
        53, "Transactional Id authorization failed.", "TransactionalIdAuthorizationException")
    KAFKA_STORAGE_ERROR = (
        56, "Disk error when trying to access log file on the disk.", "KafkaStorageException")
    UNSUPPORTED_COMPRESSION_TYPE = (
        76,
        "The requesting client does not support the compression type of given partition.",
        "UnsupportedCompressionTypeException",
    )
    INVALID_RECORD = (
        87,
        "This record has failed the validation on broker and hence will be rejected.",
        "InvalidRecordException",
    )
    PRODUCER_FENCED = (
        90,
        "There is a newer producer with the same transactionalId which fences the current one.",
        "ProducerFencedException",
    )
    UNKNOWN_TOPIC_ID = (100, "This server does not host this topic ID.", "UnknownTopicIdException")
    TRANSACTIONAL_ID_NOT_FOUND = (105, "The transactionalId could not be found.", "TransactionalIdNotFoundException")
    TRANSACTION_ABORTABLE = (
        120,
        "The server encountered an error with the transaction. The client can abort the transaction to continue "
        "using this transactional ID.",
        "TransactionAbortableException",
    )

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def default_message(self) -> str | None:
        return self.value[1]

    @property
    def exception_name(self) -> str | None:
        return self.value[2]

    @classmethod
    def for_code(cls, code: int) -> Errors:
        """Kafka's `Errors.forCode` (but strict: an unknown code raises KeyError instead of UNKNOWN_SERVER_ERROR)."""
        try:
            return _BY_CODE[code]
        except KeyError:
            raise KeyError(code) from None

    @classmethod
    def for_name(cls, name: str) -> Errors:
        return cls[name]


_BY_CODE: dict[int, Errors] = {e.code: e for e in Errors}
