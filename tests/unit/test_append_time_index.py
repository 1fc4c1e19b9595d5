"""The append-time index of a reopened active segment (`storage/append_time_index.py`).

Each micro-batch reopens the partition's active segment. The writer takes the committed entries' count and
CRC from the commit record instead of reading them (one entry per batch, up to a 1 GiB segment), so what it
writes must be exactly what a writer that read them all writes: the same files, the same commit records,
the same answers, truncation into the committed prefix included — and damage to that prefix must still be
found by the readers, not folded into a fresh checksum.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from front_door.apis.fetch import read_partition
from storage import append_time_index
from storage.batch_appender import append_batches
from storage.commit_record import COMMIT_FILE, read_commit
from storage.file_names import partition_dir, segment_bases
from storage.log_config import SegmentConfig
from storage.log_reader import PartitionReader, read
from storage.partition_log import PartitionLog
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch

CFG = SegmentConfig(segment_bytes=1 << 20)
BATCHES_PER_MICRO_BATCH = 5


def _micro_batch(mb: int) -> list[tuple[int, int, bytes, int]]:
    items = []
    for j in range(BATCHES_PER_MICRO_BATCH):
        offset = (mb * BATCHES_PER_MICRO_BATCH + j) * 2
        lat = T0 + mb * 1000 + j if j % 2 else None
        items.append((offset, offset + 1, make_batch(offset, [T0 + offset, T0 + offset + 1], lat_time=lat),
                      T0 + mb * 1000 + j))
    return items


def _forget_append_time_crc(root: Path) -> None:
    """A commit record without the append-time index CRC (as an earlier version wrote): the writer reads."""
    record = partition_dir(root, "t", 0) / COMMIT_FILE
    doc = json.loads(record.read_text())
    del doc["crc32"]  # nor a CRC-32 of its own
    if doc["active"] is not None:  # the one segment a writer reads
        doc["active"]["append_time_index_crc"] = None
    record.write_text(json.dumps(doc))


def _files(root: Path) -> dict[str, bytes]:
    directory = partition_dir(root, "t", 0)
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.endswith("appendtimeindex")}


def _append_time_file(root: Path) -> Path:
    directory = partition_dir(root, "t", 0)
    (base,) = segment_bases(directory)
    return directory / f"{base:020d}.appendtimeindex"


def test_a_reopened_writer_reads_no_committed_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for mb in range(4):
        append_batches(tmp_path, "t", 0, mb, _micro_batch(mb), CFG)
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".appendtimeindex"):
            reads.append(length)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(append_time_index.os, "pread", counting_pread)
    append_batches(tmp_path, "t", 0, 4, _micro_batch(4), CFG)
    assert reads and max(reads) == append_time_index.ENTRY_SIZE  # the last entry only
    committed = read_commit(partition_dir(tmp_path, "t", 0))
    assert committed is not None
    (state,) = committed.segments
    data = _append_time_file(tmp_path).read_bytes()
    assert len(data) == state.append_time_index_size == 5 * BATCHES_PER_MICRO_BATCH * append_time_index.ENTRY_SIZE
    assert state.append_time_index_crc == zlib.crc32(data)


def test_lazy_and_reading_writers_write_the_same(tmp_path: Path) -> None:
    lazy, reading = tmp_path / "lazy", tmp_path / "reading"
    for mb in range(5):
        append_batches(lazy, "t", 0, mb, _micro_batch(mb), CFG)
        if mb:
            _forget_append_time_crc(reading)
        append_batches(reading, "t", 0, mb, _micro_batch(mb), CFG)
    assert _files(lazy) == _files(reading)
    lazy_commit, reading_commit = read_commit(partition_dir(lazy, "t", 0)), read_commit(partition_dir(reading, "t", 0))
    assert lazy_commit == reading_commit
    assert [r.log_append_time for r in read(lazy, "t", 0, 0)] == [r.log_append_time for r in read(reading, "t", 0, 0)]


@pytest.mark.parametrize("offset", [0, 3, 14, 31, 48])
def test_truncation_into_the_committed_prefix(tmp_path: Path, offset: int) -> None:
    for mb in range(5):
        append_batches(tmp_path, "t", 0, mb, _micro_batch(mb), CFG)
    before = _append_time_file(tmp_path).read_bytes()
    with PartitionLog.open(tmp_path, "t", 0, CFG) as log:
        log.truncate_to(offset)
    kept_batches = offset // 2  # every batch holds two offsets; the one holding `offset` goes
    after = _append_time_file(tmp_path).read_bytes()
    assert after == before[: kept_batches * append_time_index.ENTRY_SIZE]
    assert verify_partition(tmp_path, "t", 0).ok
    records = read(tmp_path, "t", 0, 0)
    assert [r.offset for r in records] == list(range(kept_batches * 2))
    assert [r.log_append_time for r in records] == [
        T0 + mb * 1000 + j for mb in range(5) for j in range(BATCHES_PER_MICRO_BATCH) for _ in range(2)
    ][: kept_batches * 2]


def test_damage_to_the_committed_prefix_is_still_found(tmp_path: Path) -> None:
    for mb in range(3):
        append_batches(tmp_path, "t", 0, mb, _micro_batch(mb), CFG)
    assert verify_partition(tmp_path, "t", 0).ok
    path = _append_time_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[7] ^= 0x01  # the first entry's append time, by 1 ms: still in order, only its CRC can tell
    path.write_bytes(bytes(data))
    append_batches(tmp_path, "t", 0, 3, _micro_batch(3), CFG)
    report = verify_partition(tmp_path, "t", 0)
    assert not report.ok
    assert any(".appendtimeindex" in p for p in report.problems)


def test_kafkas_answers_leave_the_append_time_index_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetch and ListOffsets carry no append time: a front door reading the active segment at every Fetch
    must not read (or check) one entry per batch of it."""
    for mb in range(3):
        append_batches(tmp_path, "t", 0, mb, _micro_batch(mb), CFG)
    path = _append_time_file(tmp_path)
    path.write_bytes(b"\xff" * len(path.read_bytes()))  # garbage of the committed length
    opened: list[str] = []
    real_open = open

    def counting_open(file: object, *args: object, **kwargs: object) -> object:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(append_time_index, "open", counting_open, raising=False)
    fetched = read_partition(tmp_path, "t", 0, 0, 1 << 20, True)
    log_bytes = b"".join(item[2] for mb in range(3) for item in _micro_batch(mb))
    assert fetched.error == ErrorCode.none and fetched.high_watermark == 30
    assert fetched.records == log_bytes
    with PartitionReader(tmp_path, "t", 0, append_times=False) as reader:
        with pytest.raises(ValueError, match="append times"):
            list(reader.read(0))
    assert not [name for name in opened if name.endswith(".appendtimeindex")]
    records = read(tmp_path, "t", 0, 0, 100)  # the records' reader does read it, finds the damage
    assert [name for name in opened if name.endswith(".appendtimeindex")]
    # rebuilt from the log: a LogAppendTime batch's own time, -1 (unknown) for the others
    assert [r.log_append_time for r in records] == [
        T0 + mb * 1000 + j if j % 2 else -1 for mb in range(3) for j in range(BATCHES_PER_MICRO_BATCH) for _ in range(2)
    ]
