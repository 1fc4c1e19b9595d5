"""Rolling through PartitionLog — Kafka's UnifiedLogTest roll cases (`LogSegment.shouldRoll`; Kafka's `UnifiedLogTest`). The mock clock
is the batches' append time, exactly what the gateway passes."""

from __future__ import annotations

from storage.file_names import partition_dir, segment_bases
from storage.log_config import SegmentConfig, roll_jitter_ms
from storage.partition_log import PartitionLog
from tests.unit.test_segment import T0, make_batch
from validators.topic_config import TopicConfig

SEGMENT_MS = 1 * 60 * 60  # 3600 ms, as the Kafka test (hours written as ms)


def test_time_based_log_roll_during_append(tmp_path):
    cfg = SegmentConfig(segment_ms=SEGMENT_MS)
    now = T0
    with PartitionLog.open(tmp_path, "t", 0, cfg, now_ms=now) as plog:
        def append(ts: int) -> None:
            plog.append(make_batch(plog.log_end_offset, [ts]), now)

        def n_segments() -> int:
            return len(plog.segments())

        now += SEGMENT_MS + 1
        append(-1)
        assert n_segments() == 1, "no roll on the first append: the segment is empty"
        append(-1)
        assert n_segments() == 2, "wall clock: created at log creation, now > segment.ms later"
        for expected in (3, 4):
            now += SEGMENT_MS + 1
            append(-1)
            assert n_segments() == expected
        t0 = now + SEGMENT_MS + 1
        append(t0)
        assert n_segments() == 4, "first batch has no timestamp and the segment was just created"
        now += SEGMENT_MS + 1
        append(t0)
        assert n_segments() == 5, "wall clock rule fires; the new segment's first batch has a timestamp"
        now += SEGMENT_MS + 1
        append(t0)
        assert n_segments() == 5, "event time rule: t0 - t0 = 0, the wall clock is ignored"
        append(now)
        assert n_segments() == 6, "event time: incoming max timestamp - first batch's > segment.ms"


def test_time_based_log_roll_jitter(tmp_path):
    max_jitter = 20 * 60
    cfg = SegmentConfig(segment_ms=SEGMENT_MS, segment_jitter_ms=max_jitter)
    jitter = roll_jitter_ms("t", 0, 0, cfg)
    assert 0 <= jitter < max_jitter and jitter == roll_jitter_ms("t", 0, 0, cfg)  # deterministic
    now = T0
    with PartitionLog.open(tmp_path, "t", 0, cfg, now_ms=now) as plog:
        plog.append(make_batch(0, [now]), now)
        assert plog.active.roll_jitter_ms == jitter
        now += SEGMENT_MS - max_jitter
        plog.append(make_batch(1, [now]), now)
        assert len(plog.segments()) == 1, "earlier than the max jitter"
        now += max_jitter - jitter + 1
        plog.append(make_batch(2, [now]), now)
        assert len(plog.segments()) == 2


def test_jitter_differs_across_partitions_and_segments():
    cfg = SegmentConfig(segment_ms=10**9, segment_jitter_ms=10**6)
    values = {roll_jitter_ms("t", p, b, cfg) for p in range(4) for b in (0, 100, 200)}
    assert len(values) > 6
    assert roll_jitter_ms("t", 0, 0, SegmentConfig(segment_jitter_ms=0)) == 0


def test_size_based_log_roll(tmp_path):
    set_size = len(make_batch(0, [T0]))
    cfg = SegmentConfig(segment_bytes=10 * (set_size - 1))
    with PartitionLog.open(tmp_path, "t", 0, cfg) as plog:
        for i in range(11):
            plog.append(make_batch(i, [T0]), T0)
        assert len(plog.segments()) == 2
        assert [s.base_offset for s in plog.segments()] == [0, 9]


def test_append_with_no_timestamp(tmp_path):
    with PartitionLog.open(tmp_path, "t", 0) as plog:
        plog.append(make_batch(0, [-1]), T0)
        plog.commit(0)
    assert plog.log_end_offset == 1


def test_build_time_index_when_appending(tmp_path):
    cfg = SegmentConfig(index_interval_bytes=1)
    with PartitionLog.open(tmp_path, "t", 0, cfg) as plog:
        for i in range(100):
            plog.append(make_batch(i, [T0 + i]), T0 + i)
        # no entry for the first batch (0 bytes since the segment start), then one per batch
        assert plog.active.time_index.entries == 99
        assert plog.active.time_index.last_entry.timestamp == T0 + 99
        plog.commit(0)  # close: the final entry (max so far) is already there, equal -> skipped
        assert plog.active.time_index.entries == 99


def test_roll_when_offset_index_full(tmp_path):
    cfg = SegmentConfig(index_interval_bytes=0, segment_index_bytes=4 * 8)
    with PartitionLog.open(tmp_path, "t", 0, cfg) as plog:
        for i in range(12):
            plog.append(make_batch(i, [T0 + i]), T0 + i)
        plog.commit(0)
        bases = [s.base_offset for s in plog.segments()]
    # 4 offset-index slots; the time index (2 slots, one kept for the final entry) fills first
    assert len(bases) > 2
    for base in bases:
        assert (partition_dir(tmp_path, "t", 0) / f"{base:020d}.index").stat().st_size <= 4 * 8


def test_roll_trims_old_segment_and_commit_lists_segments(tmp_path):
    size = len(make_batch(0, [T0]))
    cfg = SegmentConfig(segment_bytes=3 * size, index_interval_bytes=0, segment_index_bytes=1024)
    with PartitionLog.open(tmp_path, "t", 0, cfg) as plog:
        for i in range(7):
            plog.append(make_batch(i, [T0 + i]), T0 + i)
        commit = plog.commit(5).record(partition_dir(tmp_path, "t", 0))
    d = partition_dir(tmp_path, "t", 0)
    assert segment_bases(d) == [0, 3, 6]
    assert [s.base_offset for s in commit.segments] == [0, 3, 6]
    for s in commit.segments:
        assert (d / f"{s.base_offset:020d}.index").stat().st_size == s.index_size
        assert (d / f"{s.base_offset:020d}.timeindex").stat().st_size == s.time_index_size
        assert (d / f"{s.base_offset:020d}.log").stat().st_size == s.log_size
    assert commit.segments[1].created_ms == T0 + 3  # the append time of the batch that rolled


def test_topic_config_is_used(tmp_path):
    topic = TopicConfig(name="t", partitions=1, segment_bytes=500, index_interval_bytes=10)
    with PartitionLog.open(tmp_path, "t", 0, topic) as plog:
        assert plog.config.segment_bytes == 500 and plog.config.index_interval_bytes == 10
