"""Segment storage as a Spark DataFrame: the batch reader of docs/design.md: segment storage.

    df = read_segments(spark, "var/segments", topics=["orders"], start_time=t0, end_time=t1)

One row per record, as a Kafka consumer sees it (`storage.log_reader`), plus both clocks (docs/design.md: what the stage decides):

| column | type | |
|---|---|---|
| topic, partition, offset | string, int, long | |
| timestamp | long | epoch ms a consumer reports: the batch's LogAppendTime on LogAppendTime topics, else the record's CreateTime; -1 when the record has none (v0 up-converted) |
| timestamp_type | string | Kafka's `TimestampType` name: `CreateTime` or `LogAppendTime` |
| create_time | long | the producer's timestamp, kept in the record on both kinds of topic (-1: none) |
| log_append_time | long | the gateway's append time: batch header (LogAppendTime) or append-time index (CreateTime); -1 unknown |
| key, value | binary | null for a null key/value |
| headers | array<struct<key string, value binary>> | in record order, as Spark's Kafka source types them |

Times are epoch milliseconds exactly as Kafka reports them (so that -1 keeps its meaning);
`timestamp_millis(col)` turns one into a Spark timestamp.

How it runs:
- **planning, on the driver**: the partition directories under `root` are listed, each partition's commit
  record read and its offset range resolved: `[max(log start, start_offset, T(start_time)),
  min(log end, end_offset, T(end_time)))` where `T(t)` is `offsets_for_times(t)` — the earliest offset
  whose timestamp is >= t (ListOffsets, `UnifiedLog.fetchOffsetByTimestamp`), or the log end offset when there is none. These
  are the semantics of Spark's Kafka source (`startingTimestamp`, `endingTimestamp`): times choose
  offsets, records are not filtered by timestamp (CreateTime need not grow with the offset; filter the
  column for that). The ranges are fixed when `read_segments` returns: a snapshot of the committed log.
- **reading, one Spark task per segment** (consecutive small segments of a partition share a task up to
  `spark.sql.files.maxPartitionBytes`): `spark.range(n, numPartitions=n).mapInArrow(...)`, each task
  reading its slice with `log_reader.PartitionReader` into pyarrow RecordBatches of at most
  `spark.sql.execution.arrow.maxRecordsPerBatch` rows. Tasks read files, so on a cluster `root` must be
  a filesystem every executor mounts at the same path (the gateway's own requirement). Readers take no
  lock and stay inside the committed sizes, so appends in progress are invisible.
- **retention during the read**: a segment deleted after planning cannot be read. Like the
  Kafka source's `failOnDataLoss`, the task then fails with the lost range in the message, or with
  `fail_on_data_loss=False` skips to the new log start offset.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from storage.file_names import list_partitions
from storage.log_reader import ConsumerRecord, OffsetOutOfRangeError, PartitionReader

log = logging.getLogger("gateway.segments.dataframe")

HEADER_TYPE = StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)])
SEGMENT_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", LongType(), False),
        StructField("timestamp_type", StringType(), False),
        StructField("create_time", LongType(), False),
        StructField("log_append_time", LongType(), False),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("headers", ArrayType(HEADER_TYPE, False), False),
    ]
)
_ARROW_HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("partition", pa.int32(), False),
        pa.field("offset", pa.int64(), False),
        pa.field("timestamp", pa.int64(), False),
        pa.field("timestamp_type", pa.string(), False),
        pa.field("create_time", pa.int64(), False),
        pa.field("log_append_time", pa.int64(), False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", _ARROW_HEADERS, False),
    ]
)
MAX_BATCH_BYTES = 64 * 1024 * 1024  # a RecordBatch is cut earlier when keys and values are this large
_OPEN_RETRIES = 3  # re-reads of the commit record when retention removed a file under the reader

OffsetSpec = int | Mapping[tuple[str, int], int] | None


class DataLossError(RuntimeError):
    """Records of the planned range were deleted (by retention) before they were read."""


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """What one task reads: offsets [start, end) of a partition, within segments [first_base, ...)."""

    topic: str
    partition: int
    start: int
    end: int
    segments: tuple[int, ...]  # base offsets of the segments the slice spans (for logs and tests)
    log_bytes: int  # committed .log bytes of those segments (what sizes the task)


# ----------------------------------------------------------------------------------------- planning


def _offset_for(spec: OffsetSpec, topic: str, partition: int) -> int | None:
    if spec is None or isinstance(spec, int):
        return spec
    return spec.get((topic, partition))


def _time_offset(reader: PartitionReader, timestamp: int) -> int:
    """ListOffsets for a time bound: the earliest offset whose timestamp is >= `timestamp`, or the log end
    offset when no record is that late (Spark's Kafka source: "the offset will be set to latest")."""
    result = reader.offsets_for_times(timestamp)
    return result.offset if result.found else reader.log_end_offset


def plan_segments(
    root: Path,
    topics: Iterable[str] | None = None,
    partitions: Iterable[int] | None = None,
    start_offset: OffsetSpec = None,
    end_offset: OffsetSpec = None,
    start_time: int | None = None,
    end_time: int | None = None,
    max_task_bytes: int = 128 * 1024 * 1024,
) -> list[SegmentSlice]:
    """The slices `read_segments` reads (module docstring): per partition, the resolved offset range cut at
    segment boundaries; consecutive segments share a slice while their bytes stay within `max_task_bytes`.
    `start_offset`/`end_offset` are one offset for every partition or a `{(topic, partition): offset}` map
    (partitions missing from it are not bounded); `end_offset` and `end_time` are exclusive."""
    for name, value in (("start_time", start_time), ("end_time", end_time)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be an epoch-millisecond timestamp >= 0, got {value}")
    wanted_topics = None if topics is None else set(topics)
    wanted_partitions = None if partitions is None else {int(p) for p in partitions}
    slices: list[SegmentSlice] = []
    for topic, partition in list_partitions(root):
        if wanted_topics is not None and topic not in wanted_topics:
            continue
        if wanted_partitions is not None and partition not in wanted_partitions:
            continue
        with PartitionReader(root, topic, partition) as reader:
            start, end = reader.log_start_offset, reader.log_end_offset
            first = _offset_for(start_offset, topic, partition)
            if first is not None:
                start = max(start, first)  # below the log start: those records no longer exist
            last = _offset_for(end_offset, topic, partition)
            if last is not None:
                end = min(end, last)
            if start_time is not None and start < end:
                start = max(start, _time_offset(reader, start_time))
            if end_time is not None and start < end:
                end = min(end, _time_offset(reader, end_time))
            if start >= end:
                continue
            slices.extend(_cut(reader, topic, partition, start, end, max_task_bytes))
    return slices


def _cut(reader: PartitionReader, topic: str, partition: int, start: int, end: int, max_task_bytes: int) -> list[SegmentSlice]:
    views = reader.segments
    out: list[SegmentSlice] = []
    current: list[tuple[int, int, int, int]] = []  # (base, slice start, slice end, bytes)

    def close() -> None:
        if current:
            out.append(SegmentSlice(topic, partition, current[0][1], current[-1][2],
                                    tuple(c[0] for c in current), sum(c[3] for c in current)))
            current.clear()

    for i, view in enumerate(views):
        seg_end = views[i + 1].base_offset if i + 1 < len(views) else reader.log_end_offset
        lo, hi = max(start, view.base_offset), min(end, seg_end)
        if lo >= hi:
            continue
        size = view.state.log_size if view.state is not None else view.segment.size
        if current and sum(c[3] for c in current) + size > max_task_bytes:
            close()
        current.append((view.base_offset, lo, hi, size))
    close()
    return out


# ----------------------------------------------------------------------------------------- reading


class _Columns:
    """Column buffers of one RecordBatch under construction."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.timestamp_type: list[str] = []
        self.create_time: list[int] = []
        self.log_append_time: list[int] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.headers: list[list[dict[str, object]]] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, r: ConsumerRecord) -> None:
        self.offset.append(r.offset)
        self.timestamp.append(r.timestamp)
        self.timestamp_type.append(r.timestamp_type)
        self.create_time.append(r.create_time)
        self.log_append_time.append(r.log_append_time)
        self.key.append(None if r.key is None else bytes(r.key))
        self.value.append(None if r.value is None else bytes(r.value))
        self.headers.append([{"key": k, "value": None if v is None else bytes(v)} for k, v in r.headers])
        self.nbytes += 64 + len(r.key or b"") + len(r.value or b"") + sum(len(k) + len(v or b"") for k, v in r.headers)

    def batch(self, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self)
        out = pa.RecordBatch.from_arrays(
            [
                pa.array([topic] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(self.offset, pa.int64()),
                pa.array(self.timestamp, pa.int64()),
                pa.array(self.timestamp_type, pa.string()),
                pa.array(self.create_time, pa.int64()),
                pa.array(self.log_append_time, pa.int64()),
                pa.array(self.key, pa.binary()),
                pa.array(self.value, pa.binary()),
                pa.array(self.headers, _ARROW_HEADERS),
            ],
            schema=ARROW_SCHEMA,
        )
        self.clear()
        return out


def read_slice(
    root: Path, piece: SegmentSlice, *, fail_on_data_loss: bool = True, max_rows: int = 10000,
    max_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The records of one slice as Arrow RecordBatches (what a task of `read_segments` runs)."""
    topic, partition = piece.topic, piece.partition
    columns = _Columns()
    next_offset = piece.start
    retries = 0
    while next_offset < piece.end:
        try:
            with PartitionReader(root, topic, partition) as reader:
                if next_offset < reader.log_start_offset:
                    lost = (next_offset, min(reader.log_start_offset, piece.end))
                    message = (f"{topic}-{partition}: offsets [{lost[0]}, {lost[1]}) were deleted (retention moved the "
                               f"log start offset to {reader.log_start_offset}) after this read was planned")
                    if fail_on_data_loss:
                        raise DataLossError(message + "; read again, or pass fail_on_data_loss=False to skip them")
                    log.warning("%s; skipped", message)
                    next_offset = lost[1]
                    continue
                for record in reader.read(next_offset, piece.end - next_offset):
                    if record.offset >= piece.end:
                        break
                    columns.add(record)
                    next_offset = record.offset + 1
                    if len(columns) >= max_rows or columns.nbytes >= max_bytes:
                        yield columns.batch(topic, partition)
                next_offset = piece.end  # read to the end of the slice (or of the log)
        except FileNotFoundError:
            # A segment file went away between reading the commit record and opening the file: retention
            # deleted it. Read the commit record again; the log start offset tells what was lost.
            retries += 1
            if retries > _OPEN_RETRIES:
                raise
        except OffsetOutOfRangeError as e:
            raise DataLossError(f"{topic}-{partition}: {e} (the log was truncated after this read was planned)") from e
    if len(columns):
        yield columns.batch(topic, partition)


def read_segments(
    spark: SparkSession,
    root: str | os.PathLike[str],
    topics: Iterable[str] | None = None,
    partitions: Iterable[int] | None = None,
    start_offset: OffsetSpec = None,
    end_offset: OffsetSpec = None,
    start_time: int | None = None,
    end_time: int | None = None,
    *,
    fail_on_data_loss: bool = True,
) -> DataFrame:
    """Segment storage under `root` as a DataFrame with `SEGMENT_SCHEMA` (module docstring): the records of
    the selected topics and partitions in [start, end) offset ranges resolved from the offset and time
    bounds (epoch ms; both ends exclusive on the right). One Spark partition per slice, in (topic,
    partition, offset) order."""
    root_path = Path(os.path.abspath(root))
    max_task_bytes = _conf_bytes(spark, "spark.sql.files.maxPartitionBytes", 128 * 1024 * 1024)
    max_rows = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000") or 10000)
    slices = plan_segments(root_path, topics, partitions, start_offset, end_offset, start_time, end_time, max_task_bytes)
    log.info("read_segments %s: %d slices, %d bytes", root_path, len(slices), sum(s.log_bytes for s in slices))
    if not slices:
        return spark.createDataFrame([], SEGMENT_SCHEMA)

    def read_tasks(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for i in batch.column(0).to_pylist():
                yield from read_slice(root_path, slices[i], fail_on_data_loss=fail_on_data_loss, max_rows=max_rows)

    return spark.range(0, len(slices), 1, numPartitions=len(slices)).mapInArrow(read_tasks, SEGMENT_SCHEMA)


def _conf_bytes(spark: SparkSession, key: str, default: int) -> int:
    """A byte-size Spark conf ("128m", "134217728b", plain number)."""
    value = (spark.conf.get(key, None) or "").strip().lower()
    if not value:
        return default
    units = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
    for suffix in sorted(units, key=len, reverse=True):
        if value.endswith(suffix) and value[: -len(suffix)].strip().isdigit():
            return int(value[: -len(suffix)]) * units[suffix]
    return int(value) if value.isdigit() else default


__all__ = [
    "ARROW_SCHEMA",
    "SEGMENT_SCHEMA",
    "DataLossError",
    "SegmentSlice",
    "plan_segments",
    "read_segments",
    "read_slice",
]
