"""Differential test of segment storage: the same producer batches appended by a real Apache Kafka
broker and by the gateway, in several micro-batches, must leave the same files.

Kafka gets each batch in its own Produce request (`tests/kafka_wire.py`, acks=-1) on a CreateTime topic
with a small `index.interval.bytes` (an index entry every few batches), a small `segment.index.bytes`
(segments roll when the time index fills) and record timestamps that mostly grow (so a micro-batch end
between two index entries would leave an extra time-index entry if it were treated as a close). The gateway decides the same bytes
(`validate_and_assign`) and appends them in micro-batches of uneven sizes, so micro-batch ends fall
between index entries. While both run, every segment's `.log` must be byte-identical and its `.index`
and `.timeindex` must hold the same entries, entry by entry: Kafka writes the final time-index entry of
a segment only when it rolls or the log closes (Kafka's `OffsetIndex`, `TimeIndex`; `LogSegment.shouldRoll`), never at a micro-batch end.
Kafka preallocates the active segment's index files; the valid entries are those before the first
zero slot.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from embedded.local_kafka import LocalKafka
from storage.batch_appender import append_batches
from storage.file_names import partition_dir, segment_bases
from tests.kafka_wire import ProduceConnection
from validators.append_result import Accepted, PartitionState
from validators.log_validator import validate_and_assign
from validators.topic_config import topic_config

pytestmark = pytest.mark.integration

CONFIGS = {
    "message.timestamp.type": "CreateTime",
    "index.interval.bytes": "4000",
    "segment.index.bytes": "360",  # 30 time-index slots: a roll every ~150 batches
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "3600000",
}
BATCHES = 420
MICRO_BATCH_SIZES = (7, 3, 11, 5, 2, 13, 1, 9)


def producer_batch(i: int, now_ms: int) -> bytes:
    """~1 KiB, 4 records; the max timestamp grows from batch to batch, except every 7th batch, which goes
    back in time (the time index skips it)."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    base = now_ms - 600_000 + i * 50 - (5_000 if i % 7 == 3 else 0)
    for k in range(4):
        builder.append(k, base + (k * 37) % 90, f"key-{i}-{k}".encode(), f"value-{i}-{k}-".encode() * 12, [])
    return bytes(builder.build())


def index_entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    """Valid entries of an index file: up to the first all-zero slot (Kafka's preallocated tail)."""
    data = path.read_bytes()
    out = []
    for values in entry.iter_unpack(data[: len(data) - len(data) % entry.size]):
        if not any(values):
            break
        out.append(values)
    return out


def test_segments_match_kafka_across_micro_batches(kafka: LocalKafka, tmp_path: Path) -> None:
    topic = f"storage-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([(topic, 1, CONFIGS)])
    config = topic_config(topic, 1, CONFIGS)
    now = int(time.time() * 1000)
    batches = [producer_batch(i, now) for i in range(BATCHES)]

    with ProduceConnection(kafka.bootstrap_servers) as conn:
        kafka_offsets = []
        for data in batches:
            result = conn.produce(topic, 0, data)
            assert result.error_code == 0, result
            kafka_offsets.append(result.base_offset)

    state, pending, ours, mb = PartitionState(), [], [], 0
    sizes = iter(MICRO_BATCH_SIZES * BATCHES)
    boundary = next(sizes)
    for data in batches:
        decision = validate_and_assign(data, topic, 0, config, state, int(time.time() * 1000))
        assert isinstance(decision, Accepted), decision
        state = decision.state
        ours.append(decision.base_offset)
        pending.append((decision.base_offset, decision.last_offset, decision.records, decision.append_time_ms))
        if len(pending) == boundary:
            append_batches(tmp_path, topic, 0, mb, pending, config)
            pending, mb, boundary = [], mb + 1, next(sizes)
    if pending:
        append_batches(tmp_path, topic, 0, mb, pending, config)
    assert ours == kafka_offsets

    kafka_dir = kafka.log_dir / f"{topic}-0"
    gateway_dir = partition_dir(tmp_path, topic, 0)
    bases = segment_bases(gateway_dir)
    assert bases == segment_bases(kafka_dir)
    assert len(bases) >= 3, "the workload must roll segments"
    offset_entry, time_entry = struct.Struct(">ii"), struct.Struct(">qi")
    for base in bases:
        name = f"{base:020d}"
        assert (gateway_dir / f"{name}.log").read_bytes() == (kafka_dir / f"{name}.log").read_bytes(), name
        ours_index = index_entries(gateway_dir / f"{name}.index", offset_entry)
        assert ours_index == index_entries(kafka_dir / f"{name}.index", offset_entry), f"{name}.index"
        ours_times = index_entries(gateway_dir / f"{name}.timeindex", time_entry)
        assert ours_times == index_entries(kafka_dir / f"{name}.timeindex", time_entry), f"{name}.timeindex"
        assert len(ours_index) > 5
