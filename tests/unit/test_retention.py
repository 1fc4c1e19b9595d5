"""Retention: retention.ms / retention.bytes as Kafka 4.x (`UnifiedLog.deleteRetentionMsBreachedSegments`; `UnifiedLog.deleteRetentionSizeBreachedSegments`, named after UnifiedLogTest's) and
KIP-870 retention.max.eventtime.ms (docs/design.md: segment storage)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from storage.batch_appender import append_batches
from storage.commit_record import read_commit
from storage.crash_point import CRASH_ENV
from storage.file_names import partition_dir, segment_bases
from storage.log_reader import EARLIEST_TIMESTAMP, OffsetOutOfRangeError, offsets_for_times, read
from storage.partition_log import PartitionLog
from storage.retention import (
    REASON_RETENTION_BYTES,
    REASON_RETENTION_MAX_EVENTTIME_MS,
    REASON_RETENTION_MS,
    enforce_retention,
    enforce_retention_all,
)
from tests.unit.test_segment import T0, make_batch
from validators.codec.record_batch import TimestampType
from validators.topic_config import TopicConfig, TopicRegistry

REPO = Path(__file__).resolve().parents[2]
RECORD = make_batch(0, [10])
SIZE = len(RECORD)


def topic(**kw) -> TopicConfig:
    # 5 single-record batches per segment (segment.bytes), as the Kafka tests' "segment = 5 records"
    base = {"name": "t", "partitions": 1, "segment_bytes": 5 * SIZE, "retention_ms": -1}
    return TopicConfig(**{**base, **kw})


def fill(root, cfg: TopicConfig, timestamps, *, lat_times=None, batch_id=0, start=0):
    items = []
    for i, ts in enumerate(timestamps):
        o = start + i
        lat = lat_times[i] if lat_times else None
        items.append((o, o, make_batch(o, [ts], lat_time=lat), lat if lat else T0))
    return append_batches(root, "t", 0, batch_id, items, cfg)


def test_delete_time_based_segments_ready_to_be_deleted(tmp_path):
    cfg = topic(retention_ms=10000)
    fill(tmp_path, cfg, [10] * 15)
    assert len(segment_bases(partition_dir(tmp_path, "t", 0))) == 3
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0)
    assert [d.reason for d in report.deleted] == [REASON_RETENTION_MS] * 2
    assert segment_bases(partition_dir(tmp_path, "t", 0)) == [10]  # the active segment is never deleted
    assert report.log_start_offset == 10
    assert read_commit(partition_dir(tmp_path, "t", 0)).log_start_offset == 10
    assert offsets_for_times(tmp_path, "t", 0, EARLIEST_TIMESTAMP).offset == 10
    try:
        read(tmp_path, "t", 0, 3)
        raise AssertionError("expected OffsetOutOfRangeError")
    except OffsetOutOfRangeError:
        pass
    assert [r.offset for r in read(tmp_path, "t", 0, 10)] == list(range(10, 15))


def test_not_delete_time_based_segments_when_none_ready(tmp_path):
    cfg = topic(retention_ms=10000000)
    fill(tmp_path, cfg, [T0] * 15)
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 1)
    assert report.deleted == ()
    assert len(segment_bases(partition_dir(tmp_path, "t", 0))) == 3


def test_retention_ms_is_strict(tmp_path):
    cfg = topic(retention_ms=1000)
    fill(tmp_path, cfg, [T0] * 10)
    assert enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 1000).deleted == ()
    assert len(enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 1001).deleted) == 1


def test_future_timestamp_blocks_newer_segments_and_warns(tmp_path, caplog):
    cfg = topic(retention_ms=1000)
    fill(tmp_path, cfg, [T0 + 10**9] + [T0] * 14)  # first segment holds a far-future timestamp
    with caplog.at_level(logging.WARNING, logger="LogFutureTimestampLogger"):
        report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 10**6)
    assert report.deleted == ()
    assert any("contains future timestamp(s), making it ineligible to be deleted" in w for w in report.warnings)
    assert any("future timestamp" in r.message for r in caplog.records)


def test_segment_without_timestamps_uses_file_mtime(tmp_path):
    cfg = topic(retention_ms=1000)
    fill(tmp_path, cfg, [-1] * 10)
    d = partition_dir(tmp_path, "t", 0)
    first = d / "00000000000000000000.log"
    os.utime(first, ns=(T0 * 10**6, T0 * 10**6))
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 5000)
    assert [(x.base_offset, x.largest_timestamp) for x in report.deleted] == [(0, T0)]


def test_delete_size_based_segments(tmp_path):
    cfg = topic(retention_bytes=10 * SIZE)
    fill(tmp_path, cfg, [T0] * 15)
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0)
    assert [d.reason for d in report.deleted] == [REASON_RETENTION_BYTES]
    assert len(segment_bases(partition_dir(tmp_path, "t", 0))) == 2


def test_not_delete_size_based_segments_when_under_retention_size(tmp_path):
    cfg = topic(retention_bytes=15 * SIZE)
    fill(tmp_path, cfg, [T0] * 15)
    assert enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0).deleted == ()
    assert len(segment_bases(partition_dir(tmp_path, "t", 0))) == 3


def test_retention_bytes_zero_keeps_the_active_segment(tmp_path):
    cfg = topic(retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0)
    assert len(report.deleted) == 2
    assert segment_bases(partition_dir(tmp_path, "t", 0)) == [10]


def test_kip870_event_time_on_log_append_time_topic(tmp_path):
    """LAT topic: headers carry recent append times (retention.ms keeps everything) while the records'
    CreateTimes are old for the first two segments; event-time retention deletes exactly those."""
    hour = 3600 * 1000
    create = [T0 - 10 * hour] * 5 + [T0 - 9 * hour] * 5 + [T0] * 5
    appended = [T0 + i for i in range(15)]
    cfg = topic(retention_ms=7 * 24 * hour, retention_max_eventtime_ms=9 * hour + 1,
                message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    fill(tmp_path, cfg, create, lat_times=appended)
    report = enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0 + 100)
    assert [(d.base_offset, d.reason, d.largest_timestamp) for d in report.deleted] == [
        (0, REASON_RETENTION_MAX_EVENTTIME_MS, T0 - 10 * hour)
    ]
    assert report.deleted_by_reason() == {REASON_RETENTION_MAX_EVENTTIME_MS: 1}
    assert report.log_start_offset == 5


def test_kip870_segment_without_event_time_is_not_deleted(tmp_path):
    cfg = topic(retention_max_eventtime_ms=0)
    fill(tmp_path, cfg, [-1] * 5 + [T0] * 10)
    assert enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0).deleted == ()


def test_compact_only_topic_is_not_retained(tmp_path):
    cfg = topic(retention_bytes=0, cleanup_policy=("compact",))
    fill(tmp_path, cfg, [T0] * 12)
    assert enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0).deleted == ()


def test_busy_partition_is_skipped_without_blocking(tmp_path):
    cfg = topic(retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    registry = TopicRegistry({"t": cfg})
    with PartitionLog.open(tmp_path, "t", 0, cfg):  # an append in progress holds the partition lock
        assert enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0, blocking=False) is None
        assert enforce_retention_all(tmp_path, registry, now_ms=T0) == []
    reports = enforce_retention_all(tmp_path, registry, now_ms=T0)
    assert len(reports) == 1 and len(reports[0].deleted) == 2


def test_append_after_retention_continues(tmp_path):
    cfg = topic(retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    enforce_retention(tmp_path, "t", 0, cfg, now_ms=T0)
    outcome = fill(tmp_path, cfg, [T0] * 3, batch_id=1, start=12)
    assert outcome.log_end_offset == 15 and outcome.log_start_offset == 10


def test_crash_between_retention_commit_and_file_deletion(tmp_path):
    cfg = topic(retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    code = (
        "from pathlib import Path; from storage.retention import enforce_retention; "
        "from validators.topic_config import TopicConfig; "
        f"enforce_retention(Path({str(tmp_path)!r}), 't', 0, TopicConfig(name='t', partitions=1, "
        f"segment_bytes={5 * SIZE}, retention_ms=-1, retention_bytes=0), {T0})"
    )
    env = {**os.environ, CRASH_ENV: "retention-committed"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 86, done.stderr
    d = partition_dir(tmp_path, "t", 0)
    assert segment_bases(d) == [0, 5, 10]  # files still there, commit record already without them
    assert [s.base_offset for s in read_commit(d).segments] == [10]
    with PartitionLog.open(tmp_path, "t", 0, cfg):
        pass
    assert segment_bases(d) == [10]
