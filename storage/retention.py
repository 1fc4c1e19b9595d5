"""Retention of segment storage: `retention.ms`, `retention.bytes` and KIP-870 `retention.max.eventtime.ms`.

`enforce_retention` is one pass over one partition; the caller runs it on a schedule
(`log.retention.check.interval.ms`, default 300000, `UnifiedLog.deleteRetentionMsBreachedSegments`). Kafka's rules (`UnifiedLog`):
- segments are judged oldest first and deletion stops at the first segment that is not deletable
  (prefix rule); the gateway never deletes the active (last) segment (docs/design.md: segment storage) — committed data is
  all below the high watermark, the gateway being the only replica;
- order of the passes as `deleteOldSegments()`: size (`deleteRetentionSizeBreachedSegments`), then
  time (`deleteRetentionMsBreachedSegments`), then event time (KIP-870);
- time: deletable iff `now - largestTimestamp > retention.ms` (strict), `largestTimestamp` = the largest
  record timestamp of the segment, or the `.log` mtime when it has none; a segment with a timestamp in the
  future is logged at WARN (`LogFutureTimestampLogger`) and, being ineligible, blocks all newer ones;
- size: `diff = size - retention.bytes` when the log is at least that big; delete while
  `diff - segment.size >= 0`;
- event time (KIP-870, never implemented by Kafka, KIP-870): deletable iff
  `partition max event time - segment max event time > retention.max.eventtime.ms`. Event time is the
  records' CreateTime from the record deltas, also on LogAppendTime topics (where the header's
  maxTimestamp is the append time): `baseTimestamp + max(timestampDelta)`. A segment with no event time
  (only records without timestamp) is not deletable by this rule.
The log start offset moves to the base offset of the first retained segment. The partition lock keeps a
concurrent append out; the new commit record is written before any file is removed, so a crash between
the two leaves files that the next open deletes (they are no longer in the commit record).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from storage.commit_record import SegmentState, read_commit_head, recovery_marked, write_commit
from storage.crash_point import crash_point
from storage.file_names import (
    delete_segment_files,
    partition_dir,
    segment_file_name,
)
from storage.log_config import SegmentConfig
from storage.log_reader import batch_records
from storage.partition_lock import PartitionLock
from storage.recovery import recover_partition
from storage.segment import LogSegment
from validators.codec.record_batch import TimestampType
from validators.topic_config import TopicConfig, TopicRegistry

log = logging.getLogger("gateway.retention")
future_timestamp_log = logging.getLogger("LogFutureTimestampLogger")

REASON_RETENTION_MS = "retention.ms"
REASON_RETENTION_BYTES = "retention.bytes"
REASON_RETENTION_MAX_EVENTTIME_MS = "retention.max.eventtime.ms"
LOG_RETENTION_CHECK_INTERVAL_MS = 300000  # log.retention.check.interval.ms default


@dataclass(frozen=True, slots=True)
class DeletedSegment:
    base_offset: int
    next_offset: int  # base offset of the next segment
    size: int
    reason: str
    largest_timestamp: int  # the value the rule compared (timestamp, or event time for KIP-870)


@dataclass(frozen=True)
class RetentionReport:
    topic: str
    partition: int
    deleted: tuple[DeletedSegment, ...]
    log_start_offset: int
    log_end_offset: int
    warnings: tuple[str, ...] = ()

    def deleted_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.deleted:
            out[d.reason] = out.get(d.reason, 0) + 1
        return out


def _segment_max_event_time(directory: Path, state: SegmentState) -> int:
    """Largest CreateTime of the segment's records: header maxTimestamp for CreateTime batches; for
    LogAppendTime batches `baseTimestamp + max(timestampDelta)` from the records (decompressed)."""
    segment = LogSegment(directory, state.base_offset, SegmentConfig(), writable=False, committed=state)
    try:
        best = -1
        for batch in segment.batches_from(0):
            if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
                records = batch_records(segment.read_bytes(batch.position, batch.size))
                event = max((r.create_time for r in records), default=-1)
            else:
                event = batch.max_timestamp
            best = max(best, event)
        return best
    finally:
        segment.close()


_event_time_cache: dict[tuple[str, int, int], int] = {}


def segment_max_event_time(directory: Path, state: SegmentState) -> int:
    """Cached per (directory, base offset, committed size): an inactive segment never changes."""
    key = (str(directory), state.base_offset, state.log_size)
    if key not in _event_time_cache:
        _event_time_cache[key] = _segment_max_event_time(directory, state)
    return _event_time_cache[key]


def enforce_retention(
    root: Path, topic: str, partition: int, config: TopicConfig, now_ms: int, *, blocking: bool = True
) -> RetentionReport | None:
    """One retention pass over a partition (module docstring). Returns None when the partition has no
    directory or (with `blocking=False`) its lock is held by an append."""
    directory = partition_dir(root, topic, partition)
    if not directory.is_dir():
        return None
    lock = PartitionLock(directory)
    if not lock.acquire(blocking=blocking):
        return None
    try:
        head = recover_partition(directory, SegmentConfig.from_topic(config), read_commit_head(directory)).head
        commit = None if head is None else head.record(directory)
        if commit is None or not commit.segments:
            return RetentionReport(topic, partition, (), 0, 0)
        if "delete" not in config.cleanup_policy:  # compact-only: no size/time retention
            return RetentionReport(topic, partition, (), commit.log_start_offset, commit.log_end_offset)
        segments = list(commit.segments)
        warnings: list[str] = []
        deleted = [
            *_breached_retention_bytes(segments, config.retention_bytes),
            *_breached_retention_ms(directory, f"{topic}-{partition}", segments, config.retention_ms, now_ms, warnings),
            *_breached_max_eventtime(directory, segments, config.retention_max_eventtime_ms),
        ]
        if not deleted:
            return RetentionReport(topic, partition, (), commit.log_start_offset, commit.log_end_offset,
                                   tuple(warnings))
        new_start = max(commit.log_start_offset, segments[0].base_offset)
        with recovery_marked(directory):  # a crash before the files are gone leaves them for the next recovery
            write_commit(directory, replace(commit, segments=tuple(segments), log_start_offset=new_start))
            crash_point("retention-committed")
            for d in deleted:
                delete_segment_files(directory, d.base_offset)
        return RetentionReport(topic, partition, tuple(deleted), new_start, commit.log_end_offset, tuple(warnings))
    finally:
        lock.release()


# Each rule below removes the segments it deletes from the front of `segments` (never the active,
# last one) and returns them; they run in Kafka's order on what the previous rule left.


def _breached_retention_bytes(segments: list[SegmentState], retention_bytes: int) -> list[DeletedSegment]:
    """retention.bytes: the total includes the active segment."""
    deleted: list[DeletedSegment] = []
    total = sum(s.log_size for s in segments)
    if retention_bytes < 0 or total < retention_bytes:
        return deleted
    diff = total - retention_bytes
    while len(segments) > 1 and diff - segments[0].log_size >= 0:
        diff -= segments[0].log_size
        s = segments.pop(0)
        deleted.append(DeletedSegment(s.base_offset, segments[0].base_offset, s.log_size, REASON_RETENTION_BYTES, -1))
    return deleted


def _breached_retention_ms(
    directory: Path, tp: str, segments: list[SegmentState], retention_ms: int, now_ms: int, warnings: list[str]
) -> list[DeletedSegment]:
    """retention.ms against each segment's largest record timestamp; a segment with future
    timestamps is kept, with Kafka's warning."""
    deleted: list[DeletedSegment] = []
    while retention_ms >= 0 and len(segments) > 1:
        s = segments[0]
        largest = _largest_timestamp(directory, s)
        if now_ms < largest:
            message = (f"{tp} segment {segment_file_name(s.base_offset)} contains future timestamp(s), making it "
                       "ineligible to be deleted")
            future_timestamp_log.warning(message)
            warnings.append(message)
        if not now_ms - largest > retention_ms:
            break
        segments.pop(0)
        log.info("Deleting segment %s of %s due to log retention time %dms breach based on the largest record "
                 "timestamp in the segment", segment_file_name(s.base_offset), tp, retention_ms)
        deleted.append(DeletedSegment(s.base_offset, segments[0].base_offset, s.log_size, REASON_RETENTION_MS, largest))
    return deleted


def _breached_max_eventtime(directory: Path, segments: list[SegmentState], max_eventtime_ms: int) -> list[DeletedSegment]:
    """KIP-870 retention.max.eventtime.ms: segments whose max event time is that far behind the partition's."""
    if max_eventtime_ms < 0 or len(segments) < 2:
        return []
    event_times = [segment_max_event_time(directory, s) for s in segments]
    partition_max = max(event_times)
    i = 0
    while i < len(segments) - 1 and event_times[i] >= 0 and partition_max - event_times[i] > max_eventtime_ms:
        i += 1
    deleted = [
        DeletedSegment(segments[k].base_offset, segments[k + 1].base_offset, segments[k].log_size,
                       REASON_RETENTION_MAX_EVENTTIME_MS, event_times[k])
        for k in range(i)
    ]
    del segments[:i]
    return deleted


def _largest_timestamp(directory: Path, state: SegmentState) -> int:
    segment = LogSegment(directory, state.base_offset, SegmentConfig(), writable=False, committed=state)
    try:
        return segment.largest_timestamp()
    finally:
        segment.close()


def enforce_retention_all(
    root: Path, registry: TopicRegistry, now_ms: int, topics: Iterable[str] | None = None
) -> list[RetentionReport]:
    """One pass over every partition directory of the registry's topics (the scheduled task's body).
    Busy partitions (an append holds the lock) are skipped until the next pass."""
    reports = []
    for name in topics if topics is not None else sorted(registry.topics):
        config = registry.get(name)
        if config is None:
            continue
        for partition in range(config.partitions):
            report = enforce_retention(root, name, partition, config, now_ms, blocking=False)
            if report is not None:
                reports.append(report)
    return reports
