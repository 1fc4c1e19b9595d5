"""`GatewayProducer`: a Kafka-producer-like client of the ingest gateway (docs/design.md: ingress topic; docs/design.md: response topic).

    producer = GatewayProducer(ProducerConfig(bootstrap_servers="127.0.0.1:9092", linger_ms=5))
    future = producer.send("orders", b"value", key=b"k", partition=0, callback=on_completion)
    producer.flush()
    metadata = future.result()        # RecordMetadata(topic, partition, offset, timestamp, ...)
    producer.close()

What it does, as Kafka's Java producer does for a broker:
- accumulates records per target partition into RecordBatch v2 (`linger_ms`, `batch_size`,
  `compression`: none/gzip/snappy/lz4/zstd); a record larger than `batch_size` gets a batch of its own;
  a record larger than `max_request_size` is refused at once (RecordTooLargeException's text);
- optional idempotence (`enable_idempotence`): producer id (configured or random), epoch and per-partition
  sequence numbers in the batch header; after a batch is rejected (nothing appended) the partition's
  sequence is rolled back, or — when later batches of the partition are already in flight — the epoch is
  bumped and sequences restart at 0 (KIP-360's recovery without a coordinator);
- sends each batch as one ingress message: key `<topic>/<partition>`, headers `gw.topic`, `gw.partition`,
  `gw.request.id` (unique per batch), `gw.client.id`, `gw.acks`;
- reads the response topic from its end offsets at start-up and completes each record's future and
  callback with Kafka's `RecordMetadata` semantics: offset = base offset + index; timestamp =
  `log_append_time_ms` if it is not -1, else the record's CreateTime (KIP-32); with acks=0 the offset is
  -1 and completion happens when the ingress message is written. Responses are at-least-once: a
  duplicate (same request id) is ignored. Callbacks of one partition fire in send order.
- errors: `clients.errors.GatewayError` with Kafka's error name, code, message and record errors;
  `KafkaTimeoutError` when no response arrives within `delivery_timeout_ms` (measured, as in Kafka,
  from the batch's creation). There are no automatic retries: a rejected batch is already in the
  gateway's dead-letter topic, where operators replay it (`dlq replay`).

Callbacks run on the producer's response thread (Kafka: the I/O thread): keep them short.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from clients.accumulator import (
    Header,
    IdempotenceState,
    PendingRecord,
    ProducerBatch,
    RecordAccumulator,
    random_producer_id,
    record_size,
)
from clients.errors import (
    GatewayError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TransportError,
    error_for_record,
)
from clients.partitioner import partition_for_key
from clients.record_metadata import Callback, RecordMetadata, error_metadata, metadata_from_response
from contract.ingress import ingress_headers
from contract.limits import IngressLimits
from contract.responses import decode_response
from contract.topics import DEFAULT_INGRESS_TOPIC, DEFAULT_RESPONSE_TOPIC
from kafka_cluster.security import PLAINTEXT, KafkaCluster, KafkaSecurity
from validators.codec.compression import CompressionType
from validators.codec.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    RECORD_BATCH_OVERHEAD,
    TimestampType,
)

log = logging.getLogger("gateway.clients.producer")


@dataclass(frozen=True)
class ProducerConfig:
    bootstrap_servers: str
    security: KafkaSecurity = PLAINTEXT  # TLS and SASL to the gateway's Kafka cluster (kafka_cluster/security.py)
    ingress_topic: str = DEFAULT_INGRESS_TOPIC
    response_topic: str = DEFAULT_RESPONSE_TOPIC
    client_id: str = "gateway-producer"
    acks: int | str = -1  # "all"/-1 or 1: a response per batch; 0: none (fire and forget)
    linger_ms: int = 5
    batch_size: int = 16384
    compression: str = "none"
    enable_idempotence: bool = False
    producer_id: int | None = None  # idempotence: default a random positive id (there is no coordinator)
    producer_epoch: int = 0
    delivery_timeout_ms: int = 120_000
    max_request_size: int = 1_048_576
    partitions: Mapping[str, int] = field(default_factory=dict)  # partition counts for keyed sends without a partition
    # the ingress hop's message.max.bytes: the default gateway's ingress topic limit (contract.limits)
    ingress_message_max_bytes: int = IngressLimits().ingress_message_bytes

    @property
    def cluster(self) -> KafkaCluster:
        return KafkaCluster(self.bootstrap_servers, self.security)

    @property
    def acks_value(self) -> int:
        return -1 if str(self.acks) in ("all", "-1") else int(self.acks)

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType.for_name(self.compression)


@dataclass
class _InFlight:
    batch: ProducerBatch
    deadline_ms: int
    response: Mapping[str, Any] | None = None
    error: GatewayError | None = None

    @property
    def done(self) -> bool:
        return self.response is not None or self.error is not None


def _now_ms() -> int:
    return int(time.time() * 1000)


class GatewayProducer:
    """Thread-safe: `send` from any thread. Two background threads: the sender (linger, ingress produce)
    and the response reader (completions, delivery timeouts)."""

    def __init__(self, config: ProducerConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = ProducerConfig(**overrides)
        elif overrides:
            config = replace(config, **overrides)
        self.config = config
        if config.acks_value not in (-1, 0, 1):
            raise ValueError(f"acks must be all/-1, 0 or 1, got {config.acks}")
        from confluent_kafka import Producer

        self._idempotence = None
        if config.enable_idempotence:
            self._idempotence = IdempotenceState(
                config.producer_id if config.producer_id is not None else random_producer_id(), config.producer_epoch
            )
        instance = uuid.uuid4().hex[:12]
        counter = itertools.count()
        self._accumulator = RecordAccumulator(
            config.batch_size, config.linger_ms, config.compression_type, self._idempotence,
            lambda: f"{config.client_id}-{instance}-{next(counter)}",
        )
        self._cond = threading.Condition()
        self._in_flight: dict[str, _InFlight] = {}
        self._by_partition: dict[tuple[str, int], deque[_InFlight]] = {}
        self._incomplete = 0  # records sent to `send` and not completed
        self._flush_requested = 0
        self._closed = False
        self._sticky: dict[str, int] = {}
        self._kafka = Producer(config.cluster.client({
            "enable.idempotence": True,  # the ingress hop itself never duplicates or reorders
            "acks": "all",
            "linger.ms": 0,
            "message.max.bytes": config.ingress_message_max_bytes,
            "message.timeout.ms": config.delivery_timeout_ms,  # the ingress hop counts against the same budget
            "client.id": config.client_id,
        }))
        self._consumer = self._response_consumer() if config.acks_value != 0 else None
        self._sender = threading.Thread(target=self._send_loop, name=f"{config.client_id}-sender", daemon=True)
        self._reader = threading.Thread(target=self._response_loop, name=f"{config.client_id}-responses", daemon=True)
        self._sender.start()
        self._reader.start()

    # ---------------------------------------------------------------- public API

    @property
    def producer_id(self) -> int:
        return self._idempotence.producer_id if self._idempotence else NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return self._idempotence.epoch if self._idempotence else NO_PRODUCER_EPOCH

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
        callback: Callback | None = None,
    ) -> Future:
        """Queue one record; the future resolves to its RecordMetadata or raises GatewayError."""
        if timestamp_ms is not None and timestamp_ms < 0:
            raise ValueError(f"Invalid timestamp: {timestamp_ms}. Timestamp should always be non-negative or null.")
        if partition is not None and partition < 0:
            raise ValueError(f"Invalid partition given with record: {partition} is not in the range [0...).")
        headers = tuple(headers or ())
        now = _now_ms()
        create_time = now if timestamp_ms is None else timestamp_ms
        future: Future = Future()
        future.set_running_or_notify_cancel()
        pending = PendingRecord(future, callback, create_time, -1 if key is None else len(key),
                                -1 if value is None else len(value))
        with self._cond:
            if self._closed:
                raise RuntimeError("Cannot perform operation after producer has been closed")
            partition = self._partition(topic, key, partition)
            size = RECORD_BATCH_OVERHEAD + record_size(0, create_time, create_time, key, value, headers)
            self._incomplete += 1
            if size > self.config.max_request_size:
                self._complete(pending, topic, partition, 0, None, RecordTooLargeError(
                    f"The message is {size} bytes when serialized which is larger than {self.config.max_request_size},"
                    " which is the value of the max.request.size configuration.", topic=topic, partition=partition))
                return future
            self._accumulator.append(topic, partition, create_time, key, value, headers, pending, now)
            self._cond.notify_all()
        return future

    def flush(self, timeout_s: float | None = None) -> int:
        """Send everything buffered and wait until every record sent so far is complete; returns how many
        are still incomplete (0 unless the timeout passed)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            self._flush_requested += 1
            self._cond.notify_all()
            try:
                while self._incomplete > 0:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._cond.wait(remaining if remaining is not None else 1.0)
            finally:
                self._flush_requested -= 1
            return self._incomplete

    def close(self, timeout_s: float | None = 60.0) -> None:
        """Flush (bounded), stop the threads; records still incomplete fail ("Producer is closed forcefully.")."""
        with self._cond:
            if self._closed:
                return
        self.flush(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sender.join(10)
        self._reader.join(10)
        with self._cond:
            leftovers = list(self._in_flight.values())
            self._in_flight.clear()
            self._by_partition.clear()
            for batch in self._accumulator.drain(_now_ms(), force=True):
                leftovers.append(_InFlight(batch, 0))
            for f in leftovers:
                for i, p in enumerate(f.batch.records):
                    self._complete(p, f.batch.topic, f.batch.partition, i, None, TransportError(
                        "Producer is closed forcefully.", request_id=f.batch.request_id, topic=f.batch.topic,
                        partition=f.batch.partition))
        self._kafka.flush(5)
        if self._consumer is not None:
            self._consumer.close()

    def __enter__(self) -> GatewayProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- internals

    def _partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        if partition is not None:
            return partition
        count = self.config.partitions.get(topic)
        if count is None:
            raise ValueError(
                f"no partition given for topic {topic} and its partition count is unknown: "
                "pass partition= or ProducerConfig.partitions"
            )
        if key is not None:
            return partition_for_key(key, count)
        if topic not in self._sticky:  # sticky partitioner for keyless records: change when a batch closes
            self._sticky[topic] = random.randrange(count)
        return self._sticky[topic]

    def _response_consumer(self) -> Any:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(self.config.cluster.client({
            "group.id": self.config.cluster.group_id(f"{self.config.client_id}-responses"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        }))
        topic = self.config.response_topic
        meta = c.list_topics(topic, timeout=30)
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            c.close()
            raise ValueError(f"response topic {topic} does not exist")
        # from the end as it is now: responses to this producer's batches all come later
        starts = []
        for p in sorted(tmeta.partitions):
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            starts.append(TopicPartition(topic, p, hi))
        c.assign(starts)
        return c

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = _now_ms()
                    force = self._flush_requested > 0 or self._closed
                    batches = self._accumulator.drain(now, force=force)
                    if batches or self._closed:
                        break
                    deadline = self._accumulator.next_deadline_ms()
                    wait_s = 0.1 if deadline is None else max(0.0, min(0.1, (deadline - now) / 1000))
                    self._cond.wait(wait_s)
                    self._kafka.poll(0)
                if self.config.partitions:
                    for b in batches:  # sticky partition moves on once its batch closed
                        if self._sticky.get(b.topic) == b.partition:
                            self._sticky.pop(b.topic, None)
                for b in batches:
                    if self.config.acks_value != 0:
                        f = _InFlight(b, b.created_ms + self.config.delivery_timeout_ms)
                        self._in_flight[b.request_id] = f
                        self._by_partition.setdefault((b.topic, b.partition), deque()).append(f)
                closed = self._closed
            for b in batches:
                self._produce(b)
            self._kafka.poll(0)
            if closed and not batches:
                return

    def _produce(self, b: ProducerBatch) -> None:
        c = self.config
        headers = ingress_headers(b.topic, b.partition, b.request_id, client_id=c.client_id, acks=c.acks_value)

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self._fail_batch(b, TransportError(
                    f"ingress produce to {c.ingress_topic} failed: {err.str()}", kafka_error_name=err.name(),
                    kafka_error_code=err.code(), request_id=b.request_id, topic=b.topic, partition=b.partition))
            elif c.acks_value == 0:
                with self._cond:
                    for i, p in enumerate(b.records):
                        md = RecordMetadata(b.topic, b.partition, -1, p.create_time, TimestampType.CREATE_TIME,
                                            p.key_size, p.value_size, -1, b.request_id, i)
                        self._complete(p, b.topic, b.partition, i, md, None)

        while True:
            try:
                self._kafka.produce(c.ingress_topic, key=b.key, value=b.value, headers=headers, on_delivery=delivered)
                return
            except BufferError:
                self._kafka.poll(0.05)  # librdkafka's queue is full: serve delivery reports first

    def _fail_batch(self, b: ProducerBatch, error: GatewayError) -> None:
        with self._cond:
            f = self._in_flight.get(b.request_id)
            if f is None:
                if self.config.acks_value == 0:
                    for i, p in enumerate(b.records):
                        self._complete(p, b.topic, b.partition, i, None, error)
                return
            if not f.done:
                f.error = error
            self._release((b.topic, b.partition))

    def _response_loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
            if self._consumer is None:
                with self._cond:
                    self._cond.wait(0.2)
                continue
            # poll returns on the first message; consume() would wait for all 500 until its timeout
            first = self._consumer.poll(0.1)
            messages = [] if first is None else [first, *self._consumer.consume(num_messages=499, timeout=0)]
            with self._cond:
                for m in messages:
                    if m.error() is not None:
                        log.warning("response topic: %s", m.error())
                        continue
                    self._on_response(m.value())
                self._expire(_now_ms())

    def _on_response(self, value: bytes | None) -> None:
        if value is None:
            return
        try:
            response = decode_response(value)
        except Exception as e:  # noqa: BLE001 — foreign message on the response topic
            log.warning("undecodable response skipped: %s", e)
            return
        f = self._in_flight.get(response["request_id"])
        if f is None or f.done:
            return  # another producer's, a duplicate (at-least-once), or after a timeout
        f.response = response
        if int(response["error_code"]) != 0 and self._idempotence is not None:
            self._idempotence.on_rejected(f.batch, response.get("error_name"))
        self._release((f.batch.topic, f.batch.partition))

    def _expire(self, now_ms: int) -> None:
        for f in list(self._in_flight.values()):
            if not f.done and now_ms >= f.deadline_ms:
                b = f.batch
                f.error = KafkaTimeoutError(
                    f"Expiring {b.record_count} record(s) for {b.topic}-{b.partition}:"
                    f"{now_ms - b.created_ms} ms has passed since batch creation",
                    request_id=b.request_id, topic=b.topic, partition=b.partition)
                if self._idempotence is not None:
                    self._idempotence.on_rejected(b, f.error.error_name)  # maybe appended: never reuse its numbers
                self._release((b.topic, b.partition))

    def _release(self, tp: tuple[str, int]) -> None:
        """Complete the partition's finished batches in send order (Kafka's per-partition callback order)."""
        queue = self._by_partition.get(tp)
        while queue and queue[0].done:
            f = queue.popleft()
            self._in_flight.pop(f.batch.request_id, None)
            b = f.batch
            for i, p in enumerate(b.records):
                if f.error is not None:
                    self._complete(p, b.topic, b.partition, i, None, f.error)
                elif int(f.response["error_code"]) != 0:
                    self._complete(p, b.topic, b.partition, i, None, error_for_record(f.response, i))
                else:
                    md = metadata_from_response(f.response, i, p.create_time, p.key_size, p.value_size,
                                                b.topic, b.partition)
                    self._complete(p, b.topic, b.partition, i, md, None)
        if queue is not None and not queue:
            self._by_partition.pop(tp, None)

    def _complete(self, p: PendingRecord, topic: str, partition: int, index: int,
                  metadata: RecordMetadata | None, error: GatewayError | None) -> None:
        """Called with the lock held. The future first, then the callback (as Kafka's ProducerBatch.done)."""
        if p.future.done():
            return
        if error is not None:
            p.future.set_exception(error)
            metadata = error_metadata(topic, partition, index, error.request_id)
        else:
            p.future.set_result(metadata)
        if p.callback is not None:
            try:
                p.callback(metadata, error)
            except Exception:  # noqa: BLE001 — a user callback must not kill the I/O thread
                log.exception("producer callback raised")
        self._incomplete -= 1
        self._cond.notify_all()
