"""Where groups and committed offsets last: a compacted topic on the gateway's Kafka cluster
(`groups_topic`), as Kafka keeps `__consumer_offsets`, in Kafka's own record layout
(`contract/group_records.py`). Every front door and every restart reads the same records.

A group's records all go to one partition, `Utils.abs(groupId.hashCode()) % partitions` as Kafka places
a group (`placement.partition_for`), so their order holds: the last record of a key is the last decision.
Writes are acks=all with an idempotent producer; a write resolves when the cluster has every record of
it and raises `GroupStoreError` when it does not (the coordinator answers the client with a retriable
error and changes nothing). `load()` reads every partition from the beginning to the end offsets as they
are when it is called; a damaged record is logged with its offset and skipped.

confluent-kafka runs a delivery thread; results reach the asyncio loop through `call_soon_threadsafe`
(as `ingress_bridge.py`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from contract.group_records import (
    EndedOffsets,
    GroupKey,
    GroupRecordError,
    OffsetAndMetadata,
    OffsetKey,
    PendingOffsetKey,
    PendingOffsets,
    StoredGroup,
    StoredGroups,
    TxnEnd,
    TxnEndKey,
    decode_group,
    decode_key,
    decode_offset,
    decode_pending_offset,
    decode_txn_end,
    encode_group,
    encode_key,
    encode_offset,
    encode_pending_offset,
    encode_txn_end,
)
from contract.topics import GROUPS_TOPIC_PARTITIONS
from front_door.groups.placement import partition_for
from kafka_cluster.admin import MissingTopicError, end_offsets
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.front_door.groups")

class GroupStoreError(RuntimeError):
    """A write the cluster did not acknowledge."""


class KafkaGroupStore:
    def __init__(self, cluster: KafkaCluster, topic: str, *, timeout_ms: int = 30_000) -> None:
        self.cluster = cluster
        self.topic = topic
        self._timeout_ms = timeout_ms
        self._partitions = GROUPS_TOPIC_PARTITIONS
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ load

    def load(self) -> StoredGroups:
        """Everything the topic holds now, the last record of each key winning (a tombstone forgets)."""
        consumer = Consumer(self.cluster.client({
            "group.id": self.cluster.group_id("groups-load"), "enable.auto.commit": False,
            "allow.auto.create.topics": False, "enable.partition.eof": False, "logger": KAFKA_CLIENT_LOG}))
        try:
            ends = self._ends(consumer)
            self._partitions = max(len(ends), 1)
            groups: dict[str, StoredGroup] = {}
            offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
            pending = _Pending()
            todo = {p: end for p, end in ends.items() if end > 0}
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in todo])
            while todo:
                msg = consumer.poll(self._timeout_ms / 1000)
                if msg is None:
                    raise GroupStoreError(f"groups topic {self.topic}: no records within {self._timeout_ms} ms "
                                          f"while loading (partitions left: {sorted(todo)})")
                if msg.error() is not None:
                    raise GroupStoreError(f"groups topic {self.topic}: {msg.error()}")
                if msg.partition() in todo and msg.offset() >= todo[msg.partition()] - 1:
                    del todo[msg.partition()]
                self._apply(msg, groups, offsets, pending)
            return StoredGroups(groups, {g: o for g, o in offsets.items() if o}, pending.held(),
                                tuple(e for e in pending.ended if e.pending.offsets))
        finally:
            consumer.close()

    def _ends(self, consumer: Any) -> dict[int, int]:
        try:
            return end_offsets(consumer, self.topic, self._timeout_ms / 1000, what="groups topic")
        except MissingTopicError as e:
            raise GroupStoreError(str(e)) from None

    def _apply(self, msg: Any, groups: dict[str, StoredGroup],
               offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]],
               pending: _Pending) -> None:
        where = f"{self.topic}-{msg.partition()}@{msg.offset()}"
        if msg.key() is None:
            log.warning("groups topic: a record without a key at %s; skipped", where)
            return
        try:
            key = decode_key(msg.key())
            value = msg.value()
            if isinstance(key, PendingOffsetKey):
                pending.offset(msg.partition(), key, None if value is None else decode_pending_offset(value))
            elif isinstance(key, TxnEndKey):
                if value is not None:
                    pending.end(msg.partition(), key.producer_id, decode_txn_end(value), offsets)
            elif isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    offsets.get(key.group, {}).pop(tp, None)
                else:
                    offsets.setdefault(key.group, {})[tp] = decode_offset(value)
            elif value is None:
                groups.pop(key.group, None)
            else:
                groups[key.group] = decode_group(value)
        except GroupRecordError as e:
            log.warning("groups topic: a damaged record at %s skipped: %s", where, e)

    # ------------------------------------------------------------------ writes

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._producer = Producer(self.cluster.client({
            "enable.idempotence": True, "acks": "all", "linger.ms": 0, "message.timeout.ms": self._timeout_ms,
            "client.id": "front-door-groups", "logger": KAFKA_CLIENT_LOG}))
        self._thread = threading.Thread(target=self._deliveries, name="front-door-groups", daemon=True)
        self._thread.start()

    def _deliveries(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    async def _write(self, group: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """Produce every record now (in call order, on the group's partition); resolve when all are acked."""
        await self._write_to(partition_for(group, self._partitions), records)

    async def _write_to(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        assert self._producer is not None and self._loop is not None, "start() first"
        loop = self._loop
        done: asyncio.Future[None] = loop.create_future()
        left = [len(records)]
        failures: list[str] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            left[0] -= 1
            if left[0] == 0:
                loop.call_soon_threadsafe(_settle, done, failures)

        try:
            for key, value in records:
                self._producer.produce(self.topic, key=key, value=value, partition=partition, on_delivery=delivered)
        except (KafkaException, BufferError) as e:
            raise GroupStoreError(f"groups topic {self.topic}: {e}") from None
        if not records:
            return
        await done

    async def write_offsets(self, group: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        await self._write(group, [(encode_key(OffsetKey(group, t, p)), encode_offset(o)) for (t, p), o in offsets.items()])

    async def write_pending_offsets(self, group: str, producer_id: int, pending: PendingOffsets) -> None:
        """Offsets committed inside `producer_id`'s transaction, held until it ends (`contract/group_records.py`)."""
        await self._write(group, [(encode_key(PendingOffsetKey(producer_id, group, t, p)),
                                   encode_pending_offset(pending.txn_start_ms, o)) for (t, p), o in pending.offsets.items()])

    async def write_txn_end(self, producer_id: int, end: TxnEnd) -> None:
        """The transaction coordinator's end of a transaction with consumer offsets (Kafka's marker on each of its
        offsets partitions), on every partition of the topic: wherever its groups' pending offsets are."""
        record = [(encode_key(TxnEndKey(producer_id)), encode_txn_end(end))]
        await asyncio.gather(*(self._write_to(partition, record) for partition in range(self._partitions)))

    async def end_pending_offsets(self, group: str, producer_id: int, pending: Iterable[tuple[str, int]],
                                  committed: Mapping[tuple[str, int], OffsetAndMetadata]) -> None:
        """A transaction's end applied: its `committed` offsets (none on an abort) the group's, its pending keys and
        its end tombstoned, in one write to the group's partition."""
        await self._write(group, [
            *((encode_key(OffsetKey(group, t, p)), encode_offset(o)) for (t, p), o in committed.items()),
            *((encode_key(PendingOffsetKey(producer_id, group, t, p)), None) for t, p in pending),
            (encode_key(TxnEndKey(producer_id)), None)])

    async def write_group(self, group: str, group_record: StoredGroup) -> None:
        await self._write(group, [(encode_key(GroupKey(group)), encode_group(group_record))])

    async def delete_group(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        tombstones: list[tuple[bytes, bytes | None]] = [(encode_key(OffsetKey(group, t, p)), None) for t, p in partitions]
        await self._write(group, [*tombstones, (encode_key(GroupKey(group)), None)])

    async def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        await self._write(group, [(encode_key(OffsetKey(group, t, p)), None) for t, p in partitions])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None


class _Pending:
    """A load's pending transactional offsets, by partition and producer, and the ends applied to them in log
    order (`contract/group_records.py`): an end commits (into `offsets`) or drops the pending offsets of its
    transaction read before it on its partition."""

    def __init__(self) -> None:
        self._by_partition: dict[int, dict[int, dict[str, PendingOffsets]]] = {}
        self.ended: list[EndedOffsets] = []

    def offset(self, partition: int, key: PendingOffsetKey, value: tuple[int, OffsetAndMetadata] | None) -> None:
        groups = self._by_partition.setdefault(partition, {}).setdefault(key.producer_id, {})
        tp = (key.topic, key.partition)
        if value is None:  # tombstoned: held no more, and an end applied to it before was carried out
            if key.group in groups:
                groups[key.group].offsets.pop(tp, None)
            for ended in self.ended:
                if (ended.group, ended.producer_id) == (key.group, key.producer_id):
                    ended.pending.offsets.pop(tp, None)
            return
        start, offset = value
        held = groups.get(key.group)
        if held is None or held.txn_start_ms != start:
            held = groups[key.group] = PendingOffsets(start, {})
        held.offsets[tp] = offset

    def end(self, partition: int, producer_id: int, end: TxnEnd,
            offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]]) -> None:
        groups = self._by_partition.get(partition, {}).get(producer_id, {})
        for group in [g for g, held in groups.items() if held.txn_start_ms == end.txn_start_ms]:
            held = groups.pop(group)
            if end.commit:
                offsets.setdefault(group, {}).update(held.offsets)
            self.ended.append(EndedOffsets(group, producer_id, held, end.commit))

    def held(self) -> dict[int, dict[str, PendingOffsets]]:
        found: dict[int, dict[str, PendingOffsets]] = {}
        for producers in self._by_partition.values():
            for producer_id, groups in producers.items():
                for group, held in groups.items():
                    if held.offsets:
                        found.setdefault(producer_id, {})[group] = held
        return found


def _settle(done: asyncio.Future[None], failures: list[str]) -> None:
    if done.done():
        return
    if failures:
        done.set_exception(GroupStoreError(f"the groups topic did not take {len(failures)} record(s): {failures[0]}"))
    else:
        done.set_result(None)
