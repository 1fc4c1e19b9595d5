"""`GatewayConsumer`: a Kafka-consumer-like reader of the gateway's segment storage (docs/design.md: segment storage).

    consumer = GatewayConsumer("var/segments")
    consumer.assign([TopicPartition("orders", 0)])
    consumer.seek(TopicPartition("orders", 0), 42)
    for record in consumer.poll(timeout_s=1.0):
        record.offset, record.timestamp, record.timestamp_type, record.create_time, record.log_append_time

Records follow KIP-32's consumer-side rules: on a LogAppendTime topic every record reports the batch's
append time with type LogAppendTime; on a CreateTime topic it reports its own CreateTime with type
CreateTime. Both clocks are always there (KIP-32 option 1, KIP-870): `create_time` (the producer's
timestamp, kept in the record bytes even on LogAppendTime topics) and `log_append_time` (the gateway's
append time: the batch header, or the append-time index for CreateTime topics; -1 when unknown).

Assign-only (no group, no commits: positions live in the consumer). `poll` reads committed segments
only — what a Kafka consumer at read_uncommitted would see at the high watermark — and, given a
timeout, re-reads the commit record until records arrive or the timeout passes. A position outside
[log start, log end] is reset by `auto_offset_reset` (earliest/latest) or raises `OffsetOutOfRangeError`
("none"), as Kafka's `auto.offset.reset`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from storage.log_reader import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetOutOfRangeError,
    PartitionReader,
)
from storage.log_reader import ConsumerRecord as _StoredRecord
from validators.codec.record_batch import TimestampType

__all__ = ["ConsumerRecord", "GatewayConsumer", "OffsetAndTimestamp", "OffsetOutOfRangeError", "TopicPartition"]

_POLL_INTERVAL_S = 0.05  # how often an empty poll re-reads the commit record while its timeout runs


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class OffsetAndTimestamp:
    """Kafka's `OffsetAndTimestamp`: the first offset whose timestamp is >= the target, and that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int  # KIP-32: the append time on LogAppendTime topics, else the record's CreateTime
    timestamp_type: TimestampType
    create_time: int  # the producer's timestamp (-1 if it sent none)
    log_append_time: int  # the gateway's append time (-1 if unknown)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None
    serialized_key_size: int
    serialized_value_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


_TYPES = {t.kafka_name: t for t in TimestampType}


def _record(r: _StoredRecord) -> ConsumerRecord:
    return ConsumerRecord(
        topic=r.topic, partition=r.partition, offset=r.offset, timestamp=r.timestamp,
        timestamp_type=_TYPES[r.timestamp_type], create_time=r.create_time, log_append_time=r.log_append_time,
        key=r.key, value=r.value, headers=r.headers, leader_epoch=r.leader_epoch if r.leader_epoch >= 0 else None,
        serialized_key_size=-1 if r.key is None else len(r.key),
        serialized_value_size=-1 if r.value is None else len(r.value),
    )


class GatewayConsumer:
    def __init__(self, segments_root: str | Path, *, max_poll_records: int = 500,
                 auto_offset_reset: str = "earliest") -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, got {auto_offset_reset!r}")
        if max_poll_records <= 0:
            raise ValueError("max_poll_records must be positive")
        self.root = Path(segments_root)
        self.max_poll_records = max_poll_records
        self.auto_offset_reset = auto_offset_reset
        self._positions: dict[TopicPartition, int | None] = {}  # None: not yet positioned (reset on poll)
        self._next = 0  # round robin start across partitions
        self._closed = False

    # ------------------------------------------------------------------ assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = list(dict.fromkeys(partitions))
        self._check_open()
        self._positions = {tp: self._positions.get(tp) for tp in wanted}

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_assigned(partition)
        if offset < 0:
            raise ValueError(f"Seek offset must not be a negative number: {offset}")
        self._positions[partition] = offset

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp, offset in self.beginning_offsets(partitions or list(self._positions)).items():
            self._check_assigned(tp)
            self._positions[tp] = offset

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp, offset in self.end_offsets(partitions or list(self._positions)).items():
            self._check_assigned(tp)
            self._positions[tp] = offset

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record `poll` returns (resetting the position first if needed)."""
        self._check_assigned(partition)
        pos = self._positions[partition]
        if pos is None:
            pos = self._reset(partition)
        return pos

    # ------------------------------------------------------------------ ListOffsets

    def _reader(self, tp: TopicPartition) -> PartitionReader | None:
        try:
            return PartitionReader(self.root, tp.topic, tp.partition)
        except FileNotFoundError:
            return None  # nothing appended yet: an empty log

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._list_offset(tp, EARLIEST_TIMESTAMP) for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._list_offset(tp, LATEST_TIMESTAMP) for tp in partitions}

    def _list_offset(self, tp: TopicPartition, target: int) -> int:
        reader = self._reader(tp)
        if reader is None:
            return 0
        with reader:
            return reader.offsets_for_times(target).offset

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Kafka's `offsetsForTimes`: per partition the earliest offset whose timestamp is >= the target
        (ListOffsets semantics, `UnifiedLog.fetchOffsetByTimestamp`), or None when there is none."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target time cannot be negative.")
            reader = self._reader(tp)
            if reader is None:
                out[tp] = None
                continue
            with reader:
                found = reader.offsets_for_times(ts)
            out[tp] = OffsetAndTimestamp(found.offset, found.timestamp, found.leader_epoch) if found.found else None
        return out

    # ------------------------------------------------------------------ poll

    def poll(self, timeout_s: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to `max_records` (default `max_poll_records`) records from the assigned partitions, each
        partition's in offset order, partitions served round robin; waits up to `timeout_s` for data."""
        self._check_open()
        limit = self.max_poll_records if max_records is None else max_records
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            records = self._fetch(limit)
            if records or time.monotonic() >= deadline or not self._positions:
                return records
            time.sleep(min(_POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))

    def _fetch(self, limit: int) -> list[ConsumerRecord]:
        partitions = list(self._positions)
        if not partitions:
            return []
        start = self._next % len(partitions)
        self._next += 1
        out: list[ConsumerRecord] = []
        for tp in partitions[start:] + partitions[:start]:
            if len(out) >= limit:
                break
            reader = self._reader(tp)
            if reader is None:
                continue
            with reader:
                pos = self._positions[tp]
                if pos is None or not reader.log_start_offset <= pos <= reader.log_end_offset:
                    pos = self._reset(tp, reader, pos)
                got = [_record(r) for r in reader.read(pos, limit - len(out))]
            if got:
                out.extend(got)
                self._positions[tp] = got[-1].offset + 1
        return out

    def _reset(self, tp: TopicPartition, reader: PartitionReader | None = None, current: int | None = None) -> int:
        own = reader is None
        if own:
            reader = self._reader(tp)
        try:
            if reader is None:
                pos = 0
            elif self.auto_offset_reset == "none":
                raise OffsetOutOfRangeError(
                    f"Fetch position {current} is out of range for partition {tp}: log start offset "
                    f"{reader.log_start_offset}, log end offset {reader.log_end_offset}, and auto_offset_reset is none"
                    if current is not None else f"No position for partition {tp} and auto_offset_reset is none"
                )
            elif self.auto_offset_reset == "latest":
                pos = reader.log_end_offset
            else:
                pos = reader.log_start_offset
        finally:
            if own and reader is not None:
                reader.close()
        self._positions[tp] = pos
        return pos

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._closed = True
        self._positions = {}

    def __enter__(self) -> GatewayConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("This consumer has already been closed.")

    def _check_assigned(self, tp: TopicPartition) -> None:
        self._check_open()
        if tp not in self._positions:
            raise ValueError(f"No current assignment for partition {tp}")
