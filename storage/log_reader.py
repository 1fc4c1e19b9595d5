"""Readers of segment storage: records as a Kafka consumer sees them, and ListOffsets by timestamp.

- `read(root, topic, partition, offset, max_records)`: records from `offset` on, each with offset, key,
  value, headers, timestamp and timestamp type exactly as a consumer gets them (a LogAppendTime batch
  gives every record the batch's maxTimestamp, Kafka's `DefaultRecord`), plus both clocks: `create_time` (the
  producer's timestamp kept in the record deltas) and `log_append_time` (the batch header for
  LogAppendTime topics, the gateway's append-time index for CreateTime topics) — docs/design.md: what the stage decides; docs/design.md: segment storage.
- `offsets_for_times(root, topic, partition, t)`: `UnifiedLog.fetchOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp`),
  with the special targets -1 LATEST, -2 EARLIEST, -3 MAX_TIMESTAMP.

Readers take no lock: they read the commit record and stay inside the committed size of every file,
so a concurrent append or recovery (which only writes beyond the committed sizes) is invisible to them.
A directory without a commit record (e.g. copied from a Kafka broker) is read as its files are.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.commit_record import CommitHead, CommitRecord, SegmentState, read_commit_head
from storage.file_names import partition_dir, segment_bases, segment_file_name
from storage.file_records import BatchInfo, CorruptRecordError
from storage.segment import LogSegment
from storage.segment_reader import open_for_reading
from storage.transaction_index import AbortedTxn, TransactionIndex
from validators.codec.compression import CorruptCompressedDataError
from validators.codec.record_batch import TimestampType, decode_record_batch, is_valid
from validators.codec.records import InvalidRecordError

LATEST_TIMESTAMP = -1  # ListOffsetsRequest.LATEST_TIMESTAMP
EARLIEST_TIMESTAMP = -2  # ListOffsetsRequest.EARLIEST_TIMESTAMP
MAX_TIMESTAMP = -3  # ListOffsetsRequest.MAX_TIMESTAMP (KIP-734)


class OffsetOutOfRangeError(ValueError):
    """Kafka's OFFSET_OUT_OF_RANGE: the fetch offset is below the log start or above the log end."""


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int  # what a Kafka consumer reports
    timestamp_type: str  # "CreateTime" | "LogAppendTime" (Kafka's TimestampType names)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    create_time: int  # the producer's timestamp (-1 when it sent none)
    log_append_time: int  # the gateway's append time (-1 when unknown)
    leader_epoch: int  # batch partitionLeaderEpoch


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    """ListOffsets partition response: `offset` -1 and `timestamp` -1 when nothing matches."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None

    @property
    def found(self) -> bool:
        return self.offset >= 0


NOT_FOUND = ListOffsetsResult(-1, -1, None)


@dataclass(frozen=True, slots=True)
class _Rec:
    offset: int
    timestamp: int
    create_time: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def batch_records(data: bytes) -> list[_Rec]:
    """Every record of one stored v2 batch (decompressed), with the timestamp a consumer sees."""
    decoded = decode_record_batch(data)
    return [_Rec(r.offset, r.timestamp, r.create_time, r.key, r.value, r.headers) for r in decoded.records]


def read_batch(segment: LogSegment, batch: BatchInfo) -> list[_Rec]:
    """The records of `batch`, after the checks a Kafka consumer makes (`check.crcs`): whole and CRC-valid;
    a batch that fails them, or does not decode, is a `CorruptRecordError` naming the file."""
    data = segment.read_bytes(batch.position, batch.size)
    where = f"{segment.log_path}: batch at position {batch.position} (offsets {batch.base_offset}-{batch.last_offset})"
    if len(data) != batch.size or not is_valid(data):
        raise CorruptRecordError(f"{where} fails its CRC")
    try:
        return batch_records(data)
    except (ValueError, KeyError, IndexError, struct.error, OSError, CorruptCompressedDataError, InvalidRecordError) as e:
        raise CorruptRecordError(f"{where} does not decode: {type(e).__name__}: {e}") from None


class _SegmentView:
    """A committed segment, opened (read-only) only when its records or indexes are needed."""

    def __init__(self, directory: Path, state: SegmentState | None, base_offset: int, active: bool = False,
                 append_times: bool = True) -> None:
        self.directory = directory
        self.append_times = append_times  # False: the `.appendtimeindex` is neither read nor checked
        self.state = state
        self.base_offset = base_offset
        self.active = active  # the last segment: its time index may lack the final entry
        self.problems: tuple[str, ...] = ()  # damage found when the segment was opened (segment_reader)
        self._segment: LogSegment | None = None
        self._max_ts: tuple[int, int] | None = None

    @property
    def segment(self) -> LogSegment:
        """The segment, checked against its commit record, damaged indexes rebuilt in memory
        (`segment_reader`)."""
        if self._segment is None:
            checked = open_for_reading(self.directory, self.base_offset, self.state, self.append_times)
            self._segment, self.problems = checked.segment, checked.problems
        return self._segment

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """maxTimestampAndOffsetSoFar: as committed; for an older commit record or a foreign directory, a
        rolled segment's last time-index entry or, for the active segment (no final entry before a roll
        or close), loaded from its files like Kafka's `loadLargestTimestamp`."""
        if self._max_ts is None:
            if self.state is not None and self.state.max_timestamp is not None:
                self._max_ts = (self.state.max_timestamp, int(self.state.max_timestamp_offset or self.base_offset))
            else:
                max_ts = (self.segment.load_largest_timestamp() if self.active
                          else self.segment.time_index.last_entry)
                self._max_ts = (max_ts.timestamp, max_ts.offset)
        return self._max_ts

    def largest_timestamp(self) -> int:
        """`largestTimestamp()`: max timestamp if any, else the `.log` mtime (`UnifiedLog.fetchOffsetByTimestamp`; `UnifiedLog.deleteRetentionMsBreachedSegments`)."""
        ts = self.max_timestamp_and_offset()[0]
        if ts >= 0:
            return ts
        return int(os.stat(self.directory / segment_file_name(self.base_offset)).st_mtime * 1000)

    def close(self) -> None:
        if self._segment is not None:
            self._segment.close()
            self._segment = None


class PartitionReader:
    """Read-only view of one partition's committed segments; reuse it for many queries."""

    def __init__(self, root: Path, topic: str, partition: int, append_times: bool = True) -> None:
        """`append_times=False`: for Kafka's own answers (Fetch's raw batches, ListOffsets), which carry no
        append time — the append-time index, one entry per batch, is then neither read nor checked."""
        self.topic = topic
        self.append_times = append_times
        self.partition = partition
        self.directory = partition_dir(root, topic, partition)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"no partition directory {self.directory}")
        # The record without the older segments' list: a read at or after the active segment's base (a consumer
        # at the tail) opens nothing else, however many segments the partition retains.
        self.head: CommitHead | None = read_commit_head(self.directory)
        self._segments: list[_SegmentView] | None = None
        self._active: _SegmentView | None = None
        self._commit: CommitRecord | None = None
        if self.head is not None:
            self.log_start_offset = self.head.log_start_offset
            self.log_end_offset = self.head.log_end_offset
            if self.head.active is not None:
                self._active = _SegmentView(self.directory, self.head.active, self.head.active.base_offset,
                                            active=True, append_times=append_times)
        else:
            segments = self.segments
            self.log_start_offset = segments[0].base_offset if segments else 0
            self.log_end_offset = segments[-1].segment.read_next_offset() if segments else 0

    @property
    def commit(self) -> CommitRecord | None:
        """The whole commit record (the older segments' list read on first use); None for a foreign directory."""
        if self._commit is None and self.head is not None:
            self._commit = self.head.record(self.directory)
        return self._commit

    @property
    def segments(self) -> list[_SegmentView]:
        """Every segment, oldest first (the older segments' list read on first use)."""
        if self._segments is None:
            if self.head is None:
                views = [_SegmentView(self.directory, None, b, append_times=self.append_times)
                         for b in segment_bases(self.directory)]
                if views:
                    views[-1].active = True
            else:
                commit = self.commit
                assert commit is not None
                views = [_SegmentView(self.directory, s, s.base_offset, append_times=self.append_times)
                         for s in commit.segments[:-1]]
                if self._active is not None:
                    views.append(self._active)
            self._segments = views
        return self._segments

    def _from(self, offset: int) -> list[_SegmentView]:
        """The segments a read from `offset` goes through: the active one alone when it holds `offset`."""
        if self._segments is None and self._active is not None and offset >= self._active.base_offset:
            return [self._active]
        return self.segments[self._segment_for(offset) :]

    def close(self) -> None:
        for view in self._segments if self._segments is not None else [self._active] if self._active else []:
            view.close()

    def __enter__(self) -> PartitionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ read

    def _segment_for(self, offset: int) -> int:
        index = 0
        for i, view in enumerate(self.segments):
            if view.base_offset <= offset:
                index = i
        return index

    def read(self, offset: int, max_records: int = 500) -> Iterator[ConsumerRecord]:
        """Records at offsets >= `offset`, at most `max_records`, in offset order."""
        if not self.append_times:
            raise ValueError("records carry append times: this reader was opened without them")
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Fetch offset {offset} is out of range for partition {self.topic}-{self.partition}: log start "
                f"offset {self.log_start_offset}, log end offset {self.log_end_offset}"
            )
        remaining = max_records
        if remaining <= 0 or offset == self.log_end_offset:
            return
        for view in self._from(offset):
            segment = view.segment
            first = segment.translate_offset(offset)
            if first is None:
                continue
            for batch in segment.batches_from(first.position):
                if batch.header.is_control_batch:
                    continue
                for record in self._records(segment, batch):
                    if record.offset < offset:
                        continue
                    yield record
                    remaining -= 1
                    if remaining == 0:
                        return

    def read_log(self, offset: int, max_bytes: int, min_one_batch: bool) -> bytes:
        """The `.log` bytes a Kafka fetch returns from `offset` (`LogSegment.read`): from the batch that
        holds `offset` to at most `max_bytes` within that one segment — raised to the whole first batch
        when `min_one_batch` (KIP-74) — so the slice may end inside a batch, which consumers drop.
        Empty at the log end offset."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Fetch offset {offset} is out of range for partition {self.topic}-{self.partition}: log start "
                f"offset {self.log_start_offset}, log end offset {self.log_end_offset}"
            )
        if offset == self.log_end_offset:  # a consumer at the tail: no segment opened
            return b""
        for view in self._from(offset):
            segment = view.segment
            batch = segment.translate_offset(offset)
            if batch is None:
                continue
            limit = max(max_bytes, batch.size) if min_one_batch else max_bytes
            return segment.read_bytes(batch.position, max(0, min(segment.size - batch.position, limit)))
        return b""

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is complete (`CommitHead.last_stable_offset`; the log end without a record)."""
        return self.head.last_stable_offset if self.head is not None else self.log_end_offset

    def read_committed(self, offset: int, max_bytes: int, min_one_batch: bool) -> tuple[bytes, tuple[AbortedTxn, ...]]:
        """A READ_COMMITTED fetch (`UnifiedLog.read` with `FetchIsolation.TXN_COMMITTED`): `read_log` capped at the
        last stable offset, and the aborted transactions overlapping `[offset, last stable offset)`, from the
        `.txnindex` of the segment holding `offset` onwards until one says no later entry can overlap
        (`UnifiedLog.collectAbortedTransactions`). The consumer drops those transactions' records."""
        stable = self.last_stable_offset
        if offset < self.log_start_offset or offset > self.log_end_offset:
            self.read_log(offset, max_bytes, min_one_batch)  # raises OffsetOutOfRangeError with its text
        if offset >= stable:
            return b"", ()
        data = b""
        for view in self._from(offset):
            segment = view.segment
            batch = segment.translate_offset(offset)
            if batch is None:
                continue
            unstable = segment.translate_offset(stable, batch.position)  # in this segment: stop before it
            end = unstable.position if unstable is not None else segment.size
            limit = max(max_bytes, batch.size) if min_one_batch else max_bytes
            data = segment.read_bytes(batch.position, max(0, min(end - batch.position, limit)))
            break
        aborted: list[AbortedTxn] = []
        for view in self._from(offset):
            index = TransactionIndex.of_segment(self.directory, view.base_offset)
            if not index.path.exists():
                continue
            with index:
                found = index.collect_aborted(offset, stable)
            aborted.extend(found.aborted_transactions)
            if found.is_complete:
                break
        return data, tuple(aborted)

    def _records(self, segment: LogSegment, batch: BatchInfo) -> Iterator[ConsumerRecord]:
        header = batch.header
        lat = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        if lat:
            append_time = header.max_timestamp
        else:
            found = segment.append_time_index.lookup(header.last_offset)
            append_time = -1 if found is None else found
        type_name = header.timestamp_type.kafka_name
        for r in read_batch(segment, batch):
            yield ConsumerRecord(
                topic=self.topic, partition=self.partition, offset=r.offset, timestamp=r.timestamp,
                timestamp_type=type_name, key=r.key, value=r.value, headers=r.headers,
                create_time=r.create_time, log_append_time=append_time,
                leader_epoch=header.partition_leader_epoch,
            )

    # ------------------------------------------------------------------ ListOffsets

    def offsets_for_times(self, timestamp: int) -> ListOffsetsResult:
        if timestamp == LATEST_TIMESTAMP:
            return ListOffsetsResult(-1, self.log_end_offset, self._epoch_of_last_batch())
        if timestamp == EARLIEST_TIMESTAMP:
            return ListOffsetsResult(-1, self.log_start_offset, self._epoch_at(self.log_start_offset))
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp()
        if timestamp < 0:
            raise ValueError(f"unsupported ListOffsets target timestamp {timestamp} (only -1, -2, -3 and >= 0)")
        # The first segment whose largest timestamp is >= t; nothing found there means not found.
        for view in self.segments:
            if view.largest_timestamp() >= timestamp:
                return find_offset_by_timestamp(view.segment, timestamp, self.log_start_offset) or NOT_FOUND
        return NOT_FOUND

    def _max_timestamp(self) -> ListOffsetsResult:
        if not self.segments:
            return NOT_FOUND
        best = self.segments[0]
        for view in self.segments[1:]:  # the first one on ties (Scala maxBy)
            if view.max_timestamp_and_offset()[0] > best.max_timestamp_and_offset()[0]:
                best = view
        max_ts, shallow_offset = best.max_timestamp_and_offset()
        segment = best.segment
        position = segment.offset_index.lookup(shallow_offset).position
        for batch in segment.batches_from(position):
            if batch.max_timestamp == max_ts:
                for r in read_batch(segment, batch):  # RecordBatch.offsetOfMaxTimestamp()
                    if r.timestamp == max_ts:
                        return ListOffsetsResult(max_ts, r.offset, _epoch(batch))
                return NOT_FOUND
        return NOT_FOUND

    def _epoch_at(self, offset: int) -> int | None:
        if not self.segments or offset >= self.log_end_offset:
            return self._epoch_of_last_batch()
        view = self.segments[self._segment_for(offset)]
        batch = view.segment.translate_offset(offset)
        return _epoch(batch) if batch else None

    def _epoch_of_last_batch(self) -> int | None:
        if self.log_end_offset == self.log_start_offset:
            return None
        views = self._from(self.log_end_offset - 1)
        if not views:
            return None
        batch = views[-1].segment.translate_offset(self.log_end_offset - 1)
        return _epoch(batch) if batch else None


def _epoch(batch: BatchInfo) -> int | None:
    epoch = batch.header.partition_leader_epoch
    return epoch if epoch >= 0 else None


def find_offset_by_timestamp(segment: LogSegment, timestamp: int, starting_offset: int = 0) -> ListOffsetsResult | None:
    """`LogSegment.findOffsetByTimestamp` (`UnifiedLog.fetchOffsetByTimestamp` steps 2-3): time index floor entry, offset index
    position, then the first batch with maxTimestamp >= t and in it the first record with timestamp >= t
    and offset >= `starting_offset`. None when the segment has none."""
    floor = segment.time_index.lookup(timestamp)
    position = segment.offset_index.lookup(max(floor.offset, starting_offset)).position
    for batch in segment.batches_from(position):
        if batch.max_timestamp >= timestamp:
            for r in read_batch(segment, batch):
                if r.timestamp >= timestamp and r.offset >= starting_offset:
                    return ListOffsetsResult(r.timestamp, r.offset, _epoch(batch))
    return None


def read(root: Path, topic: str, partition: int, offset: int, max_records: int = 500) -> list[ConsumerRecord]:
    """Records of a partition from `offset` (see `PartitionReader.read`)."""
    with PartitionReader(root, topic, partition) as reader:
        return list(reader.read(offset, max_records))


def offsets_for_times(root: Path, topic: str, partition: int, timestamp: int) -> ListOffsetsResult:
    """ListOffsets for one partition (see `PartitionReader.offsets_for_times`)."""
    with PartitionReader(root, topic, partition) as reader:
        return reader.offsets_for_times(timestamp)


def log_end_offset(root: Path, topic: str, partition: int) -> int:
    """A partition's log end offset (0 when nothing was ever appended)."""
    try:
        with PartitionReader(root, topic, partition) as reader:
            return reader.log_end_offset
    except FileNotFoundError:
        return 0
