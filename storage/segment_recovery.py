"""Recovering and truncating one segment: Kafka's `LogSegment.recover` and `LogSegment.truncateTo`, which
Kafka's `LogLoader` (here `storage.recovery`) and `UnifiedLog.truncateTo` (`PartitionLog.truncate_to`) drive.

- `recover`: rebuild the indexes from the log, validating each batch and truncating at the first invalid one;
- `rebuild_indexes`: the same for a log known to be good (index pages lost with the page cache);
- `rebuild_indexes_in_memory`: a reader's view of damaged indexes, the files left as they are;
- `truncate_to`: drop every batch from an offset on; `truncate_files_to`: every file back to a commit record.

They change a `LogSegment` through what it keeps for them (`truncate_log_to`, `reset_indexes`,
`restore_max_timestamp`); the append path stays in `LogSegment` alone.
"""

from __future__ import annotations

import logging

from storage.append_time_index import ENTRY_SIZE, AppendTimeEntry, AppendTimeIndex
from storage.file_records import BatchInfo, CorruptRecordError
from storage.offset_index import OffsetIndex
from storage.segment import LogSegment, LogSegmentOffsetOverflowError
from storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from validators.codec.record_batch import TimestampType, is_valid

log = logging.getLogger("gateway.segments")


class _IndexBuilder:
    """`LogSegment.recover`'s index step, batch by batch: the max timestamp so far, and an entry in both
    indexes whenever `validBytes - lastIndexEntry > index.interval.bytes`."""

    __slots__ = ("offset_index", "time_index", "interval", "max_ts", "valid_bytes", "last_index_entry")

    def __init__(self, segment: LogSegment) -> None:
        self.offset_index, self.time_index = segment.offset_index, segment.time_index
        self.interval = segment.config.index_interval_bytes
        self.max_ts = TimestampOffset(NO_TIMESTAMP, segment.base_offset)
        self.valid_bytes = self.last_index_entry = 0

    def add(self, batch: BatchInfo) -> None:
        if batch.max_timestamp > self.max_ts.timestamp:
            self.max_ts = TimestampOffset(batch.max_timestamp, batch.last_offset)
        if self.valid_bytes - self.last_index_entry > self.interval:
            self.offset_index.append(batch.last_offset, self.valid_bytes)
            self.time_index.maybe_append(self.max_ts.timestamp, self.max_ts.offset)
            self.last_index_entry = self.valid_bytes
        self.valid_bytes += batch.size


def _lat_or_unknown(batch: BatchInfo) -> int:
    """The append time `recover` gives a batch with no append-time entry: its LogAppendTime, else -1
    (unknown)."""
    return batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else -1


def recover(segment: LogSegment) -> int:
    """`LogSegment.recover`: rebuild the offset and time indexes from the log, validating each batch
    (size, CRC, offsets in range and in order) and truncating the file at the first invalid one.
    The append-time index keeps the entries of the surviving batches; a surviving batch with
    no entry gets its LogAppendTime (LAT batches) or -1 (unknown). It is rewritten only when that
    changes it: it is the one file nothing can rebuild. Returns the bytes truncated."""
    segment.require_writable()
    kept = segment.append_time_index.all_entries()
    kept_append_times = {e.last_offset: e.append_time for e in kept}
    segment.reset_indexes()
    index = _IndexBuilder(segment)
    append_times: list[AppendTimeEntry] = []
    previous_last_offset = segment.base_offset - 1
    try:
        for batch in segment.batches_from(0):
            data = segment.read_bytes(batch.position, batch.size)
            if not is_valid(data):
                raise CorruptRecordError(f"Record is corrupt (batch at position {batch.position} fails its CRC)")
            if batch.base_offset <= previous_last_offset or batch.last_offset < batch.base_offset:
                raise CorruptRecordError(
                    f"Batch at position {batch.position} has offsets [{batch.base_offset}, {batch.last_offset}] "
                    f"out of order after offset {previous_last_offset}"
                )
            segment.ensure_offset_in_range(batch.last_offset)
            index.add(batch)
            previous_last_offset = batch.last_offset
            append_time = kept_append_times.get(batch.last_offset, _lat_or_unknown(batch))
            append_times.append(AppendTimeEntry(append_time, batch.last_offset))
    except (CorruptRecordError, LogSegmentOffsetOverflowError) as e:
        log.warning("Found invalid messages in log segment %s at byte offset %d: %s",
                    segment.log_path, index.valid_bytes, e)
    if append_times == kept[: len(append_times)]:
        segment.append_time_index.truncate_to_entries(len(append_times))
    else:
        segment.append_time_index.truncate_to_entries(0)
        for entry in append_times:
            segment.append_time_index.append(entry.append_time, entry.last_offset)
    truncated = segment.size - index.valid_bytes
    if truncated > 0:
        log.warning("Truncating %s to %d bytes (%d invalid bytes)", segment.log_path, index.valid_bytes, truncated)
        segment.truncate_log_to(index.valid_bytes)
    segment.restore_max_timestamp(index.max_ts.timestamp, index.max_ts.offset)
    segment.on_become_inactive()
    return truncated


def rebuild_indexes(segment: LogSegment) -> None:
    """Recreate `.index` and `.timeindex` from the log, the way `recover` does, for index pages
    lost with the page cache (`storage.segment`): the log is durable up to its committed size and is
    not validated again, and the append-time index (fsynced with the log) is left as it is. The
    segment ends closed the Kafka way: final time-index entry, trimmed indexes."""
    segment.require_writable()
    segment.reset_indexes()
    index = _IndexBuilder(segment)
    for batch in segment.batches_from(0):
        index.add(batch)
    segment.restore_max_timestamp(index.max_ts.timestamp, index.max_ts.offset)
    segment.on_become_inactive()


def rebuild_indexes_in_memory(segment: LogSegment, append_times: bool) -> None:
    """A reader's view of damaged indexes: `.index` and `.timeindex` (and, with `append_times`, the
    `.appendtimeindex`) rebuilt from the log the way `recover` does, in memory only — the files
    are left as they are for the writer's recovery. Rebuilt append times are the batch's LogAppendTime
    or -1 (unknown), as in `recover`."""
    size = segment.config.segment_index_bytes
    segment.offset_index = OffsetIndex(segment.offset_index.path, segment.base_offset, size, in_memory=True)
    segment.time_index = TimeIndex(segment.time_index.path, segment.base_offset, size, in_memory=True)
    index = _IndexBuilder(segment)
    entries = []
    for batch in segment.batches_from(0):
        # recover's offset-range check: a header the log's damage made point outside the segment
        if not (segment.can_convert_to_relative_offset(batch.base_offset)
                and segment.can_convert_to_relative_offset(batch.last_offset)):
            raise CorruptRecordError(
                f"Found invalid batch in {segment.log_path} at byte offset {index.valid_bytes}: offsets "
                f"{batch.base_offset}..{batch.last_offset} are outside segment {segment.base_offset}"
            )
        index.add(batch)
        entries.append(AppendTimeEntry(_lat_or_unknown(batch), batch.last_offset))
    max_ts = index.max_ts
    segment.restore_max_timestamp(max_ts.timestamp, max_ts.offset)
    if max_ts.timestamp != NO_TIMESTAMP:
        segment.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
    if append_times:
        segment.append_time_index = AppendTimeIndex(segment.append_time_index.path, writable=False, entries=entries)


def truncate_to(segment: LogSegment, offset: int) -> int:
    """Kafka's `LogSegment.truncateTo(offset)`: drop every batch whose last offset is >= `offset` (a batch
    is kept or dropped whole); indexes truncated, their full capacity restored. Returns the bytes truncated."""
    segment.require_writable()
    mapping = segment.translate_offset(offset)
    segment.offset_index.truncate_to(offset)
    segment.time_index.truncate_to(offset)
    segment.append_time_index.truncate_to(offset)
    truncated = segment.truncate_log_to(mapping.position) if mapping is not None else 0
    segment.ensure_full_capacity()
    segment.load_largest_timestamp()
    return truncated


def truncate_files_to(
    segment: LogSegment, log_size: int, index_size: int, time_size: int, append_size: int,
) -> int:
    """Cut every file back to a committed size (the gateway's commit record) and leave the indexes
    trimmed, as a closed segment's. Returns the log bytes cut."""
    segment.require_writable()
    segment.write_pending()
    truncated = segment.truncate_log_to(log_size)
    segment.offset_index.truncate_to_entries(index_size // segment.offset_index.entry_size)
    segment.time_index.truncate_to_entries(time_size // segment.time_index.entry_size)
    segment.append_time_index.truncate_to_entries(append_size // ENTRY_SIZE)
    segment.offset_index.trim_to_valid_size()
    segment.time_index.trim_to_valid_size()
    return truncated
