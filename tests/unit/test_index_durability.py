"""A commit fsyncs the `.log` and `.appendtimeindex` only; the active segment's `.index`/`.timeindex` are
rebuilt from the log when a crash lost their pages (Kafka's `LogLoader`, `LogSegment.recover`: Kafka rebuilds indexes, it does not
rely on them). The page-cache loss a machine crash causes is produced here by editing the files."""

from __future__ import annotations

import logging
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from storage.batch_appender import append_batches
from storage.commit_record import CommitRecord, read_commit, write_commit
from storage.file_names import partition_dir, segment_file_name
from storage.log_config import SegmentConfig
from storage.log_manager import repair_indexes
from storage.log_reader import offsets_for_times, read
from storage.partition_log import PartitionLog
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch

CFG = SegmentConfig(segment_bytes=900, index_interval_bytes=150, segment_index_bytes=240)
# one segment for the whole test, so that every index entry is in the active segment
ONE_SEGMENT = SegmentConfig(segment_bytes=1 << 20, index_interval_bytes=150, segment_index_bytes=4096)


def write(root: Path, micro_batches: range, offset: int = 0, cfg: SegmentConfig = CFG) -> int:
    for mb in micro_batches:
        items = []
        for j in range(3):
            ts = [T0 + mb * 100 + j * 10 + k for k in range(4)]
            lat = T0 + mb * 1000 + j if (mb + j) % 2 else None
            data = make_batch(offset, ts, lat_time=lat, codec=(0, 3, 4)[j], value=b"x" * (20 + 7 * j))
            items.append((offset, offset + 3, data, T0 + mb * 1000 + j))
            offset += 4
        append_batches(root, "t", 0, mb, items, cfg)
    return offset


def active(root: Path) -> tuple[Path, CommitRecord]:
    d = partition_dir(root, "t", 0)
    commit = read_commit(d)
    assert commit is not None
    return d, commit


def snapshot_reads(root: Path) -> tuple[list, list]:
    records = read(root, "t", 0, 0, 10_000)
    times = [offsets_for_times(root, "t", 0, T0 + t) for t in range(-5, 1300, 7)]
    return records, times


def check_healthy(root: Path) -> None:
    report = verify_partition(root, "t", 0, index_interval_bytes=CFG.index_interval_bytes)  # 150 in both configs
    assert report.ok, report.problems
    d, commit = active(root)
    for s in commit.segments:  # the recorded checksums describe the files
        index = (d / segment_file_name(s.base_offset, ".index")).read_bytes()
        time_index = (d / segment_file_name(s.base_offset, ".timeindex")).read_bytes()
        if s.index_crc is not None:  # None: a record from before the checksums (kept for old segments)
            assert (s.index_crc, s.time_index_crc) == (zlib.crc32(index), zlib.crc32(time_index))


def test_commit_record_keeps_index_checksums(tmp_path):
    write(tmp_path, range(6))
    check_healthy(tmp_path)
    _, commit = active(tmp_path)
    assert len(commit.segments) >= 3
    assert all(s.index_size > 0 for s in commit.segments[:-1]), "the workload must write index entries"


def _zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _flip_middle_entry(path: Path, entry_size: int) -> None:
    data = bytearray(path.read_bytes())
    assert len(data) >= 2 * entry_size
    middle = (len(data) // entry_size // 2) * entry_size
    data[middle : middle + entry_size] = b"\x7f" * entry_size
    path.write_bytes(bytes(data))


DAMAGE = [
    pytest.param(lambda d, base: (_zero(d / segment_file_name(base, ".index")),
                                  _zero(d / segment_file_name(base, ".timeindex"))), id="zero-filled"),
    pytest.param(lambda d, base: _flip_middle_entry(d / segment_file_name(base, ".timeindex"), 12), id="stale-entry"),
    pytest.param(lambda d, base: _flip_middle_entry(d / segment_file_name(base, ".index"), 8), id="garbage-entry"),
    pytest.param(lambda d, base: ((d / segment_file_name(base, ".index")).write_bytes(b""),
                                  (d / segment_file_name(base, ".timeindex")).write_bytes(b"")), id="short"),
]


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("repaired_by", ["next-append", "startup-repair"])
def test_lost_active_index_pages_are_rebuilt_from_the_log(tmp_path, damage, repaired_by, caplog):
    damaged, reference = tmp_path / "damaged", tmp_path / "reference"
    end = write(damaged, range(4), cfg=ONE_SEGMENT)
    write(reference, range(6), cfg=ONE_SEGMENT)
    d, commit = active(damaged)
    (last,) = commit.segments
    assert last.index_size >= 16 and last.time_index_size >= 24
    append_times = (d / segment_file_name(last.base_offset, ".appendtimeindex")).read_bytes()
    before = snapshot_reads(damaged)

    damage(d, last.base_offset)
    with caplog.at_level(logging.WARNING, logger="gateway.segments"):
        if repaired_by == "startup-repair":
            assert repair_indexes(damaged, "t", 0, ONE_SEGMENT) is True
            assert repair_indexes(damaged, "t", 0, ONE_SEGMENT) is False  # once
            assert snapshot_reads(damaged) == before
            check_healthy(damaged)
        write(damaged, range(4, 6), offset=end, cfg=ONE_SEGMENT)
    assert sum("rebuilding them from the log" in r.getMessage() for r in caplog.records) == 1
    after = (d / segment_file_name(last.base_offset, ".appendtimeindex")).read_bytes()
    assert after[: len(append_times)] == append_times, "the append-time index (fsynced, not rebuildable) is kept"
    check_healthy(damaged)
    assert snapshot_reads(damaged) == snapshot_reads(reference)
    # The same log bytes as a run that never crashed (the time index may hold fewer entries: a rebuild lacks
    # the close-time entries of the earlier commits, as after Kafka's own recovery).
    assert (d / segment_file_name(0)).read_bytes() == (partition_dir(reference, "t", 0) / segment_file_name(0)).read_bytes()


def test_repair_skips_a_locked_or_missing_partition(tmp_path):
    assert repair_indexes(tmp_path, "t", 0) is None
    assert not partition_dir(tmp_path, "t", 0).exists(), "no directory is created for a partition never written"
    write(tmp_path, range(2))
    with PartitionLog.open(tmp_path, "t", 0, CFG):  # an append in progress
        assert repair_indexes(tmp_path, "t", 0, CFG) is None
    assert repair_indexes(tmp_path, "t", 0, CFG) is False


def test_replay_of_a_committed_micro_batch_touches_no_file(tmp_path):
    """A replay opens no segment (it appends nothing), so it neither checks nor rewrites an index."""
    write(tmp_path, range(3))
    d, commit = active(tmp_path)
    last = commit.segments[-1]
    index = d / segment_file_name(last.base_offset, ".timeindex")
    _zero(index)
    write(tmp_path, range(3))
    assert index.read_bytes() == bytes(last.time_index_size)
    assert repair_indexes(tmp_path, "t", 0, CFG) is True


def test_commit_record_without_checksums_is_trusted(tmp_path):
    """Records written before the checksums existed carry none: nothing to compare, nothing rebuilt."""
    write(tmp_path, range(3))
    d, commit = active(tmp_path)
    legacy = replace(commit, segments=tuple(replace(s, index_crc=None, time_index_crc=None) for s in commit.segments))
    write_commit(d, legacy)
    assert read_commit(d).segments == legacy.segments  # type: ignore[union-attr]
    write(tmp_path, range(3, 5), offset=commit.log_end_offset)
    check_healthy(tmp_path)
