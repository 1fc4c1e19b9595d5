"""The security store on the gateway's Kafka cluster (`security_store.py` says what it holds and why): a
compacted topic, read from the beginning when the door starts (`load`) and followed afterwards by a
consumer thread, so a user or ACL written through any door reaches every door within a poll.

Writes go to partition 0 with an idempotent acks=all producer and resolve when the cluster has them; the
write is applied here at once, and the follower's copy of it (or of anything older for the same key) is
not applied again: each key keeps the offset of the record it shows.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from front_door.cluster.security_store import ChangeListener, SecurityStoreError, record_key, split_key
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.front_door.security")
POLL_S = 0.2


class KafkaSecurityStore:
    def __init__(self, cluster: KafkaCluster, topic: str, *, timeout_ms: int = 30_000,
                 what: str = "security topic") -> None:
        self.cluster = cluster
        self.topic = topic
        self.what = what  # how errors and log lines name the topic (the doors topic is kept the same way)
        self._timeout_ms = timeout_ms
        self._records: dict[tuple[str, str], tuple[int, bytes]] = {}  # (kind, name) -> (offset, value)
        self._deleted_at: dict[tuple[str, str], int] = {}
        self._listeners: list[ChangeListener] = []
        self._positions: dict[int, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Any = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ reading

    def _consumer(self, purpose: str) -> Any:
        return Consumer(self.cluster.client({
            "group.id": self.cluster.group_id(purpose), "enable.auto.commit": False,
            "allow.auto.create.topics": False, "enable.partition.eof": False, "logger": KAFKA_CLIENT_LOG}))

    def load(self) -> None:
        """Everything the topic holds now (the last record of each key winning); SecurityStoreError when the
        topic cannot be read."""
        consumer = self._consumer("security-load")
        try:
            meta = consumer.list_topics(self.topic, timeout=self._timeout_ms / 1000)
            topic = meta.topics.get(self.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise SecurityStoreError(f"{self.what} {self.topic} does not exist"
                                         + (f" ({topic.error})" if topic is not None and topic.error else ""))
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                      timeout=self._timeout_ms / 1000)[1] for p in topic.partitions}
            self._positions = dict(ends)
            todo = {p: end for p, end in ends.items() if end > 0}
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in todo])
            while todo:
                msg = consumer.poll(self._timeout_ms / 1000)
                if msg is None:
                    raise SecurityStoreError(f"{self.what} {self.topic}: no records within {self._timeout_ms} ms "
                                             f"while loading (partitions left: {sorted(todo)})")
                if msg.error() is not None:
                    raise SecurityStoreError(f"{self.what} {self.topic}: {msg.error()}")
                if msg.partition() in todo and msg.offset() >= todo[msg.partition()] - 1:
                    del todo[msg.partition()]
                self._apply(msg.key(), msg.value(), msg.offset(), notify=False)
        except KafkaException as e:
            raise SecurityStoreError(f"{self.what} {self.topic}: {e}") from None
        finally:
            consumer.close()

    def _apply(self, raw_key: bytes | None, value: bytes | None, offset: int, notify: bool = True) -> None:
        try:
            kind, name = split_key((raw_key or b"").decode())
        except (UnicodeDecodeError, ValueError):
            log.warning("%s %s: a record without a valid key at offset %d; skipped", self.what, self.topic, offset)
            return
        key = (kind, name)
        seen = max(self._records.get(key, (-1, b""))[0], self._deleted_at.get(key, -1))
        if offset <= seen:
            return  # this door's own write, applied when it was acknowledged, or older
        if value is None:
            self._records.pop(key, None)
            self._deleted_at[key] = offset
        else:
            self._records[key] = (offset, value)
        if notify:
            for listener in self._listeners:
                listener(kind, name, value)

    def snapshot(self, kind: str) -> dict[str, bytes]:
        return {name: value for (k, name), (_, value) in self._records.items() if k == kind}

    def subscribe(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    # ------------------------------------------------------------------ following and writing

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the topic from where `load` ended, and accept writes; changes reach the listeners on `loop`."""
        self._loop = loop
        self._producer = Producer(self.cluster.client({
            "enable.idempotence": True, "acks": "all", "linger.ms": 0, "message.timeout.ms": self._timeout_ms,
            "client.id": f"front-door-{self.what.split()[0]}", "logger": KAFKA_CLIENT_LOG}))
        for target, name in ((self._follow, "front-door-security-follow"), (self._deliveries, "front-door-security")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _follow(self) -> None:
        consumer = self._consumer("security-follow")
        try:
            consumer.assign([TopicPartition(self.topic, p, offset) for p, offset in self._positions.items()])
            while not self._stop.is_set():
                msg = consumer.poll(POLL_S)
                if msg is None:
                    continue
                if msg.error() is not None:
                    log.warning("%s %s: %s", self.what, self.topic, msg.error())
                    continue
                assert self._loop is not None
                try:
                    self._loop.call_soon_threadsafe(self._apply, msg.key(), msg.value(), msg.offset())
                except RuntimeError:  # the door's loop closed while this thread was polling: it is stopping
                    return
        finally:
            consumer.close()

    def _deliveries(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    async def write(self, kind: str, name: str, value: bytes | None) -> None:
        assert self._producer is not None and self._loop is not None, "start() first"
        loop = self._loop
        done: asyncio.Future[int] = loop.create_future()

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                loop.call_soon_threadsafe(_settle, done, SecurityStoreError(f"{self.what} {self.topic}: {err}"))
            else:
                loop.call_soon_threadsafe(_settle, done, msg.offset())

        key = record_key(kind, name).encode()
        try:
            self._producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=delivered)
        except (KafkaException, BufferError) as e:
            raise SecurityStoreError(f"{self.what} {self.topic}: {e}") from None
        self._apply(key, value, await done)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None


def _settle(done: asyncio.Future[int], outcome: int | SecurityStoreError) -> None:
    if done.done():
        return
    if isinstance(outcome, SecurityStoreError):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)
