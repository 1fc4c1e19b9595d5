"""Reading the dead-letter topic with a Kafka consumer, bounded to what it held when the read began.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from confluent_kafka import KafkaException

from kafka_cluster.admin import watermarks
from kafka_cluster.client_log import COMMAND_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from sinks.dlq.format import DeadLetter, DlqMessage, parse_dead_letter
from sinks.dlq.report import Filter


class DlqError(Exception):
    """A problem with the topic or the broker, reported to the operator (exit code 1)."""


def _consumer(cluster: KafkaCluster) -> Any:
    from confluent_kafka import Consumer

    return Consumer(cluster.client({
        "group.id": cluster.group_id("dlq"),  # never committed: assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "allow.auto.create.topics": False,
        "logger": COMMAND_CLIENT_LOG,
    }))


def _to_message(m: Any) -> DlqMessage:
    _ts_type, ts = m.timestamp()
    return DlqMessage(
        partition=m.partition(), offset=m.offset(), timestamp_ms=ts, key=m.key(), value=m.value(),
        headers=tuple((k, v) for k, v in (m.headers() or [])),
    )


class DlqReader:
    """Reads the dead-letter topic up to the end offsets seen when it was opened."""

    def __init__(self, cluster: KafkaCluster, topic: str, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self.consumer = _consumer(cluster)
        try:
            meta = self.consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as e:  # no answer: unreachable, or a listener of another security protocol
            self.consumer.close()
            raise DlqError(f"cannot read {topic}: no answer from the Kafka cluster at {cluster} "
                           f"({cluster.security.describe()}) within {timeout_s:g} s ({e.args[0].str()}): check the "
                           "bootstrap servers and that the security protocol is the listener's") from None
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            self.consumer.close()
            why = tmeta.error.str() if tmeta is not None and tmeta.error is not None else "no partitions"
            raise DlqError(f"dead-letter topic {topic} does not exist on {cluster} ({why})")
        self.partitions = sorted(tmeta.partitions)
        self.watermarks = {p: self._watermarks(p) for p in self.partitions}

    def _watermarks(self, partition: int) -> tuple[int, int]:
        return watermarks(self.consumer, self.topic, partition, self.timeout_s)

    @property
    def is_empty(self) -> bool:
        return all(lo >= hi for lo, hi in self.watermarks.values())

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> DlqReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_offsets(self, since_ms: int | None) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        starts = {p: lo for p, (lo, _hi) in self.watermarks.items()}
        if since_ms is None:
            return starts
        found = self.consumer.offsets_for_times(
            [TopicPartition(self.topic, p, since_ms) for p in self.partitions], timeout=self.timeout_s
        )
        for tp in found:
            # -1: no message at or after since_ms: nothing to read in that partition
            starts[tp.partition] = tp.offset if tp.offset >= 0 else self.watermarks[tp.partition][1]
        return starts

    def scan(self, since_ms: int | None = None, partitions: Iterable[int] | None = None,
             starts: dict[int, int] | None = None) -> Iterator[DlqMessage]:
        """Every message from the start offsets to the end offsets captured at open, partition by
        partition interleaved as the broker returns them."""
        from confluent_kafka import TopicPartition

        wanted = set(self.partitions if partitions is None else partitions) & set(self.partitions)
        begin = starts if starts is not None else self.start_offsets(since_ms)
        ends = {p: self.watermarks[p][1] for p in wanted}
        remaining = {p: ends[p] for p in wanted if begin.get(p, ends[p]) < ends[p]}
        if not remaining:
            return
        self.consumer.assign([TopicPartition(self.topic, p, begin[p]) for p in sorted(remaining)])
        next_offset = {p: begin[p] for p in remaining}
        last_progress = time.monotonic()
        try:
            while remaining:
                # consume() waits until it has num_messages or the timeout passed: ask for no more than is left
                left = sum(end - next_offset[p] for p, end in remaining.items())
                batch = self.consumer.consume(num_messages=max(1, min(500, left)), timeout=0.5)
                if not batch:
                    # offsets can be skipped (aborted transactions, compaction): ask where we are
                    for tp in self.consumer.position([TopicPartition(self.topic, p) for p in list(remaining)]):
                        if tp.offset >= 0 and tp.offset >= remaining[tp.partition]:
                            remaining.pop(tp.partition, None)
                    if time.monotonic() - last_progress > self.timeout_s:
                        raise DlqError(
                            f"no progress reading {self.topic} for {self.timeout_s:.0f} s; still to read: "
                            + ", ".join(f"{p} up to {e}" for p, e in sorted(remaining.items()))
                        )
                    continue
                last_progress = time.monotonic()
                for m in batch:
                    if m.error() is not None:
                        raise DlqError(f"reading {self.topic}: {m.error()}")
                    p = m.partition()
                    end = remaining.get(p)
                    if end is None or m.offset() >= end:
                        continue  # arrived after the command started
                    next_offset[p] = m.offset() + 1
                    yield _to_message(m)
                    if m.offset() + 1 >= end:
                        remaining.pop(p, None)
                        self.consumer.pause([TopicPartition(self.topic, p)])
        finally:
            self.consumer.unassign()

    def fetch(self, partition: int, offset: int) -> DlqMessage | None:
        """The message at exactly partition:offset, or None when there is none."""
        if partition not in self.watermarks:
            return None
        lo, hi = self.watermarks[partition]
        if not lo <= offset < hi:
            return None
        for m in self.scan(partitions=[partition], starts={partition: offset}):
            return m if m.offset == offset else None
        return None


def read_dead_letters(reader: DlqReader, flt: Filter) -> Iterator[DeadLetter]:
    """The dead letters `flt` selects, streamed. Positions are fetched directly (one seek each)."""
    if flt.positions:
        for partition, offset in sorted(flt.positions):
            m = reader.fetch(partition, offset)
            if m is not None:
                dl = parse_dead_letter(m)
                if flt.matches(dl):
                    yield dl
        return
    for m in reader.scan(since_ms=flt.since_ms):
        dl = parse_dead_letter(m)
        if flt.matches(dl):
            yield dl
