"""One Kafka log segment: `<base>.log` + `.index` + `.timeindex`, plus the gateway's `.appendtimeindex`.

Kafka's `LogSegment.java` semantics (Kafka's `LogFileUtils`; `LogSegment.shouldRoll`):
- `append`: batches written back to back; per batch, an offset-index entry (batch last offset -> batch
  start position) and a time-index entry (max timestamp so far, last offset of the first batch reaching
  it) when the bytes since the last index entry are strictly more than `index.interval.bytes`;
- `should_roll`: segment.bytes, segment.ms (+ jitter) with the event-time rule, full indexes, relative
  offset overflow;
- `on_become_inactive` / `close`: final time-index entry and indexes trimmed to their valid size.
Kafka's `LogSegment.recover` and `LogSegment.truncateTo`, which Kafka's `LogLoader` drives, are in
`storage.segment_recovery`; the segment keeps what they change (`truncate_log_to`, `reset_indexes`).

Durability (`flush`): Kafka never relies on its indexes surviving a crash — `LogLoader` rebuilds them
from the log (Kafka's `LogLoader`, `LogSegment.recover`) — so a commit fsyncs the `.log` and the `.appendtimeindex` only (the append
times of CreateTime batches are in no Kafka file, so nothing could rebuild them). `.index`/`.timeindex` are
fsynced when a segment rolls (as Kafka flushes a rolled segment). For the active segment the commit
record keeps a CRC-32 of each index's valid bytes (`index_checksums`); a mismatch when the segment is next
opened means index pages were lost with the page cache, and `segment_recovery.rebuild_indexes` recreates
them from the log.

The wall clock of the gateway is the batch's append time (docs/design.md: what the stage decides), never the host clock, so a replayed
micro-batch rolls and indexes exactly as the first run did.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage.append_time_index import AppendTimeIndex
from storage.commit_record import SegmentState
from storage.crash_point import crash_point
from storage.file_names import (
    APPEND_TIME_INDEX_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    segment_file_name,
)
from storage.file_records import BatchInfo, Write, iter_file_batches, split_batches, write_at
from storage.index import INT32_MAX, CorruptIndexError
from storage.log_config import SegmentConfig
from storage.offset_index import OffsetIndex
from storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from storage.writeback import start_writeback
from validators.codec.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatchHeader,
)

PENDING_LIMIT = 1 << 20  # appended bytes held before they are written out (bounded memory per segment)
# What a run of appends reads of a v2 batch header: baseOffset, batchLength, magic, lastOffsetDelta,
# maxTimestamp (DefaultRecordBatch's layout: bytes 0, 8, 16, 23, 35).
_RUN_HEADER = struct.Struct(">qi4xb6xi8xq")


class LogSegmentOffsetOverflowError(ValueError):
    """Kafka's `LogSegmentOffsetOverflowException`: last offset - base does not fit an int32."""


@dataclass(frozen=True, slots=True)
class RollParams:
    """`RollParams`: what `shouldRoll` looks at for one incoming append."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class LogSegment:
    """A segment open for reading, or (the active one) for appending (Kafka's `LogSegment`)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: SegmentConfig,
        *,
        created_ms: int = -1,
        roll_jitter_ms: int = 0,
        writable: bool = True,
        full_capacity: bool = True,
        committed: SegmentState | None = None,
    ) -> None:
        """`committed`: the segment's state in its commit record. Its sizes limit each file to the committed
        prefix, so readers never see an append in progress; its tails are the index entries the record carries
        beyond what the files hold; a writer takes its CRC of the valid `.appendtimeindex` bytes instead of
        reading them (`AppendTimeIndex`)."""
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        self.writable = writable
        log_size, index_size, time_size, append_size = committed.sizes if committed else (None, None, None, None)
        tails = committed.tails if committed else (b"", b"", b"")
        append_time_crc = committed.append_time_index_crc if committed and writable else None
        self.log_path = self.directory / segment_file_name(base_offset, LOG_FILE_SUFFIX)
        max_index = config.segment_index_bytes if (writable and full_capacity) else -1
        if writable:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        else:
            self._fd = os.open(self.log_path, os.O_RDONLY)
        file_size = os.fstat(self._fd).st_size
        self._size = file_size if log_size is None else min(file_size, log_size)
        self._synced_size = -1  # the `.log` size the last `flush` made durable
        index_kwargs = {"writable": writable, "max_index_size": max(max_index, config.segment_index_bytes)}
        self.offset_index = OffsetIndex(
            self.directory / segment_file_name(base_offset, INDEX_FILE_SUFFIX), base_offset,
            valid_size=index_size, tail=tails[0], **index_kwargs,
        )
        self.time_index = TimeIndex(
            self.directory / segment_file_name(base_offset, TIME_INDEX_FILE_SUFFIX), base_offset,
            valid_size=time_size, tail=tails[1], **index_kwargs,
        )
        self.append_time_index = AppendTimeIndex(
            self.directory / segment_file_name(base_offset, APPEND_TIME_INDEX_SUFFIX), writable=writable,
            valid_size=append_size, committed_crc=append_time_crc, tail=tails[2],
        )
        self._full_capacity = False
        if writable and full_capacity:
            self.ensure_full_capacity()
        # maxTimestampAndOffsetSoFar, lazily the time index's last entry
        self._max_ts_and_offset: TimestampOffset | None = None
        self._rolling_based_timestamp: int | None = None  # first batch's max timestamp, loaded lazily
        # Appended bytes not yet in the file, from file position `_pending_at`: one `pwrite` per commit
        # (or per PENDING_LIMIT bytes) instead of one per batch. Nothing reads the file past the last
        # commit record, and every read in this class writes them first.
        self._pending: list[bytes] = []
        self._pending_at = 0
        self._pending_bytes = 0
        # Called once before the first appended bytes reach the `.log`: a new partition's log makes its first
        # commit record durable there (`PartitionLog.open`), no sooner
        self.before_first_write: Callable[[], None] | None = None

    # ------------------------------------------------------------------ state

    @property
    def size(self) -> int:
        """Bytes of the `.log` file (`log.sizeInBytes()`)."""
        return self._size

    @property
    def log_fd(self) -> int:
        """The `.log`'s descriptor: its length on disk, past `size` where another writer appended and did not commit,
        is looked at when a kept log is taken up (`storage.batched_calls.resume_all`)."""
        return self._fd

    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.offset

    @property
    def bytes_since_last_index_entry(self) -> int:
        """Derived from the index entries (the file's and the commit record's tail), so it survives a reopen: what a
        broker that never restarted would hold.
        (Kafka keeps it in memory only; its `recover` rebuilds with the same arithmetic.)"""
        return self._size - self.offset_index.last_position

    def largest_timestamp(self) -> int:
        """`largestTimestamp()`: max record timestamp if any, else the `.log` file's mtime."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.fstat(self._fd).st_mtime * 1000)

    def sizes(self) -> tuple[int, int, int, int]:
        """Valid bytes of (log, index, timeindex, appendtimeindex): what a commit record keeps."""
        return (self._size, self.offset_index.size_in_bytes, self.time_index.size_in_bytes,
                self.append_time_index.size_in_bytes)

    def index_checksums(self) -> tuple[int, int]:
        """CRC-32 of the valid bytes of the `.index` and `.timeindex` (what the commit record keeps for the
        active segment, whose indexes are not fsynced at commit)."""
        return self.offset_index.checksum(), self.time_index.checksum()

    def indexes_match(self, index_crc: int | None, time_index_crc: int | None) -> bool:
        """Whether the indexes hold what was committed (an unknown checksum, None, matches anything)."""
        index, time_index = self.index_checksums()
        return (index_crc is None or index_crc == index) and (time_index_crc is None or time_index_crc == time_index)

    def read_next_offset(self) -> int:
        """Offset after the last batch (`readNextOffset`); the base offset for an empty segment."""
        start = self.offset_index.last_entry.position
        last = None
        for batch in self.batches_from(start):
            last = batch
        return last.last_offset + 1 if last else self.base_offset

    # ------------------------------------------------------------------ reading

    def batches_from(self, position: int = 0) -> Iterator[BatchInfo]:
        self.write_pending()
        return iter_file_batches(self._fd, position, self._size, self.log_path.name)

    def read_bytes(self, position: int, size: int) -> bytes:
        self.write_pending()
        return os.pread(self._fd, size, position)

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchInfo | None:
        """First batch whose last offset >= `offset`, scanning from the offset-index floor (`translateOffset`)."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for batch in self.batches_from(start):
            if batch.last_offset >= offset:
                return batch
        return None

    def first_batch(self) -> BatchInfo | None:
        return next(iter(self.batches_from(0)), None)

    # ------------------------------------------------------------------ append

    def append(
        self, records: bytes | memoryview, append_time_ms: int,
        batches: list[tuple[int, RecordBatchHeader]] | None = None,
    ) -> None:
        """Append one produce's batches (already offset-assigned) at the end of the log; `batches`, when the
        caller parsed them already, is `split_batches(records)`."""
        self.require_writable()
        if batches is None:
            batches = split_batches(records)
        if not batches:
            return
        self.ensure_offset_in_range(batches[-1][1].last_offset if len(batches) == 1
                                    else max(h.last_offset for _p, h in batches))
        physical_position = self._size
        if physical_position == 0:  # Kafka's `LogSegment.append`: the append's largest timestamp, kept without a read
            self._rolling_based_timestamp = max(h.max_timestamp for _p, h in batches)
        if not self._pending:
            self._pending_at = physical_position
        self._pending.append(records if type(records) is bytes else bytes(records))
        self._pending_bytes += len(records)
        max_ts = self.max_timestamp_and_offset_so_far
        bytes_since = self.bytes_since_last_index_entry
        interval = self.config.index_interval_bytes
        for _pos, header in batches:
            last_offset = header.last_offset
            if header.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(header.max_timestamp, last_offset)
                self._max_ts_and_offset = max_ts
            if bytes_since > interval:
                self.offset_index.append(last_offset, physical_position)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                bytes_since = 0
            size = header.size_in_bytes
            physical_position += size
            bytes_since += size
            self.append_time_index.append(append_time_ms, last_offset)
        self._size = physical_position
        if self._pending_bytes >= PENDING_LIMIT:
            self.write_pending()

    def append_run(self, items: Sequence[Sequence], start: int, next_offset: int, max_segment_bytes: int,
                   max_segment_ms: int) -> int:
        """Append `items[start:]` — `(base_offset, last_offset, bytes, append_time_ms)`, one v2 batch each,
        continuing `next_offset` — while none would roll this segment; returns the index of the first item
        not appended (`len(items)` when all were). The same bytes and index entries as `append` item by
        item after `should_roll` said no: the roll checks and the index entries are those two
        methods' arithmetic, kept in locals for the run. An item that is not a single v2 batch continuing
        the log, or that would roll, stops the run: the caller takes it one at a time."""
        self.require_writable()
        self.ensure_full_capacity()
        size = self._size
        offset_index, time_index, append_times = self.offset_index, self.time_index, self.append_time_index
        offset_full, time_full = offset_index.max_entries, time_index.max_entries - 1  # `is_full` of each
        relative_limit = self.base_offset + INT32_MAX
        roll_ms = max_segment_ms - self.roll_jitter_ms
        rolling_ts = self.rolling_based_timestamp() if size > 0 else None
        max_ts = self.max_timestamp_and_offset_so_far
        bytes_since = self.bytes_since_last_index_entry
        interval = self.config.index_interval_bytes
        pending = self._pending
        if not pending:
            self._pending_at = size
        unpack = _RUN_HEADER.unpack_from
        for i in range(start, len(items)):
            item = items[i]
            data = item[2]
            if type(data) is not bytes:
                data = bytes(data)
            n = len(data)
            if n < RECORD_BATCH_OVERHEAD:
                return i
            base, batch_length, magic, last_delta, batch_max_ts = unpack(data, 0)
            last = base + last_delta
            append_time = int(item[3]) if len(item) > 3 else -1
            if magic != 2 or batch_length + LOG_OVERHEAD != n or base != next_offset or last != item[1]:
                return i
            if size > max_segment_bytes - n or last > relative_limit or last < self.base_offset:
                return i
            if size > 0:
                waited = (batch_max_ts - rolling_ts if rolling_ts is not None and rolling_ts >= 0
                          else append_time - self.created_ms)
                if waited > roll_ms:
                    return i
            else:
                rolling_ts = self._rolling_based_timestamp = batch_max_ts  # what `first_batch` would read
            if offset_index.entries >= offset_full or time_index.entries >= time_full:
                return i
            pending.append(data)
            self._pending_bytes += n
            if batch_max_ts > max_ts.timestamp:
                max_ts = self._max_ts_and_offset = TimestampOffset(batch_max_ts, last)
            if bytes_since > interval:
                offset_index.append(last, size)
                time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                bytes_since = 0
            size += n
            bytes_since += n
            append_times.append(append_time, last)
            self._size = size
            next_offset = last + 1
            if self._pending_bytes >= PENDING_LIMIT:
                self.write_pending()
                self._pending_at = size
            crash_point("batch-written")
        return len(items)

    def write_pending(self, writeback: bool = True, into: list[Write] | None = None) -> None:
        """Write the appended bytes not yet in the files (log and indexes), without fsync. `writeback`: ask the
        kernel to start writing them to disk (`start_writeback`); not for a commit, whose sync follows at once.
        `into`: the writes added to it instead, for the caller to make (a group commit's, `storage.batched_calls`);
        the segment counts them as made. A group commit writes the index entries only once they fill
        `INDEX_TAIL_LIMIT` bytes; its record carries the others (`tails`)."""
        if self._pending:
            if self.before_first_write is not None:
                hook, self.before_first_write = self.before_first_write, None
                hook()
            if into is not None:
                into.append((self._fd, list(self._pending), self._pending_at))
            else:
                write_at(self._fd, self._pending, self._pending_at)
                if writeback:
                    start_writeback(self._fd, self._pending_at, self._pending_bytes)
            self._pending.clear()
            self._pending_bytes = 0
        if not self.writable:
            return
        if into is None:
            self.offset_index.write_pending()
            self.time_index.write_pending()
            self.append_time_index.write_pending()
        else:  # a group commit's: the index entries once due, its record carrying the others (`tails`)
            self.offset_index.write_due(into)
            self.time_index.write_due(into)
            self.append_time_index.write_due(into)

    @property
    def tails(self) -> tuple[bytes, bytes, bytes]:
        """The index entries not in the files yet (`SegmentState.tails`)."""
        return self.offset_index.tail, self.time_index.tail, self.append_time_index.tail

    def ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment {self.log_path.name}"
            )

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # ------------------------------------------------------------------ roll

    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch in the file, loaded lazily (`loadFirstBatchTimestamp`)."""
        if self._rolling_based_timestamp is None and self._size > 0:
            first = self.first_batch()
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Event time (incoming max timestamp - first batch's max timestamp) when the first batch has a
        timestamp, else wall clock since the segment was created."""
        ts = self.rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created_ms

    def should_roll(self, params: RollParams) -> str | None:
        """`shouldRoll`: the reason to roll before this append, or None."""
        if self._size > params.max_segment_bytes - params.messages_size:
            return "segment.bytes"
        if self._size > 0 and (
            self.time_waited_for_roll(params.now, params.max_timestamp_in_messages)
            > params.max_segment_ms - self.roll_jitter_ms
        ):
            return "segment.ms"
        if self.offset_index.is_full():
            return "offset index full"
        if self.time_index.is_full():
            return "time index full"
        if not self.can_convert_to_relative_offset(params.max_offset_in_messages):
            return "relative offset overflow"
        return None

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def ensure_full_capacity(self) -> None:
        """Give the active segment's indexes their full `segment.index.bytes` again (Kafka resizes the
        active segment's indexes at load, `resizeIndexes(maxIndexSize)`)."""
        if not self._full_capacity:
            self.resize_indexes(self.config.segment_index_bytes)
            self._full_capacity = True

    def on_become_inactive(self) -> None:
        """Roll/close: final time-index entry (skipping the full check), indexes trimmed."""
        self._append_final_time_index_entry()
        self.trim_indexes()

    def trim_indexes(self) -> None:
        """Indexes cut to their valid entries (their full capacity restored by the next append)."""
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.append_time_index.trim_to_valid_size()
        self._full_capacity = False

    def cut_index_files(self) -> None:
        """A commit of the active segment: its index files hold their valid entries, so Kafka's tools read the
        committed files as they are; the indexes keep their capacity, as Kafka's active segment does until a
        roll or a close."""
        self.offset_index.cut_file_to_entries()
        self.time_index.cut_file_to_entries()
        self.append_time_index.cut_file_to_entries()

    def _append_final_time_index_entry(self) -> None:
        if not self.writable:
            return
        max_ts = self.max_timestamp_and_offset_so_far
        if max_ts.timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)

    # ------------------------------------------------------------------ durability

    def synced_by_filesystem(self) -> None:
        """Everything written (`write_pending`) was made durable by a sync of the whole filesystem
        (`group_commit`): the next `flush` has no `.log` bytes left to sync."""
        self._synced_size = self._size

    def flush(self, indexes: bool = True) -> None:
        """fsync the segment. `indexes=False` (a commit) syncs only what recovery cannot rebuild: the
        `.log` and the `.appendtimeindex` (module docstring; Kafka's `LogLoader`, `LogSegment.recover`)."""
        if self.writable:
            self.write_pending()
            if self._synced_size != self._size:
                os.fdatasync(self._fd)  # data and the size: what reading the file back needs
                self._synced_size = self._size
            if indexes:
                self.offset_index.flush()
                self.time_index.flush()
            self.append_time_index.flush()

    def close(self, finalize: bool = True) -> None:
        """Kafka's `close()`: final time-index entry, trimmed indexes, files closed. `finalize=False`
        closes the files as they are (recovery, which has just cut them to a commit)."""
        if self._fd < 0:
            return
        if self.writable:
            self.write_pending()
        if self.writable and finalize:
            self.on_become_inactive()
        self.offset_index.close(trim=self.writable and finalize)
        self.time_index.close(trim=self.writable and finalize)
        self.append_time_index.close()
        os.close(self._fd)
        self._fd = -1

    def close_handlers(self) -> None:
        """Kafka's `LogSegment.closeHandlers`: every file's descriptor closed without writing to any of them — the
        files may be another writer's by now (a log kept open whose partition changed, `PartitionLog.discard`)."""
        if self._fd < 0:
            return
        self._pending.clear()
        self._pending_bytes = 0
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.append_time_index.close_handler()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        """Remove every file of the segment."""
        self._pending.clear()
        self._pending_bytes = 0
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.delete()
        self.time_index.delete()
        self.append_time_index.delete()
        self.log_path.unlink(missing_ok=True)

    def require_writable(self) -> None:
        if not self.writable or self._fd < 0:
            raise ValueError(f"segment {self.log_path} is not open for appending")

    # ------------------------------------------------------------------ truncation and recovery

    def truncate_log_to(self, size: int) -> int:
        """Cut the `.log` to `size` bytes (Kafka's `FileRecords.truncateTo`); what was derived from the bytes
        cut (max timestamp, first batch's timestamp, the indexes' capacity) is loaded again when next needed. The
        indexes are the caller's (`segment_recovery`). Returns the bytes cut."""
        truncated = self._size - size
        os.ftruncate(self._fd, size)
        self._size, self._synced_size = size, -1
        self._max_ts_and_offset = None
        self._rolling_based_timestamp = None
        self._full_capacity = False
        return truncated

    def reset_indexes(self) -> None:
        """Empty the offset and time indexes (at full capacity) and forget the derived maxima: what
        `recover` starts from (`segment_recovery`)."""
        self.offset_index.truncate()
        self.time_index.truncate()
        self._full_capacity = False
        self.ensure_full_capacity()
        self._max_ts_and_offset = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._rolling_based_timestamp = None

    def restore_max_timestamp(self, timestamp: int | None, offset: int | None) -> None:
        """maxTimestampAndOffsetSoFar of a reopened active segment: as committed (or as recovery found it),
        or, when unknown, loaded from the files (`loadLargestTimestamp`)."""
        if timestamp is None or offset is None:
            self.load_largest_timestamp()
        else:
            self._max_ts_and_offset = TimestampOffset(timestamp, offset)

    def load_largest_timestamp(self) -> TimestampOffset:
        """`loadLargestTimestamp`: the max timestamp and its offset, loaded from the files — the time
        index's last entry, then any larger batch after it."""
        last = self.time_index.last_entry
        max_ts = last
        start = self.offset_index.lookup(last.offset).position
        for batch in self.batches_from(start):
            if batch.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(batch.max_timestamp, batch.last_offset)
        self._max_ts_and_offset = max_ts
        return max_ts

    def sanity_check(self) -> None:
        """The load-time check (`LogSegment.sanityCheck`): a missing or corrupt index means recover."""
        if not self.offset_index.path.exists():
            raise CorruptIndexError(f"Offset index file {self.offset_index.path} does not exist")
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.append_time_index.sanity_check()
