"""`segments verify`: a partition checked the way Kafka's `DumpLogSegments` does, and against the
gateway's commit record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from storage.commit_record import SegmentState
from storage.errors import KafkaStorageError
from storage.file_names import segment_bases
from storage.file_records import BatchInfo
from storage.log_config import SegmentConfig
from storage.log_reader import PartitionReader
from storage.segment import LogSegment
from validators.append_result import GATEWAY_LEADER_EPOCH
from validators.codec.record_batch import is_valid, parse_header


@dataclass(frozen=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size: int
    batches: int
    index_entries: int
    time_index_entries: int
    append_time_entries: int
    max_timestamp: int


@dataclass(frozen=True)
class VerifyReport:
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    segments: tuple[SegmentSummary, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _size(path: Path) -> int:
    """File size, -1 for a missing file."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return -1


def verify_partition(
    root: Path, topic: str, partition: int, index_interval_bytes: int | None = None
) -> VerifyReport:
    """Check a partition the way `DumpLogSegments` does and more: batch CRCs and contiguous offsets,
    every offset-index entry pointing at the batch it names, the offset index equal to what the
    index-interval rule yields, every time-index entry matching its batch's max timestamp and
    strictly increasing, the last time-index entry equal to the segment's max timestamp, one
    append-time entry per batch, the files equal to the commit record. The index-interval rule is
    checked when `index_interval_bytes` (the topic's `index.interval.bytes`) is given."""
    problems: list[str] = []
    summaries: list[SegmentSummary] = []
    try:
        opened = PartitionReader(root, topic, partition)
    except KafkaStorageError as e:  # an unreadable commit record: nothing else can be checked against it
        return VerifyReport(topic, partition, -1, -1, (), (str(e),))
    with opened as reader:
        on_disk = segment_bases(reader.directory)
        listed = [v.base_offset for v in reader.segments]
        if reader.commit is None:
            problems.append("no commit record (gateway-commit.json)")
        elif on_disk != listed:
            problems.append(f"segments on disk {on_disk} differ from the commit record {listed}")
        expected_next = reader.segments[0].base_offset if reader.segments else reader.log_start_offset
        for i, view in enumerate(reader.segments):
            following = reader.segments[i + 1].base_offset if i + 1 < len(reader.segments) else None
            try:
                seg = view.segment
            except (KafkaStorageError, FileNotFoundError) as e:
                problems.append(str(e))
                expected_next = following if following is not None else reader.log_end_offset
                continue
            problems.extend(view.problems)  # damaged indexes (the checks below see their rebuilt view)
            if view.state is not None:
                disk = tuple(_size(p) for p in (seg.log_path, seg.offset_index.path, seg.time_index.path,
                                                 seg.append_time_index.path))
                if not _sizes_match(disk, view.state):
                    problems.append(f"{seg.log_path.name}: file sizes {disk} differ from the commit record "
                                    f"{view.state.sizes}")
            scan = _scan_log(seg, expected_next, problems)
            expected_next = scan.next_offset
            # the index files as they are on disk (the reader's view may be rebuilt in memory)
            raw = LogSegment(reader.directory, seg.base_offset, SegmentConfig(), writable=False,
                             committed=view.state)
            try:
                index_entries = _check_offset_index(raw, scan, index_interval_bytes, problems)
                _check_time_index(raw, scan, following is None, problems)
                append_entries = _check_append_time_index(raw, scan, problems)
                summaries.append(SegmentSummary(
                    seg.base_offset, following if following is not None else expected_next, seg.size, scan.batches,
                    index_entries, raw.time_index.entries, append_entries, scan.max_timestamp[0],
                ))
            finally:
                raw.close()
        if reader.segments and expected_next != reader.log_end_offset:
            problems.append(f"log end offset {reader.log_end_offset} in the commit record, {expected_next} in the files")
        return VerifyReport(topic, partition, reader.log_start_offset, reader.log_end_offset, tuple(summaries),
                            tuple(problems))


@dataclass
class _LogScan:
    """What one pass over a segment's `.log` found: its batches by last offset, the max timestamp and
    the offset of its last batch, the offset after the last batch."""

    batches: int
    by_last_offset: dict[int, BatchInfo]
    max_timestamp: tuple[int, int]
    next_offset: int


def _scan_log(seg: LogSegment, expected_next: int, problems: list[str]) -> _LogScan:
    """Batch CRCs, the gateway's leader epoch, contiguous offsets from `expected_next`, no trailing bytes.
    A batch's CRC starts at its attributes (KIP-98), so the partition leader epoch before it is checked on its own."""
    name = seg.log_path.name
    if seg.base_offset != expected_next:
        problems.append(f"{name}: base offset {seg.base_offset}, expected {expected_next}")
    scan = _LogScan(0, {}, (-1, seg.base_offset), expected_next)
    position_end = 0
    try:
        for batch in seg.batches_from(0):
            scan.batches += 1
            scan.by_last_offset[batch.last_offset] = batch
            data = seg.read_bytes(batch.position, batch.size)
            if not is_valid(data):
                problems.append(f"{name}: batch at position {batch.position} fails its CRC")
            elif (epoch := parse_header(data).partition_leader_epoch) != GATEWAY_LEADER_EPOCH:
                problems.append(f"{name}: batch at position {batch.position} has partition leader epoch {epoch}, "
                                f"the gateway writes {GATEWAY_LEADER_EPOCH}")
            if batch.base_offset != scan.next_offset:
                problems.append(f"{name}: batch at position {batch.position} starts at offset "
                                f"{batch.base_offset}, expected {scan.next_offset}")
            scan.next_offset = batch.last_offset + 1
            if batch.max_timestamp > scan.max_timestamp[0]:
                scan.max_timestamp = (batch.max_timestamp, batch.last_offset)
            position_end = batch.next_position
    except Exception as e:  # noqa: BLE001 - reported, not raised
        problems.append(f"{name}: unreadable at byte {position_end}: {e}")
    if position_end != seg.size:
        problems.append(f"{name}: {seg.size - position_end} trailing bytes after the last valid batch")
    return scan


def _sizes_match(disk: tuple[int, ...], state: SegmentState) -> bool:
    """The files' sizes as the commit record has them: each index file holding its committed bytes, or all but
    the tail the record carries for it (`SegmentState.tails`: entries a group commit has not written yet)."""
    if disk[0] != state.log_size:
        return False
    return all(size in (committed - len(tail), committed)
               for size, committed, tail in zip(disk[1:], state.sizes[1:], state.tails, strict=True))


def _check_offset_index(raw: LogSegment, scan: _LogScan, index_interval_bytes: int | None, problems: list[str]) -> int:
    """Each entry names the batch at its position; with the interval known, the entries are exactly what
    the index-interval rule yields. Returns the number of entries."""
    name = raw.offset_index.path.name
    entries = raw.offset_index.all_entries()
    for entry in entries:
        batch = scan.by_last_offset.get(entry.offset)
        if batch is None or batch.position != entry.position:
            problems.append(f"{name}: entry (offset {entry.offset}, position {entry.position}) does not match a batch")
    if index_interval_bytes is not None:
        expected: list[tuple[int, int]] = []
        bytes_since = 0
        for batch in sorted(scan.by_last_offset.values(), key=lambda b: b.position):
            if bytes_since > index_interval_bytes:
                expected.append((batch.last_offset, batch.position))
                bytes_since = 0
            bytes_since += batch.size
        if [(e.offset, e.position) for e in entries] != expected:
            problems.append(f"{name}: entries differ from the index.interval.bytes rule")
    return len(entries)


def _check_time_index(raw: LogSegment, scan: _LogScan, active: bool, problems: list[str]) -> None:
    """Entries at batches' last offsets with their max timestamps, strictly increasing; a rolled segment
    ends with its max timestamp (the roll's final entry), the active one only once the log is closed
    (Kafka's `OffsetIndex`, `TimeIndex`; `LogSegment.shouldRoll`)."""
    name = raw.time_index.path.name
    previous = -2
    for entry in raw.time_index.all_entries():
        batch = scan.by_last_offset.get(entry.offset)
        if batch is None:
            problems.append(f"{name}: indexed offset {entry.offset} is not a batch's last offset")
        elif batch.max_timestamp != entry.timestamp:
            problems.append(f"{name}: timestamp {entry.timestamp} at offset {entry.offset}, "
                            f"batch max timestamp {batch.max_timestamp}")
        if entry.timestamp <= previous:
            problems.append(f"{name}: timestamp {entry.timestamp} out of order")
        previous = entry.timestamp
    last = raw.time_index.last_entry
    max_ts = scan.max_timestamp
    if max_ts[0] >= 0 and (last.timestamp, last.offset) != max_ts and not (active and last.timestamp < max_ts[0]):
        problems.append(f"{name}: last entry ({last.timestamp}, {last.offset}) is not the segment's max timestamp "
                        f"{max_ts}")


def _check_append_time_index(raw: LogSegment, scan: _LogScan, problems: list[str]) -> int:
    """One entry per batch, append times never going backwards. Returns the number of entries."""
    name = raw.append_time_index.path.name
    ats = raw.append_time_index.all_entries()
    if [e.last_offset for e in ats] != sorted(scan.by_last_offset):
        problems.append(f"{name}: {len(ats)} entries for {scan.batches} batches, or offsets that do not match "
                        "the batches")
    if any(b.append_time < a.append_time for a, b in zip(ats, ats[1:], strict=False)):
        problems.append(f"{name}: append time goes backwards")
    return len(ats)
