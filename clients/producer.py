"""`GatewayProducer`: a Kafka-producer-like client of the ingest gateway (DESIGN §4.1, §4.3).

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
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from clients.errors import (
    GatewayError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TransportError,
    error_for_record,
)
from contract.ingress import ingress_headers, ingress_key
from contract.topics import DEFAULT_INGRESS_TOPIC, DEFAULT_RESPONSE_TOPIC
from sinks.responses import decode_response
from validators.compression import CompressionType
from validators.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TimestampType,
    build_record_batch,
)
from validators.records import Record, encode_record

log = logging.getLogger("gateway.clients.producer")

Header = tuple[str, bytes | None]
Callback = Callable[["RecordMetadata", "GatewayError | None"], None]

NO_TIMESTAMP = -1
_INT_MAX = (1 << 31) - 1
_SHORT_MAX = (1 << 15) - 1


# ================================================================================ configuration


@dataclass(frozen=True)
class ProducerConfig:
    bootstrap_servers: str
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
    ingress_message_max_bytes: int = 16 * 1024 * 1024 + 65536

    @property
    def acks_value(self) -> int:
        return -1 if str(self.acks) in ("all", "-1") else int(self.acks)

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType.for_name(self.compression)


# ================================================================================ partitioner


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """`BuiltInPartitioner.partitionForKey`: toPositive(murmur2(key)) % numPartitions."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# ================================================================================ results


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


# ================================================================================ accumulator (pure)


@dataclass(frozen=True)
class PendingRecord:
    """One `send()`: its future, callback, and what its RecordMetadata needs."""

    future: Future
    callback: Callback | None
    create_time: int
    key_size: int
    value_size: int


@dataclass
class _OpenBatch:
    topic: str
    partition: int
    created_ms: int
    records: list[tuple[int, bytes | None, bytes | None, tuple[Header, ...]]] = field(default_factory=list)
    pending: list[PendingRecord] = field(default_factory=list)
    size: int = RECORD_BATCH_OVERHEAD


@dataclass(frozen=True)
class ProducerBatch:
    """A closed batch, built: the ingress message value and the records it completes."""

    topic: str
    partition: int
    request_id: str
    value: bytes
    records: tuple[PendingRecord, ...]
    created_ms: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def key(self) -> bytes:
        return ingress_key(self.topic, self.partition)


class IdempotenceState:
    """Producer id, epoch and the next sequence number per partition (Kafka's TransactionManager for a
    non-transactional idempotent producer, without the broker-side InitProducerId)."""

    def __init__(self, producer_id: int, epoch: int = 0) -> None:
        if producer_id < 0:
            raise ValueError(f"producer id must be >= 0, got {producer_id}")
        self.producer_id = producer_id
        self.epoch = epoch
        self._next: dict[tuple[str, int], int] = {}

    def take(self, topic: str, partition: int, count: int) -> tuple[int, int]:
        """(epoch, base sequence) for the next batch of `count` records of the partition."""
        tp = (topic, partition)
        base = self._next.get(tp, 0)
        nxt = base + count
        self._next[tp] = nxt - _INT_MAX - 1 if nxt > _INT_MAX else nxt  # DefaultRecordBatch.incrementSequence
        return self.epoch, base

    def next_sequence(self, topic: str, partition: int) -> int:
        return self._next.get((topic, partition), 0)

    def on_rejected(self, batch: ProducerBatch, error_name: str | None = None) -> None:
        """A batch the gateway did not append. When it is the partition's latest, its sequence numbers are
        given back (no gap); otherwise later batches already carry higher numbers: bump the epoch, which
        restarts every partition at sequence 0. A sequence error, or a batch whose fate is unknown (expired),
        always bumps the epoch (Kafka's TransactionManager does the same for an idempotent producer)."""
        if batch.producer_epoch != self.epoch:
            return  # an earlier epoch: already recovered
        if error_name in ("OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "REQUEST_TIMED_OUT"):
            self.bump_epoch()
            return
        tp = (batch.topic, batch.partition)
        end = batch.base_sequence + batch.record_count
        end = end - _INT_MAX - 1 if end > _INT_MAX else end
        if self._next.get(tp) == end:
            self._next[tp] = batch.base_sequence
        else:
            self.bump_epoch()

    def bump_epoch(self) -> None:
        if self.epoch >= _SHORT_MAX:
            self.producer_id = random_producer_id()
            self.epoch = 0
        else:
            self.epoch += 1
        self._next.clear()


def random_producer_id() -> int:
    return secrets.randbelow(1 << 62) + 1


def record_size(index: int, timestamp: int, base_timestamp: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header]) -> int:
    """Encoded size of one v2 record (DefaultRecord.sizeInBytes)."""
    return len(encode_record(Record(index, timestamp - base_timestamp, key, value, tuple(headers))))


class RecordAccumulator:
    """Records per target partition into batches; `drain` closes full or lingered batches and builds them.
    Pure: the clock is passed in; not thread-safe (the producer serialises calls)."""

    def __init__(self, batch_size: int, linger_ms: int, compression: CompressionType,
                 idempotence: IdempotenceState | None, request_ids: Callable[[], str]) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.compression = compression
        self.idempotence = idempotence
        self.request_ids = request_ids
        self._open: dict[tuple[str, int], _OpenBatch] = {}
        self._full: deque[_OpenBatch] = deque()

    def __len__(self) -> int:
        return sum(len(b.records) for b in self._open.values()) + sum(len(b.records) for b in self._full)

    def append(self, topic: str, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header], pending: PendingRecord, now_ms: int) -> bool:
        """Add a record; True when a batch is ready to send now (full)."""
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.records:
            size = record_size(len(batch.records), timestamp, batch.records[0][0], key, value, headers)
            if batch.size + size > self.batch_size:
                self._full.append(self._open.pop(tp))
                batch = None
        if batch is None:
            batch = self._open[tp] = _OpenBatch(topic, partition, now_ms)
        size = record_size(len(batch.records), timestamp, batch.records[0][0] if batch.records else timestamp,
                           key, value, headers)
        batch.records.append((timestamp, key, value, tuple(headers)))
        batch.pending.append(pending)
        batch.size += size
        if batch.size >= self.batch_size:
            self._full.append(self._open.pop(tp))
        return bool(self._full)

    def next_deadline_ms(self) -> int | None:
        """When the oldest open batch has lingered long enough (None: nothing open)."""
        if self._full:
            return 0
        if not self._open:
            return None
        return min(b.created_ms for b in self._open.values()) + self.linger_ms

    def drain(self, now_ms: int, force: bool = False) -> list[ProducerBatch]:
        """Full batches, and open ones whose linger has passed (all of them with `force`), built in
        creation order; sequence numbers are taken here, so they follow the send order."""
        closing = list(self._full)
        self._full.clear()
        for tp, b in list(self._open.items()):
            if force or now_ms - b.created_ms >= self.linger_ms:
                closing.append(self._open.pop(tp))
        closing.sort(key=lambda b: b.created_ms)
        return [self._build(b) for b in closing]

    def _build(self, b: _OpenBatch) -> ProducerBatch:
        pid, epoch, seq = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
        if self.idempotence is not None:
            pid = self.idempotence.producer_id
            epoch, seq = self.idempotence.take(b.topic, b.partition, len(b.records))
        value = build_record_batch(
            b.records, compression=self.compression, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        )
        return ProducerBatch(b.topic, b.partition, self.request_ids(), value, tuple(b.pending), b.created_ms,
                             pid, epoch, seq)


# ================================================================================ the producer


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
        self._kafka = Producer({
            "bootstrap.servers": config.bootstrap_servers,
            "enable.idempotence": True,  # the ingress hop itself never duplicates or reorders
            "acks": "all",
            "linger.ms": 0,
            "message.max.bytes": config.ingress_message_max_bytes,
            "message.timeout.ms": config.delivery_timeout_ms,  # the ingress hop counts against the same budget
            "client.id": config.client_id,
        })
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

        c = Consumer({
            "bootstrap.servers": self.config.bootstrap_servers,
            "group.id": f"{self.config.client_id}-responses-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        })
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
