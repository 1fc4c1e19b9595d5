"""Publishing to Kafka from Spark tasks: one confluent-kafka producer per worker process, and a
publish that fails loudly — a delivery error fails the micro-batch, which Spark retries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, Producer

from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster

_producers: dict[tuple[KafkaCluster, int, int], Producer] = {}


class OutgoingMessage(NamedTuple):
    """One message to publish (a typed tuple: one per produce response, built per batch)."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None
    timestamp_ms: int | None = None


DEFAULT_PUBLISH_TIMEOUT_MS = 120_000


def producer(cluster: KafkaCluster, max_message_bytes: int, timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS) -> Producer:
    key = (cluster, max_message_bytes, timeout_ms)
    if key not in _producers:
        _producers[key] = Producer(cluster.client(
            {
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
        ))
    return _producers[key]


def connect(cluster: KafkaCluster, max_message_bytes: int, topics: Iterable[str],
            timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS, wait_s: float = 10.0) -> None:
    """This process's producer (`producer`) made and connected ahead of its first publication, its metadata of
    `topics` fetched: what a standby's warm-up does, so the first responses after a takeover are sent at once."""
    p = producer(cluster, max_message_bytes, timeout_ms)
    for topic in topics:
        p.list_topics(topic, timeout=wait_s)


class Publication:
    """One target partition's responses and dead letters of a micro-batch: sent after its commit (`send`),
    then one wait for every delivery report (`finish`), which raises on the first failure, so a micro-batch
    never commits with a response or dead letter undelivered."""

    def __init__(self, cluster: KafkaCluster, max_message_bytes: int,
                 timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS) -> None:
        self._producer = producer(cluster, max_message_bytes, timeout_ms)
        self._timeout_ms = timeout_ms
        self._errors: list[str] = []
        self._topics: set[str] = set()
        self.sent = 0

    def _on_delivery(self, err: object, _msg: object) -> None:
        if err is not None:
            self._errors.append(str(err))

    def send(self, topic: str, messages: Iterable[OutgoingMessage]) -> int:
        """Hand `messages` to the producer (not yet acknowledged); returns how many. Messages with neither
        headers nor a timestamp (the produce responses) go in one `produce_batch` call, which librdkafka
        partitions per message as `produce` does; the others one `produce` each."""
        plain: list[dict[str, bytes | None]] = []
        sent = 0
        for m in messages:
            if m.headers or m.timestamp_ms is not None:
                self._produce(topic, m)
            else:
                plain.append({"key": m.key, "value": m.value})
            sent += 1
        if plain:
            self._produce_batch(topic, plain)
        if sent:
            self._topics.add(topic)
        self.sent += sent
        return sent

    def _produce(self, topic: str, m: OutgoingMessage) -> None:
        kwargs = {"headers": m.headers} if m.headers else {}
        if m.timestamp_ms is not None:
            kwargs["timestamp"] = m.timestamp_ms
        while True:
            try:
                self._producer.produce(topic, key=m.key, value=m.value, on_delivery=self._on_delivery, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.1)  # local queue full: serve delivery reports, then retry

    def _produce_batch(self, topic: str, batch: list[dict[str, Any]]) -> None:
        while batch:
            queued = self._producer.produce_batch(topic, batch, on_delivery=self._on_delivery)
            if queued == len(batch):
                return
            # Refused messages carry `_error`; only a full local queue is worth waiting for.
            refused = [m for m in batch if "_error" in m]
            fatal = [m["_error"] for m in refused if m["_error"].code() != KafkaError._QUEUE_FULL]
            if fatal:
                raise KafkaException(fatal[0])
            self._producer.poll(0.1)  # serve delivery reports, then retry the refused
            for m in refused:
                del m["_error"]
            batch = refused

    def finish(self) -> None:
        """Wait for every message sent; raise if one was not delivered."""
        if not self.sent:
            return
        topics = ", ".join(sorted(self._topics))
        remaining = self._producer.flush(self._timeout_ms / 1000 + 5)
        if remaining:
            raise KafkaException(f"{remaining} messages to {topics} not delivered within {self._timeout_ms} ms")
        if self._errors:
            raise KafkaException(f"{len(self._errors)} deliveries to {topics} failed, first: {self._errors[0]}")
