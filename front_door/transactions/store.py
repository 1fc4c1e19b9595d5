"""Where transactions last: a compacted topic on the gateway's Kafka cluster (`transaction_state_topic`), as Kafka
keeps `__transaction_state`, in Kafka's own record layout (`contract/transaction_records.py`): one record per
transactional id per change, keyed by the id, so compaction keeps each id's last state.

Every front door loads it at start and follows it: whichever door coordinates an id (`coordinator.py`) has its
state, also after the door that coordinated it died. A write returns once the cluster has it (acks=all) and
this door's view holds it; a delete is a tombstone (`transactional.id.expiration.ms`).

Each change this door sees, its own writes and the followed ones in the topic's order, reaches its `view`
(`view.py`) on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from contract.topics import TRANSACTION_STATE_TOPIC_CONFIGS, TRANSACTION_STATE_TOPIC_PARTITIONS
from contract.transaction_records import (
    TransactionKey,
    TransactionLogValue,
    TransactionRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from contract.transaction_version import TransactionVersion
from front_door.transactions.view import TransactionView
from kafka_cluster.admin import create_topics, watermarks
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from validators.transaction_state import TransactionMetadata, TransactionState

log = logging.getLogger("gateway.front_door.transactions")
POLL_S = 0.2
FOLLOW_FETCH_WAIT_MS = 50


class TransactionStoreError(RuntimeError):
    """The transaction state topic cannot be read or written."""


def to_record(meta: TransactionMetadata) -> TransactionLogValue:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TransactionLogValue(
        producer_id=meta.producer_id, previous_producer_id=meta.last_producer_id, next_producer_id=meta.next_producer_id,
        producer_epoch=meta.producer_epoch, transaction_timeout_ms=meta.timeout_ms,
        transaction_status=int(meta.state), partitions=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
        last_update_ms=meta.last_update_ms, start_ms=meta.start_ms,
        client_transaction_version=int(meta.client_transaction_version))


def from_record(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """Kafka's `TransactionLog.readTxnRecordValue`: the last producer epoch is not stored (it is kept in memory
    for a retried InitProducerId, and lost on a coordinator move, as in Kafka)."""
    return TransactionMetadata(
        transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
        TransactionState(value.transaction_status),
        frozenset((t, p) for t, ps in value.partitions for p in ps), value.start_ms, value.last_update_ms,
        value.previous_producer_id, client_transaction_version=TransactionVersion.of_level(value.client_transaction_version),
        next_producer_id=value.next_producer_id)



class KafkaTransactionStore:
    """The transactional ids' last states, loaded (`load`) and followed (`start`); `write` and `delete` change
    them through the topic."""

    def __init__(self, cluster: KafkaCluster, topic: str, *, timeout_ms: int = 30_000) -> None:
        self.cluster, self.topic, self._timeout_ms = cluster, topic, timeout_ms
        self.states: dict[str, TransactionMetadata] = {}
        self._position = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._written: dict[str, int] = {}  # this door's last write of an id: the follower never goes back past it
        self.view = TransactionView()  # the loop's copy, its listeners and the completed transactions' outcomes
        self._loop: asyncio.AbstractEventLoop | None = None

    def _consumer(self, purpose: str) -> Any:
        return Consumer(self.cluster.client({
            "group.id": self.cluster.group_id(purpose), "enable.auto.commit": False,
            "allow.auto.create.topics": False, "enable.partition.eof": False, "logger": KAFKA_CLIENT_LOG,
            "fetch.wait.max.ms": FOLLOW_FETCH_WAIT_MS}))

    def ensure_topic(self) -> None:
        """The topic created if it does not exist (compacted, one partition: one order of changes)."""
        try:
            create_topics(self.cluster, [(self.topic, TRANSACTION_STATE_TOPIC_PARTITIONS,
                                          TRANSACTION_STATE_TOPIC_CONFIGS)], timeout=self._timeout_ms / 1000)
        except (KafkaException, TimeoutError, RuntimeError) as e:
            raise TransactionStoreError(f"transaction state topic {self.topic}: {e}") from None

    def load(self) -> None:
        """Every record the topic holds now, applied in order; a damaged record is logged and skipped."""
        consumer = self._consumer("transactions-load")
        timeout_s = self._timeout_ms / 1000
        try:
            try:
                end = watermarks(consumer, self.topic, 0, timeout_s)[1]
            except KafkaException as e:
                raise TransactionStoreError(f"transaction state topic {self.topic}: {e.args[0]}") from None
            if end > 0:
                consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
                while self._position < end:
                    msg = consumer.poll(timeout_s)
                    if msg is None:
                        raise TransactionStoreError(f"transaction state topic {self.topic}: no records within "
                                                    f"{self._timeout_ms} ms while loading (at {self._position} of {end})")
                    self._apply(msg)
        finally:
            consumer.close()

    def _apply(self, msg: Any) -> None:
        if msg.error() is not None:
            log.warning("transaction state topic %s: %s", self.topic, msg.error())
            return
        try:
            key = decode_key(msg.key() or b"")
            value = None if msg.value() is None else from_record(key.transactional_id, decode_value(msg.value()))
        except (TransactionRecordError, ValueError) as e:
            log.warning("transaction state topic %s: record at offset %d skipped: %s", self.topic, msg.offset(), e)
            value, key = None, None
        applied = False
        with self._lock:
            if key is not None and msg.offset() >= self._written.get(key.transactional_id, -1):
                applied = True
                if value is None:
                    self.states.pop(key.transactional_id, None)
                else:
                    self.states[key.transactional_id] = value
                    self.view.remember(value)
            self._position = msg.offset() + 1
        if applied and key is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self.view.seen, key.transactional_id, value)

    def start(self) -> None:
        """Follow the topic and open the writer (on the event loop: changes reach it)."""
        self._loop = asyncio.get_running_loop()
        with self._lock:
            self.view.states = dict(self.states)
        self._producer = Producer(self.cluster.client({
            "enable.idempotence": False, "max.in.flight.requests.per.connection": 1, "acks": "all", "linger.ms": 0,
            "message.timeout.ms": self._timeout_ms, "client.id": "gateway-transactions", "logger": KAFKA_CLIENT_LOG}))
        self._thread = threading.Thread(target=self._follow, name="front-door-transactions-follow", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        consumer = self._consumer("transactions-follow")
        try:
            consumer.assign([TopicPartition(self.topic, 0, self._position)])
            while not self._stop.is_set():
                msg = consumer.poll(POLL_S)
                if msg is not None:
                    self._apply(msg)
        finally:
            consumer.close()

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        with self._lock:
            return self.states.get(transactional_id)

    def snapshot(self) -> dict[str, TransactionMetadata]:
        with self._lock:
            return dict(self.states)

    async def write(self, meta: TransactionMetadata) -> None:
        """`meta` durable on the cluster and in this door's view; TransactionStoreError when the cluster does not
        take it (the coordinator then answers a retriable error and keeps the state it had)."""
        value = encode_value(to_record(meta))
        offset = await self._send(meta.transactional_id, value)
        with self._lock:
            self.states[meta.transactional_id] = meta
            self._written[meta.transactional_id] = offset
            self.view.remember(meta)
        self.view.seen(meta.transactional_id, meta)

    async def delete(self, transactional_id: str) -> None:
        offset = await self._send(transactional_id, None)
        with self._lock:
            self.states.pop(transactional_id, None)
            self._written[transactional_id] = offset
        self.view.seen(transactional_id, None)

    async def _send(self, transactional_id: str, value: bytes | None) -> int:
        """The record's offset once the cluster has it."""
        assert self._producer is not None, "start() first"
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def delivered(err: KafkaError | None, msg: Any) -> None:
            failure = None if err is None else TransactionStoreError(f"transaction state topic {self.topic}: {err}")
            loop.call_soon_threadsafe(_settle, done, failure, None if msg is None else msg.offset())

        try:
            self._producer.produce(self.topic, key=encode_key(TransactionKey(transactional_id)), value=value,
                                   partition=0, on_delivery=delivered)
        except (KafkaException, BufferError) as e:
            raise TransactionStoreError(f"transaction state topic {self.topic}: {e}") from None
        deadline = loop.time() + self._timeout_ms / 1000
        while not done.done():
            await asyncio.to_thread(self._producer.poll, 0.05)
            if loop.time() > deadline:
                raise TransactionStoreError(f"transaction state topic {self.topic}: no acknowledgement within "
                                            f"{self._timeout_ms} ms")
        return await done

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None


def _settle(done: asyncio.Future[int], failure: Exception | None, offset: int | None) -> None:
    if done.done():
        return
    if failure is None:
        done.set_result(-1 if offset is None else offset)
    else:
        done.set_exception(failure)
