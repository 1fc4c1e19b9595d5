"""Publishing to Kafka from Spark tasks: one confluent-kafka producer per worker process, and a
publish that fails loudly — a delivery error fails the micro-batch, which Spark retries."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer

KAFKA_CLIENT_LOG = logging.getLogger("gateway.kafka_client")

_producers: dict[tuple[str, int], Producer] = {}


@dataclass(frozen=True)
class OutgoingMessage:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None
    timestamp_ms: int | None = None


DEFAULT_PUBLISH_TIMEOUT_MS = 120_000


def producer(bootstrap_servers: str, max_message_bytes: int, timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS) -> Producer:
    key = (bootstrap_servers, max_message_bytes, timeout_ms)
    if key not in _producers:
        _producers[key] = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "enable.idempotence": True,  # retries inside librdkafka never duplicate
                "acks": "all",
                "linger.ms": 1,  # a task flushes right after producing: lingering only delays it
                "message.max.bytes": max_message_bytes,
                "compression.type": "lz4",
                # a message not acknowledged in time fails the task (and, after the task retries, the
                # query, which the supervisor restarts): no response waits on a broker forever
                "message.timeout.ms": timeout_ms,
                "logger": KAFKA_CLIENT_LOG,  # librdkafka's own lines through logging, not bare on stderr
            }
        )
    return _producers[key]


def publish_all(
    bootstrap_servers: str, max_message_bytes: int, batches: Iterable[tuple[str, Iterable[OutgoingMessage]]],
    timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS,
) -> list[int]:
    """Send every (topic, messages) pair, then wait once for every delivery report; raise on the first
    failure. One flush for responses and dead letters together: the task waits one round trip."""
    p = producer(bootstrap_servers, max_message_bytes, timeout_ms)
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    counts = []
    topics = []
    for topic, messages in batches:
        topics.append(topic)
        sent = 0
        for m in messages:
            kwargs = {"headers": m.headers} if m.headers else {}
            if m.timestamp_ms is not None:
                kwargs["timestamp"] = m.timestamp_ms
            while True:
                try:
                    p.produce(topic, key=m.key, value=m.value, on_delivery=on_delivery, **kwargs)
                    break
                except BufferError:
                    p.poll(0.1)  # local queue full: serve delivery reports, then retry
            sent += 1
        counts.append(sent)
    if not any(counts):
        return counts
    remaining = p.flush(timeout_ms / 1000 + 5)
    if remaining:
        raise KafkaException(f"{remaining} messages to {', '.join(topics)} not delivered within {timeout_ms} ms")
    if errors:
        raise KafkaException(f"{len(errors)} deliveries to {', '.join(topics)} failed, first: {errors[0]}")
    return counts
