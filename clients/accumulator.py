"""The producer's record accumulator (pure): records gathered into batches per partition up to `batch.size`,
with the idempotent producer's sequence numbers (Kafka's `RecordAccumulator`, `TransactionManager`).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from clients.record_metadata import Callback
from contract.ingress import ingress_key
from validators.codec.compression import CompressionType
from validators.codec.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    build_record_batch,
)
from validators.codec.records import Record, encode_record

Header = tuple[str, bytes | None]
INT_MAX = (1 << 31) - 1
SHORT_MAX = (1 << 15) - 1


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
        self._next[tp] = nxt - INT_MAX - 1 if nxt > INT_MAX else nxt  # DefaultRecordBatch.incrementSequence
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
        end = end - INT_MAX - 1 if end > INT_MAX else end
        if self._next.get(tp) == end:
            self._next[tp] = batch.base_sequence
        else:
            self.bump_epoch()

    def bump_epoch(self) -> None:
        if self.epoch >= SHORT_MAX:
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
