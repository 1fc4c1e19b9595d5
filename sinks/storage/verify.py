"""`segments verify`: a partition checked the way Kafka's `DumpLogSegments` does, and against the
gateway's commit record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sinks.storage.errors import KafkaStorageError
from sinks.storage.file_names import segment_bases
from sinks.storage.file_records import BatchInfo
from sinks.storage.log_config import SegmentConfig
from sinks.storage.log_reader import PartitionReader
from sinks.storage.segment import LogSegment
from validators.record_batch import is_valid


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
    index-interval rule yields (§5.2), every time-index entry matching its batch's max timestamp and
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
            try:
                seg = view.segment
            except (KafkaStorageError, FileNotFoundError) as e:
                problems.append(str(e))
                expected_next = (reader.segments[i + 1].base_offset if i + 1 < len(reader.segments)
                                 else reader.log_end_offset)
                continue
            problems.extend(view.problems)  # damaged indexes (the checks below see their rebuilt view)
            name = seg.log_path.name
            if view.state is not None:
                disk = tuple(_size(p) for p in (seg.log_path, seg.offset_index.path, seg.time_index.path,
                                                 seg.append_time_index.path))
                if disk != view.state.sizes:
                    problems.append(f"{name}: file sizes {disk} differ from the commit record {view.state.sizes}")
            if seg.base_offset != expected_next:
                problems.append(f"{name}: base offset {seg.base_offset}, expected {expected_next}")
            batches = 0
            position_end = 0
            max_ts = (-1, seg.base_offset)
            bytes_since = 0
            expected_index: list[tuple[int, int]] = []
            by_last_offset: dict[int, BatchInfo] = {}
            try:
                for batch in seg.batches_from(0):
                    batches += 1
                    by_last_offset[batch.last_offset] = batch
                    if not is_valid(seg.read_bytes(batch.position, batch.size)):
                        problems.append(f"{name}: batch at position {batch.position} fails its CRC")
                    if batch.base_offset != expected_next:
                        problems.append(f"{name}: batch at position {batch.position} starts at offset "
                                        f"{batch.base_offset}, expected {expected_next}")
                    expected_next = batch.last_offset + 1
                    if batch.max_timestamp > max_ts[0]:
                        max_ts = (batch.max_timestamp, batch.last_offset)
                    position_end = batch.next_position
            except Exception as e:  # noqa: BLE001 - reported, not raised
                problems.append(f"{name}: unreadable at byte {position_end}: {e}")
            if position_end != seg.size:
                problems.append(f"{name}: {seg.size - position_end} trailing bytes after the last valid batch")
            # the index files as they are on disk (the reader's view may be rebuilt in memory)
            raw = LogSegment(reader.directory, seg.base_offset, SegmentConfig(), writable=False,
                             valid_sizes=view.state.sizes if view.state else None)
            # offset index: each entry names the batch at its position
            entries = raw.offset_index.all_entries()
            for entry in entries:
                batch = by_last_offset.get(entry.offset)
                if batch is None or batch.position != entry.position:
                    problems.append(f"{seg.offset_index.path.name}: entry (offset {entry.offset}, position "
                                    f"{entry.position}) does not match a batch")
            # the index-interval rule, recomputed (§5.2)
            for batch in sorted(by_last_offset.values(), key=lambda b: b.position):
                if index_interval_bytes is not None and bytes_since > index_interval_bytes:
                    expected_index.append((batch.last_offset, batch.position))
                    bytes_since = 0
                bytes_since += batch.size
            if index_interval_bytes is not None and [(e.offset, e.position) for e in entries] != expected_index:
                problems.append(f"{seg.offset_index.path.name}: entries differ from the index.interval.bytes rule")
            # time index
            previous = -2
            for entry in raw.time_index.all_entries():
                batch = by_last_offset.get(entry.offset)
                if batch is None:
                    problems.append(f"{seg.time_index.path.name}: indexed offset {entry.offset} is not a batch's last offset")
                elif batch.max_timestamp != entry.timestamp:
                    problems.append(f"{seg.time_index.path.name}: timestamp {entry.timestamp} at offset {entry.offset}, "
                                    f"batch max timestamp {batch.max_timestamp}")
                if entry.timestamp <= previous:
                    problems.append(f"{seg.time_index.path.name}: timestamp {entry.timestamp} out of order")
                previous = entry.timestamp
            last = raw.time_index.last_entry
            # A rolled segment ends with its max timestamp (the roll's final entry); the active one gets it
            # only when the log is closed (reference §5.3, §5.4).
            active = i == len(reader.segments) - 1
            if max_ts[0] >= 0 and (last.timestamp, last.offset) != max_ts and not (active and last.timestamp < max_ts[0]):
                problems.append(f"{seg.time_index.path.name}: last entry ({last.timestamp}, {last.offset}) is not the "
                                f"segment's max timestamp {max_ts}")
            # append-time index
            ats = raw.append_time_index.all_entries()
            if [e.last_offset for e in ats] != sorted(by_last_offset):
                problems.append(f"{seg.append_time_index.path.name}: {len(ats)} entries for {batches} batches, or "
                                "offsets that do not match the batches")
            if any(b.append_time < a.append_time for a, b in zip(ats, ats[1:], strict=False)):
                problems.append(f"{seg.append_time_index.path.name}: append time goes backwards")
            next_offset = reader.segments[i + 1].base_offset if i + 1 < len(reader.segments) else expected_next
            summaries.append(SegmentSummary(seg.base_offset, next_offset, seg.size, batches, len(entries),
                                            raw.time_index.entries, len(ats), max_ts[0]))
            raw.close()
        if reader.segments and expected_next != reader.log_end_offset:
            problems.append(f"log end offset {reader.log_end_offset} in the commit record, {expected_next} in the files")
        return VerifyReport(topic, partition, reader.log_start_offset, reader.log_end_offset, tuple(summaries),
                            tuple(problems))
