"""`read_segments`: segment storage read by Spark tasks through pyarrow equals `log_reader.read`
(docs/design.md: segment storage). The storage is written with the storage library: rolled segments, CreateTime and
LogAppendTime topics, every codec, headers, null keys and values, a topic name with a dash."""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from pyspark.errors import PythonException

from sinks.segment_dataframe import SEGMENT_SCHEMA, plan_segments, read_segments
from storage.batch_appender import append_batches
from storage.errors import KafkaStorageError
from storage.file_names import list_partitions, partition_dir, segment_bases, segment_file_name
from storage.log_config import SegmentConfig
from storage.log_reader import offsets_for_times, read
from storage.retention import enforce_retention
from validators.codec.record_batch import TimestampType, assign_offsets_and_timestamp
from validators.topic_config import TopicConfig

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
CFG = SegmentConfig(segment_bytes=4000, index_interval_bytes=500)
TOPICS = {("ct", 0): False, ("ct", 1): False, ("lat", 0): True, ("my-topic.v2", 3): False}


def batch(offset: int, n: int, rng: random.Random, *, lat_time: int | None, codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    timestamps = [T0 + rng.randrange(-5000, 5000) for _ in range(n)]  # CreateTime: not monotonic
    for i, ts in enumerate(timestamps):
        key = None if rng.random() < 0.2 else f"key-{offset + i}".encode()
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 200))
        headers = [(f"h{j}", None if j == 2 else f"v{offset}-{j}".encode()) for j in range(rng.randrange(0, 4))]
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    raw = bytes(builder.build())
    if lat_time is not None:
        return assign_offsets_and_timestamp(raw, offset, TimestampType.LOG_APPEND_TIME, lat_time, 0)
    return assign_offsets_and_timestamp(raw, offset, TimestampType.CREATE_TIME, max(timestamps), 0)


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("segments")
    rng = random.Random(7)
    for (topic, partition), lat in TOPICS.items():
        offset = 0
        for micro_batch in range(8):
            items = []
            for j in range(4):
                append_time = T0 + micro_batch * 1000 + j  # the gateway's clock, growing
                data = batch(offset, rng.randrange(1, 9), rng, lat_time=append_time if lat else None, codec=j % 5)
                n = int.from_bytes(data[23:27], "big") + 1
                items.append((offset, offset + n - 1, data, append_time))
                offset += n
            append_batches(root, topic, partition, micro_batch, items, CFG)
    return root


def as_tuple(r) -> tuple:
    """A Spark row or a log_reader ConsumerRecord, in one comparable shape."""
    headers = tuple((h[0], None if h[1] is None else bytes(h[1])) for h in r.headers)
    key = None if r.key is None else bytes(r.key)
    value = None if r.value is None else bytes(r.value)
    return (r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.create_time, r.log_append_time,
            key, value, headers)


def expected(root: Path, ranges: dict[tuple[str, int], tuple[int, int]]) -> list[tuple]:
    out = []
    for (topic, partition), (start, end) in sorted(ranges.items()):
        if start < end:
            out += [as_tuple(r) for r in read(root, topic, partition, start, end - start)]
    return out


def full_ranges(root: Path) -> dict[tuple[str, int], tuple[int, int]]:
    ranges = {}
    for topic, partition in list_partitions(root):
        ranges[(topic, partition)] = (offsets_for_times(root, topic, partition, -2).offset,
                                      offsets_for_times(root, topic, partition, -1).offset)
    return ranges


def collect(df) -> list[tuple]:
    return [as_tuple(r) for r in df.collect()]


@pytest.fixture
def per_segment_tasks(spark) -> Iterator[None]:
    """Tasks as small as one segment: the storage's segments are 4 KB."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4000")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_whole_storage_equals_log_reader_one_task_per_segment(spark, storage, per_segment_tasks):
    assert list_partitions(storage) == sorted(TOPICS)
    df = read_segments(spark, storage)
    assert df.schema == SEGMENT_SCHEMA
    slices = plan_segments(storage, max_task_bytes=4000)
    assert all(len(s.segments) == 1 for s in slices) and len(slices) > len(TOPICS) * 3, "rolled segments, one task each"
    assert df.rdd.getNumPartitions() == len(slices)
    rows = collect(df)
    assert rows == expected(storage, full_ranges(storage))  # and in (topic, partition, offset) order
    assert {r[4] for r in rows} == {"CreateTime", "LogAppendTime"}
    assert any(r[7] is None for r in rows) and any(r[8] is None for r in rows) and any(r[9] for r in rows)
    lat = [r for r in rows if r[0] == "lat"]
    assert all(r[3] == r[6] and r[4] == "LogAppendTime" for r in lat)  # consumers see the append time
    assert any(r[5] != r[3] for r in lat)  # ... and the producer's CreateTime is kept


def test_small_segments_share_a_task_up_to_max_partition_bytes(spark, storage):
    slices = plan_segments(storage)  # default 128 MB: one task per partition here
    assert [(s.topic, s.partition) for s in slices] == sorted(TOPICS)
    assert read_segments(spark, storage).rdd.getNumPartitions() == len(TOPICS)


def test_topic_partition_and_offset_bounds(spark, storage, per_segment_tasks):
    df = read_segments(spark, storage, topics=["ct", "lat"], partitions=[0], start_offset=5, end_offset=40)
    assert collect(df) == expected(storage, {("ct", 0): (5, 40), ("lat", 0): (5, 40)})
    per_partition = {("ct", 1): 17, ("my-topic.v2", 3): 3}
    df = read_segments(spark, storage, start_offset=per_partition, end_offset={("ct", 1): 30})
    ranges = full_ranges(storage)
    ranges = {tp: (per_partition.get(tp, lo), 30 if tp == ("ct", 1) else hi) for tp, (lo, hi) in ranges.items()}
    assert collect(df) == expected(storage, ranges)
    assert collect(read_segments(spark, storage, topics=["nope"])) == []
    assert collect(read_segments(spark, storage, start_offset=10_000)) == []


@pytest.mark.parametrize("start_delta, end_delta", [(-10_000, None), (0, 3000), (2500, 6000), (None, 4000),
                                                     (9000, None), (100_000, None)])
def test_time_bounds_resolve_offsets_with_offsets_for_times(spark, storage, per_segment_tasks, start_delta, end_delta):
    start_time = None if start_delta is None else T0 + start_delta
    end_time = None if end_delta is None else T0 + end_delta
    ranges = {}
    for tp, (lo, hi) in full_ranges(storage).items():
        if start_time is not None:
            found = offsets_for_times(storage, *tp, start_time)
            lo = max(lo, found.offset if found.found else hi)
        if end_time is not None:
            found = offsets_for_times(storage, *tp, end_time)
            hi = min(hi, found.offset if found.found else hi)
        ranges[tp] = (lo, hi)
    rows = collect(read_segments(spark, storage, start_time=start_time, end_time=end_time))
    assert rows == expected(storage, ranges)
    if start_delta == 100_000:
        assert rows == []  # no record that late: every partition starts at its log end


def test_empty_root(spark, tmp_path):
    df = read_segments(spark, tmp_path / "nothing-here")
    assert df.schema == SEGMENT_SCHEMA and df.count() == 0


def test_segments_deleted_by_retention_after_planning(spark, tmp_path):
    cfg = TopicConfig(name="r", partitions=1, segment_bytes=1048576, retention_bytes=0, retention_ms=-1)
    small = SegmentConfig(segment_bytes=2000, index_interval_bytes=500)
    rng = random.Random(3)
    offset = 0
    for micro_batch in range(6):
        data = batch(offset, 8, rng, lat_time=None, codec=0)
        append_batches(tmp_path, "r", 0, micro_batch, [(offset, offset + 7, data, T0 + micro_batch)], small)
        offset += 8
    before = read(tmp_path, "r", 0, 0, 10_000)
    strict = read_segments(spark, tmp_path)  # planned: offsets [0, 48)
    lenient = read_segments(spark, tmp_path, fail_on_data_loss=False)
    report = enforce_retention(tmp_path, "r", 0, cfg, now_ms=T0)  # retention.bytes=0: all but the active one
    assert report is not None and report.log_start_offset > 0
    with pytest.raises(PythonException, match="DataLossError"):
        strict.collect()
    rows = collect(lenient)
    assert rows == [as_tuple(r) for r in before if r.offset >= report.log_start_offset]


def test_damaged_files(spark, storage, tmp_path):
    """A damaged index is rebuilt from the log (same rows); a truncated `.log` fails the read
    with an error naming the file."""
    root = tmp_path / "copy"
    shutil.copytree(storage, root)
    directory = partition_dir(root, "ct", 0)
    first, last = segment_bases(directory)[0], segment_bases(directory)[-1]
    for suffix in (".index", ".timeindex"):  # the page cache lost them: zeros
        path = directory / segment_file_name(first, suffix)
        path.write_bytes(bytes(path.stat().st_size))
    assert collect(read_segments(spark, root)) == expected(storage, full_ranges(storage))
    log_file = directory / segment_file_name(last, ".log")
    log_file.write_bytes(log_file.read_bytes()[:-10])
    with pytest.raises((KafkaStorageError, PythonException), match=re.escape(str(log_file))):
        read_segments(spark, root).collect()  # planning on the driver, or the task that reads it
