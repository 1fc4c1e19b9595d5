"""How large things may be on their way through the gateway, defined once (large requests end to end).

The rule: **the ingress hop, and everything behind it, carries the largest batch that can reach the
gateway** — a batch inside a request of `front_door_max_request_bytes` (Kafka's `socket.request.max.bytes`,
which bounds every request a broker reads), or one as large as the largest `max.message.bytes` of a
registry topic (what a producer writing straight to the ingress topic may send). So every batch the front
door accepts reaches the stage, and the stage — the partition leader — decides about its size as Kafka's
`LogValidator` does: over its topic's `max.message.bytes` it is `MESSAGE_TOO_LARGE` (10,
`RecordTooLargeException` at the client) and a dead letter holding the original bytes. Nothing on the
way refuses a batch for its size before the leader has seen it.

Everything that sizes the way follows from the two inputs (`IngressLimits`): the ingress topic's
`max.message.bytes` and the front door's ingress producer's `message.max.bytes`; the dead-letter topic,
the response topic and the sink's producer (a dead letter is the batch plus its `gw.errors.*` headers);
the Spark Kafka source's fetch sizes; and the local broker's `socket.request.max.bytes` /
`message.max.bytes` / `replica.fetch.max.bytes`. These are limits, not allocations: raising them costs
no memory until a message that large arrives.

On a cluster the gateway does not own (an existing ingress topic it may not reconfigure, brokers with
Kafka's default `socket.request.max.bytes`), the hop may carry less: `batch_bytes_through` says how
much, and the front door answers a batch above that with MESSAGE_TOO_LARGE itself (non-retriable, the
batch could never get through) and logs why, rather than a retriable error forever.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's defaults (reference Appendix A): socket.request.max.bytes, max.message.bytes (message.max.bytes
# on a broker), and a consumer's fetch.max.bytes.
KAFKA_SOCKET_REQUEST_MAX_BYTES = 104_857_600
KAFKA_MAX_MESSAGE_BYTES = 1_048_588
KAFKA_FETCH_MAX_BYTES = 52_428_800
# librdkafka's message.max.bytes accepts 1000 .. 1000000000 (CONFIGURATION.md); every producer of the
# gateway's own topics is a librdkafka one.
LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES = 1_000_000_000

# An ingress message around its batch (docs/design.md: ingress topic): Kafka's record batch header (61 B,
# DefaultRecordBatch.RECORD_BATCH_OVERHEAD) and one record's framing (at most 21 B,
# DefaultRecord.MAX_RECORD_OVERHEAD), the key `<topic>/<partition>` and the gw.* headers: a topic name
# (at most 249 B, twice), the request id and the client id — at most 32 767 B, an INT16 string in
# Kafka's request header. About 34 KiB at most; 64 KiB leaves room.
INGRESS_ENVELOPE_BYTES = 65_536
# A dead letter's gw.errors.* headers beside the original batch (docs/design.md: dead-letter topic): names, ids and error texts
# take a few KiB (a client id up to 32 KiB), and `record.errors` at most RECORD_ERRORS_MAX_BYTES.
DEAD_LETTER_HEADERS_BYTES = 1_048_576
# The record errors (KIP-467) a dead letter's `record.errors` header and a produce response's `record_errors`
# carry: at most this many bytes of their JSON, the first ones in batch order (`contract.record_errors`). A
# batch may hold millions of bad records (one INVALID_TIMESTAMP record error each, ~170 B of JSON) while the
# dead-letter and response topics take a message of at most `dead_letter_message_bytes`: a message over it is
# refused by librdkafka (MSG_SIZE_TOO_LARGE), the task fails and the micro-batch is retried forever. Kafka's
# own ProduceResponse carries every record error (it has no such limit on a response); the gateway does not.
# The rest of the gw.errors.* headers repeat the ingress envelope's ids and names (at most
# INGRESS_ENVELOPE_BYTES) beside a code, a name, a window and a message that shows at most three record
# errors: another INGRESS_ENVELOPE_BYTES leaves room for them. 896 KiB: some 5 000-6 000 timestamp record errors.
# The response's Avro encoding of a list is never longer than its JSON, so the same bound holds for it.
RECORD_ERRORS_MAX_BYTES = DEAD_LETTER_HEADERS_BYTES - 2 * INGRESS_ENVELOPE_BYTES
# A ProduceRequest around one message batch: request header (client id), transactional id, topic name,
# partition index and lengths. Kafka counts the whole request against socket.request.max.bytes.
PRODUCE_REQUEST_OVERHEAD_BYTES = 65_536


@dataclass(frozen=True)
class IngressLimits:
    """Every size limit of the gateway's own hops, derived from the two things that bound a batch."""

    # front_door_max_request_bytes: Kafka's socket.request.max.bytes for the front door's requests
    max_request_bytes: int = KAFKA_SOCKET_REQUEST_MAX_BYTES
    # the largest max.message.bytes of the registry's topics (TopicRegistry.largest_max_message_bytes)
    largest_topic_message_bytes: int = KAFKA_MAX_MESSAGE_BYTES

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1:
            raise ValueError(f"front_door_max_request_bytes must be at least 1, not {self.max_request_bytes}")
        if self.largest_topic_message_bytes < 0:
            raise ValueError(f"max.message.bytes must be at least 0, not {self.largest_topic_message_bytes}")
        if self.dead_letter_message_bytes > LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES:
            raise ValueError(
                f"batches of up to {self.batch_bytes} bytes (front_door_max_request_bytes="
                f"{self.max_request_bytes}, largest topic max.message.bytes={self.largest_topic_message_bytes}) "
                f"need ingress messages and dead letters larger than librdkafka's largest message.max.bytes "
                f"({LIBRDKAFKA_MAX_MESSAGE_MAX_BYTES}); lower them")

    @property
    def batch_bytes(self) -> int:
        """The largest batch that can reach the gateway: one inside a request the front door reads (the
        request's size bounds it), or one a topic's max.message.bytes allows (a producer writing straight
        to the ingress topic)."""
        return max(self.max_request_bytes, self.largest_topic_message_bytes)

    @property
    def ingress_message_bytes(self) -> int:
        """The ingress topic's max.message.bytes and its producers' message.max.bytes (the front door's,
        `GatewayProducer`'s): the largest batch in its envelope. Also the Spark source's
        max.partition.fetch.bytes, so one fetch carries a whole largest message (since KIP-74 a larger
        first batch would still be returned; this only keeps such a fetch from being cut to one message)."""
        return self.batch_bytes + INGRESS_ENVELOPE_BYTES

    @property
    def dead_letter_message_bytes(self) -> int:
        """The dead-letter topic's max.message.bytes and the sink's producer's message.max.bytes: the
        largest ingress message's batch with its gw.errors.* headers. The response topic gets the same:
        a response carries the same record errors."""
        return self.ingress_message_bytes + DEAD_LETTER_HEADERS_BYTES

    @property
    def fetch_max_bytes(self) -> int:
        """The Spark source's fetch.max.bytes: at least Kafka's default, and a largest message."""
        return max(self.ingress_message_bytes, KAFKA_FETCH_MAX_BYTES)

    @property
    def broker_request_bytes(self) -> int:
        """socket.request.max.bytes a broker needs to take the largest dead letter in a produce request
        (the local broker is started with it)."""
        return self.dead_letter_message_bytes + PRODUCE_REQUEST_OVERHEAD_BYTES

    def broker_properties(self) -> dict[str, str]:
        """The settings of a broker that carries the gateway's topics: requests as large as its largest
        produce, and, as the default of topics created without one (Kafka's message.max.bytes), a
        dead letter's size. replica.fetch.max.bytes follows message.max.bytes, as Kafka's documentation
        asks (no longer a hard limit since KIP-74, but a follower then fetches a largest batch at once)."""
        return {
            "socket.request.max.bytes": str(self.broker_request_bytes),
            "message.max.bytes": str(self.dead_letter_message_bytes),
            "replica.fetch.max.bytes": str(self.dead_letter_message_bytes),
        }


def batch_bytes_through(producer_message_bytes: int, topic_max_message_bytes: int | None,
                        broker_request_bytes: int | None) -> int:
    """The largest batch the ingress hop carries on an actual cluster: bounded by the producer's
    message.max.bytes (`IngressLimits.ingress_message_bytes`), the ingress topic's max.message.bytes and the
    brokers' socket.request.max.bytes (None: not known, taken as what the gateway asked for)."""
    message = producer_message_bytes
    if topic_max_message_bytes is not None:
        message = min(message, topic_max_message_bytes)
    if broker_request_bytes is not None:
        message = min(message, broker_request_bytes - PRODUCE_REQUEST_OVERHEAD_BYTES)
    return max(0, message - INGRESS_ENVELOPE_BYTES)
