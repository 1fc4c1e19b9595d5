"""The retention schedule (Kafka's `kafka-log-retention` task, `UnifiedLog.deleteRetentionMsBreachedSegments`): passes over a real
segment directory, ticks triggered directly with `run_once(now)`, the thread's lifecycle, the exporter's
counters, and retention running against a concurrent appender process."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sinks.metrics.gateway_metrics import GatewayMetrics
from storage.batch_appender import append_batches
from storage.commit_record import read_commit
from storage.file_names import partition_dir, segment_bases, segment_file_name
from storage.log_reader import EARLIEST_TIMESTAMP, offsets_for_times, read
from storage.partition_log import PartitionLog
from storage.retention import (
    REASON_RETENTION_BYTES,
    REASON_RETENTION_MAX_EVENTTIME_MS,
    REASON_RETENTION_MS,
)
from storage.verify import verify_partition
from streaming.retention_schedule import RetentionSchedule, metric_reason
from tests.unit.test_segment import T0, make_batch
from validators.codec.record_batch import TimestampType
from validators.topic_config import TopicConfig, TopicRegistry

REPO = Path(__file__).resolve().parents[2]
HOUR = 3600 * 1000
SIZE = len(make_batch(0, [10]))


def topic(name: str, **kw) -> TopicConfig:
    # 5 single-record batches per segment, no retention unless asked
    return TopicConfig(**{"name": name, "partitions": 1, "segment_bytes": 5 * SIZE, "retention_ms": -1, **kw})


def fill(root: Path, cfg: TopicConfig, timestamps: list[int], *, lat_times: list[int] | None = None,
         batch_id: int = 0, start: int = 0, partition: int = 0) -> None:
    items = []
    for i, ts in enumerate(timestamps):
        o = start + i
        lat = lat_times[i] if lat_times else None
        items.append((o, o, make_batch(o, [ts], lat_time=lat), lat if lat else T0 + o))
    append_batches(root, cfg.name, partition, batch_id, items, cfg)


@pytest.fixture
def metrics() -> Iterator[GatewayMetrics]:
    """An exporter's metrics, given to the schedule (it counts its deletions into them)."""
    yield GatewayMetrics({"size": 1, "time": 1, "event": 1})


def deleted_metric(m: GatewayMetrics, topic_name: str, reason: str, kind: str = "segments") -> float:
    value = m.registry.get_sample_value(f"gateway_retention_deleted_{kind}_total",
                                        {"topic": topic_name, "reason": metric_reason(reason)})
    return 0.0 if value is None else value


def test_ticks_delete_by_size_time_and_event_time(tmp_path, metrics):
    size = topic("size", retention_bytes=10 * SIZE)
    time_ = topic("time", retention_ms=24 * HOUR)
    event = topic("event", retention_max_eventtime_ms=9 * HOUR + 1, retention_ms=7 * 24 * HOUR,
                  message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    fill(tmp_path, size, [T0] * 15)
    fill(tmp_path, time_, [T0 - 2 * HOUR] * 5 + [T0] * 10)
    fill(tmp_path, event, [T0 - 10 * HOUR] * 5 + [T0 - 9 * HOUR] * 5 + [T0] * 5,
         lat_times=[T0 + i for i in range(15)])
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"size": size, "time": time_, "event": event}), metrics=metrics)

    first = schedule.run_once(now_ms=T0 + HOUR)  # nothing is a day old yet
    assert first.now_ms == T0 + HOUR and first.busy == ()
    assert first.deleted_by_reason() == {REASON_RETENTION_BYTES: 1, REASON_RETENTION_MAX_EVENTTIME_MS: 1}
    assert segment_bases(partition_dir(tmp_path, "time", 0)) == [0, 5, 10]

    second = schedule.run_once(now_ms=T0 + 22 * HOUR + 1)  # the first "time" segment is 24 h + 1 ms old
    assert second.deleted_by_reason() == {REASON_RETENTION_MS: 1}
    assert segment_bases(partition_dir(tmp_path, "time", 0)) == [5, 10]
    assert offsets_for_times(tmp_path, "time", 0, EARLIEST_TIMESTAMP).offset == 5

    assert schedule.run_once(now_ms=T0 + 22 * HOUR + 2).deleted_segments == 0  # the rest is a day younger
    assert schedule.passes == 3 and schedule.failed_passes == 0
    assert schedule.deleted_segments == {("size", REASON_RETENTION_BYTES): 1, ("event", REASON_RETENTION_MAX_EVENTTIME_MS): 1,
                                         ("time", REASON_RETENTION_MS): 1}
    assert schedule.deleted_bytes == {k: 5 * SIZE for k in schedule.deleted_segments}
    for (name, reason), n in schedule.deleted_segments.items():  # the exporter's counters, by reason
        assert deleted_metric(metrics, name, reason) == n
        assert deleted_metric(metrics, name, reason, "bytes") == 5 * SIZE
    assert deleted_metric(metrics, "size", REASON_RETENTION_MS) == 0
    # the log start offset that retention moved reaches its gauge (the stage's rows never see it)
    assert metrics.registry.get_sample_value("gateway_log_start_offset", {"topic": "time", "partition": "0"}) == 5


def test_busy_partition_is_left_for_the_next_tick(tmp_path):
    """A partition an append holds for the whole of the pass's retries is left for the next pass."""
    cfg = topic("t", retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}), busy_retry_ms=0)
    with PartitionLog.open(tmp_path, "t", 0, cfg):  # an append holds the partition lock
        skipped = schedule.run_once(now_ms=T0)
    assert skipped.busy == (("t", 0),) and skipped.deleted_segments == 0 and skipped.retried == 0
    assert schedule.run_once(now_ms=T0).deleted_segments == 2
    assert schedule.busy_skips == 1
    assert read_commit(partition_dir(tmp_path, "t", 0)).log_start_offset == 10


def test_busy_partition_is_retried_within_the_pass(tmp_path, monkeypatch):
    """A partition whose append lets go of its lock while the pass retries gets its retention in that pass: a
    partition appended in nearly every micro-batch is not left pass after pass."""
    from streaming import retention_schedule

    cfg = topic("t", retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}))
    held = PartitionLog.open(tmp_path, "t", 0, cfg)  # an append holds the partition lock at the pass's sweep
    real = retention_schedule.enforce_retention
    retries: list[int] = []

    def append_done_then_retry(*args, **kwargs):
        retries.append(args[2])
        held.close()  # the micro-batch's commit is done: its lock released
        return real(*args, **kwargs)

    monkeypatch.setattr(retention_schedule, "enforce_retention", append_done_then_retry)
    result = schedule.run_once(now_ms=T0)
    assert retries == [0]
    assert (result.busy, result.retried, result.deleted_segments) == ((), 1, 2)
    assert schedule.busy_skips == 0
    assert read_commit(partition_dir(tmp_path, "t", 0)).log_start_offset == 10


def test_a_stopped_schedule_does_not_retry(tmp_path):
    """`stop()` ends a pass's retries: the busy partition is left at once."""
    cfg = topic("t", retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}), busy_retry_ms=600_000)
    schedule.stop()
    with PartitionLog.open(tmp_path, "t", 0, cfg):
        result = schedule.run_once(now_ms=T0)
    assert result.busy == (("t", 0),) and result.retried == 0


def test_registry_source_is_read_every_pass(tmp_path):
    """A reloaded registry (the gateway passes `RegistryWatcher.current`) applies from the next pass."""
    kept = topic("t")
    fill(tmp_path, kept, [T0] * 12)
    current = {"registry": TopicRegistry({"t": kept})}
    schedule = RetentionSchedule(tmp_path, lambda: current["registry"])
    assert schedule.run_once(now_ms=T0).deleted_segments == 0
    current["registry"] = TopicRegistry({"t": topic("t", retention_bytes=0)})
    assert schedule.run_once(now_ms=T0).deleted_segments == 2


def test_thread_runs_passes_every_interval_and_stops(tmp_path):
    cfg = topic("t", retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}), interval_ms=10, initial_delay_ms=0,
                                 clock=lambda: T0, name="test-retention")
    assert schedule.initial_delay_ms == 0 and not schedule.running
    schedule.start()
    with pytest.raises(RuntimeError, match="already started"):
        schedule.start()
    assert schedule.wait_for_passes(3, timeout_s=60)
    schedule.stop()
    assert not schedule.running
    assert not [t for t in threading.enumerate() if t.name == "test-retention"], "no orphan thread"
    done = schedule.passes
    assert schedule.last_pass is not None and schedule.last_pass.now_ms == T0
    assert schedule.deleted_segments == {("t", REASON_RETENTION_BYTES): 2}  # the first pass; the rest found nothing
    schedule.stop()  # idempotent
    assert schedule.passes == done


def test_a_failed_pass_does_not_end_the_schedule(tmp_path):
    cfg = topic("t", retention_bytes=0)
    fill(tmp_path, cfg, [T0] * 12)
    calls = {"n": 0}

    def flaky() -> TopicRegistry:
        calls["n"] += 1
        if calls["n"] <= 2:  # the startup repair and the first pass
            raise OSError("topic registry on a storage that hiccups")
        return TopicRegistry({"t": cfg})

    schedule = RetentionSchedule(tmp_path, flaky, interval_ms=10, initial_delay_ms=0, clock=lambda: T0).start()
    try:
        assert schedule.wait_for_passes(1, timeout_s=60)
    finally:
        schedule.stop()
    assert schedule.failed_passes == 1
    assert schedule.deleted_segments == {("t", REASON_RETENTION_BYTES): 2}


def test_default_delays_and_interval_validation(tmp_path):
    registry = TopicRegistry({})
    assert RetentionSchedule(tmp_path, registry).interval_ms == 300000  # log.retention.check.interval.ms
    assert RetentionSchedule(tmp_path, registry).initial_delay_ms == 30000  # log.initial.task.delay.ms
    assert RetentionSchedule(tmp_path, registry, interval_ms=1000).initial_delay_ms == 1000
    with pytest.raises(ValueError, match="log.retention.check.interval.ms"):
        RetentionSchedule(tmp_path, registry, interval_ms=0)


def test_startup_pass_rebuilds_indexes_a_crash_damaged(tmp_path):
    """Commits do not fsync indexes (partition_log); the thread's first act is Kafka's startup recovery."""
    cfg = TopicConfig(name="t", partitions=2, index_interval_bytes=150, retention_ms=-1)
    for batch_id in range(3):
        fill(tmp_path, cfg, [T0 + 10 * (batch_id * 10 + i) for i in range(10)], batch_id=batch_id, start=batch_id * 10)
    expected = [offsets_for_times(tmp_path, "t", 0, T0 + t) for t in range(0, 300, 13)]
    time_index = partition_dir(tmp_path, "t", 0) / segment_file_name(0, ".timeindex")
    assert time_index.stat().st_size >= 24
    time_index.write_bytes(bytes(time_index.stat().st_size))  # the page never reached the disk
    assert not verify_partition(tmp_path, "t", 0, index_interval_bytes=150).ok
    # readers stay right meanwhile: the committed max timestamp, a scan where the index says nothing
    assert [offsets_for_times(tmp_path, "t", 0, T0 + t) for t in range(0, 300, 13)] == expected

    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}), interval_ms=10, initial_delay_ms=0,
                                 clock=lambda: T0).start()
    try:
        assert schedule.wait_for_passes(1, timeout_s=60)
    finally:
        schedule.stop()
    assert schedule.indexes_rebuilt == 1  # partition 1 has no directory: nothing to do there
    assert [offsets_for_times(tmp_path, "t", 0, T0 + t) for t in range(0, 300, 13)] == expected
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=150).ok
    assert not partition_dir(tmp_path, "t", 1).exists()


WRITER = """
import sys
from pathlib import Path
from tests.unit.test_retention_schedule import T0, make_batch
from storage.batch_appender import append_batches
from validators.topic_config import TopicConfig
root, size, micro_batches = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = TopicConfig(name="t", partitions=1, segment_bytes=5 * size, retention_ms=-1, retention_bytes=20 * size)
offset = 0
for mb in range(micro_batches):
    items = []
    for i in range(3):
        items.append((offset, offset, make_batch(offset, [T0 + offset]), T0 + offset))
        offset += 1
    append_batches(root, "t", 0, mb, items, cfg)
"""


def test_retention_beside_a_concurrent_appender_process(tmp_path):
    """An appender process writes while the schedule's passes run back to back (the partition lock
    keeps them apart): the log stays contiguous and verifiable, retention deletes as it goes."""
    micro_batches = 150
    cfg = topic("t", retention_bytes=20 * SIZE)
    schedule = RetentionSchedule(tmp_path, TopicRegistry({"t": cfg}))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(SIZE), str(micro_batches)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True)
    passes = 0
    while writer.poll() is None:
        schedule.run_once(now_ms=T0)
        passes += 1
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    schedule.run_once(now_ms=T0)
    d = partition_dir(tmp_path, "t", 0)
    commit = read_commit(d)
    assert commit.log_end_offset == micro_batches * 3
    assert schedule.deleted_segments[("t", REASON_RETENTION_BYTES)] >= 80 and passes > 1
    assert commit.log_start_offset == segment_bases(d)[0] > 0
    assert sum(s.log_size for s in commit.segments) <= 25 * SIZE  # retention.bytes + the active segment
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=cfg.index_interval_bytes).ok
    records = read(tmp_path, "t", 0, commit.log_start_offset, 10_000)
    assert [r.offset for r in records] == list(range(commit.log_start_offset, commit.log_end_offset))
