"""LogSegment: append/index policy, truncation, recovery — Kafka's LogSegmentTest cases (Kafka's `LogSegmentTest`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from storage import segment_recovery
from storage.file_names import segment_file_name
from storage.log_config import SegmentConfig
from storage.log_reader import find_offset_by_timestamp
from storage.segment import LogSegment
from validators.codec.record_batch import TimestampType, assign_offsets_and_timestamp

T0 = 1_700_000_000_000


def make_batch(
    base_offset: int,
    timestamps: list[int],
    *,
    lat_time: int | None = None,
    codec: int = 0,
    value: bytes = b"value",
    epoch: int = 0,
) -> bytes:
    """A stored v2 batch: records with the given CreateTimes, offsets from `base_offset`; LogAppendTime
    with `lat_time` (the leader's in-place rewrite), else CreateTime."""
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, ts in enumerate(timestamps):
        builder.append(i, ts, f"k{i}".encode(), value, [])
    raw = bytes(builder.build())
    if lat_time is not None:
        return assign_offsets_and_timestamp(raw, base_offset, TimestampType.LOG_APPEND_TIME, lat_time, epoch)
    return assign_offsets_and_timestamp(raw, base_offset, TimestampType.CREATE_TIME, max(timestamps), epoch)


def one(offset: int, ts: int | None = None) -> bytes:
    """Kafka's test `records(offset)`: one record at `offset` with timestamp offset*10."""
    return make_batch(offset, [offset * 10 if ts is None else ts])


MSG_SIZE = len(one(0))


def segment(tmp_path: Path, base: int, index_interval: int, index_bytes: int = 10 * 1024 * 1024) -> LogSegment:
    return LogSegment(tmp_path, base, SegmentConfig(index_interval_bytes=index_interval, segment_index_bytes=index_bytes),
                      created_ms=0)


def test_find_offset_by_timestamp(tmp_path):
    seg = segment(tmp_path, 40, 2 * MSG_SIZE - 1)
    for o in range(40, 50):
        seg.append(one(o), o * 10)
    assert seg.max_timestamp_so_far == 490

    def find(t):
        r = find_offset_by_timestamp(seg, t)
        return None if r is None else r.offset

    assert find(420) == 42
    assert find(421) == 43
    assert find(430) == 43
    assert find(431) == 44
    assert find(491) is None
    assert find(401) == 41
    assert find(399) == 40


def test_reload_largest_timestamp_and_next_offset_after_truncation(tmp_path):
    seg = segment(tmp_path, 40, 2 * MSG_SIZE - 1)
    for o in range(40, 70):
        seg.append(one(o), o * 10)
    assert seg.time_index.entries == 14
    segment_recovery.truncate_to(seg, 41)
    assert seg.time_index.entries == 0
    assert seg.largest_timestamp() == 400
    assert seg.read_next_offset() == 41


def test_index_for_multiple_batches_in_one_append(tmp_path):
    seg = segment(tmp_path, 0, 1)
    seg.append(one(0, 0) + one(1, 1), 0)
    seg.append(one(2, 2), 0)
    assert [e.offset for e in seg.offset_index.all_entries()] == [1, 2]
    assert [(e.timestamp, e.offset) for e in seg.time_index.all_entries()] == [(1, 1), (2, 2)]


def test_non_monotonic_timestamp_for_multiple_batches(tmp_path):
    seg = segment(tmp_path, 0, 1)
    seg.append(one(0, 1) + one(1, 0) + one(2, 2), 0)
    assert [e.offset for e in seg.offset_index.all_entries()] == [1, 2]
    assert [(e.timestamp, e.offset) for e in seg.time_index.all_entries()] == [(1, 0), (2, 2)]


def test_index_entry_only_when_bytes_strictly_exceed_interval(tmp_path):
    seg = segment(tmp_path, 0, MSG_SIZE)  # exactly one batch since the last entry is not enough
    for o in range(5):
        seg.append(one(o), 0)
    # bytes since last entry: 0, S, 2S (> S: entry at offset 2, position 2S), S, 2S (entry at 4)
    assert [(e.offset, e.position) for e in seg.offset_index.all_entries()] == [(2, 2 * MSG_SIZE), (4, 4 * MSG_SIZE)]


def test_get_first_batch_timestamp(tmp_path):
    seg = segment(tmp_path, 0, 4096)
    assert seg.rolling_based_timestamp() is None  # Kafka: Long.MAX_VALUE for an empty segment
    seg.append(make_batch(0, [1000]), 5)
    assert seg.rolling_based_timestamp() == 1000


def test_truncate(tmp_path):
    seg = segment(tmp_path, 40, 1)
    for o in range(40, 60):
        seg.append(one(o), o)
    for target in (55, 50, 45):
        segment_recovery.truncate_to(seg, target)
        assert seg.read_next_offset() == target
        assert all(e.offset < target for e in seg.offset_index.all_entries())
        assert all(e.offset < target for e in seg.time_index.all_entries())
        assert seg.append_time_index.last_entry.last_offset == target - 1
    seg.append(one(45), 45)
    assert seg.read_next_offset() == 46


def test_truncate_full(tmp_path):
    seg = segment(tmp_path, 40, 1)
    for o in range(40, 50):
        seg.append(one(o), o)
    segment_recovery.truncate_to(seg, 0)
    assert seg.size == 0
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0 and seg.append_time_index.entries == 0
    assert seg.rolling_based_timestamp() is None
    seg.append(one(40), 40)
    assert seg.read_next_offset() == 41


def test_recovery_fixes_corrupt_index(tmp_path):
    seg = segment(tmp_path, 0, 1)
    for o in range(100):
        seg.append(one(o), o)
    expected = [(e.offset, e.position) for e in seg.offset_index.all_entries()]
    seg.close()
    path = tmp_path / segment_file_name(0, ".index")
    data = bytearray(path.read_bytes())
    data[16:40] = b"\xff" * 24
    path.write_bytes(bytes(data))
    seg = segment(tmp_path, 0, 1)
    assert segment_recovery.recover(seg) == 0
    assert [(e.offset, e.position) for e in seg.offset_index.all_entries()] == expected
    for o in range(100):
        assert seg.translate_offset(o).last_offset == o


def test_recovery_fixes_corrupt_time_index(tmp_path):
    seg = segment(tmp_path, 0, 1)
    for o in range(100):
        seg.append(one(o), o)
    seg.close()
    path = tmp_path / segment_file_name(0, ".timeindex")
    path.write_bytes(bytes(range(256)) * 4)
    seg = segment(tmp_path, 0, 1)
    segment_recovery.recover(seg)
    for i in range(100):
        assert find_offset_by_timestamp(seg, i * 10).offset == i
        if i < 99:
            assert find_offset_by_timestamp(seg, i * 10 + 1).offset == i + 1


@pytest.mark.parametrize("corrupt_at", [3, 17, 50, 99])
def test_recovery_with_corrupt_message(tmp_path, corrupt_at):
    seg = segment(tmp_path, 0, 1)
    for o in range(100):
        seg.append(one(o), o)
    position = seg.translate_offset(corrupt_at).position
    seg.close()
    log_path = tmp_path / segment_file_name(0)
    with open(log_path, "r+b") as f:
        f.seek(position + 20)  # inside the CRC-covered bytes
        f.write(b"garbage" * 3)
    seg = segment(tmp_path, 0, 1)
    truncated = segment_recovery.recover(seg)
    assert truncated == 100 * MSG_SIZE - position
    assert seg.read_next_offset() == corrupt_at
    assert all(e.offset < corrupt_at for e in seg.offset_index.all_entries())
    assert seg.append_time_index.entries == corrupt_at


def test_close_appends_final_time_index_entry_and_trims(tmp_path):
    seg = segment(tmp_path, 0, 10_000, index_bytes=1200)
    assert seg.offset_index.max_entries == 150 and seg.time_index.max_entries == 100  # Kafka's capacity
    seg.append(make_batch(0, [T0, T0 + 5]), T0 + 9)
    seg.append(make_batch(2, [T0 + 1]), T0 + 10)
    assert seg.time_index.entries == 0  # interval never reached
    seg.close()
    assert (tmp_path / segment_file_name(0, ".index")).stat().st_size == 0
    timeindex = (tmp_path / segment_file_name(0, ".timeindex")).read_bytes()
    assert timeindex == (T0 + 5).to_bytes(8, "big") + (1).to_bytes(4, "big")  # (max ts, its batch's last offset)
    appendtime = (tmp_path / segment_file_name(0, ".appendtimeindex")).read_bytes()
    assert appendtime == b"".join(t.to_bytes(8, "big") + o.to_bytes(8, "big") for t, o in [(T0 + 9, 1), (T0 + 10, 2)])


def test_reopened_segment_continues_index_interval(tmp_path):
    """bytes_since_last_index_entry comes from the files: a reopen indexes as an uninterrupted writer."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    seg_a = segment(a, 0, 2 * MSG_SIZE)
    for o in range(20):
        seg_a.append(one(o), o)
    seg_a.close()
    for start in range(0, 20, 3):
        seg_b = segment(b, 0, 2 * MSG_SIZE)
        for o in range(start, min(start + 3, 20)):
            seg_b.append(one(o), o)
        seg_b.close()
    assert (a / segment_file_name(0, ".index")).read_bytes() == (b / segment_file_name(0, ".index")).read_bytes()
    assert (a / segment_file_name(0)).read_bytes() == (b / segment_file_name(0)).read_bytes()


def test_offset_overflow_is_refused(tmp_path):
    from storage.segment import LogSegmentOffsetOverflowError

    seg = segment(tmp_path, 0, 4096)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(one(2**31), 0)


def test_a_log_synced_by_the_filesystem_is_not_synced_again_unless_it_changed(tmp_path, monkeypatch):
    import os

    from storage.linux_calls import sync_filesystem
    seg = segment(tmp_path, 0, 1)
    for o in range(10):
        seg.append(one(o), o)
    seg.write_pending()
    sync_filesystem(tmp_path)
    seg.synced_by_filesystem()
    log_fd = seg._fd
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    seg.flush(indexes=False)
    assert log_fd not in synced  # nothing written since the sync ahead
    seg.append(one(10), 10)
    seg.flush(indexes=False)
    assert synced.count(log_fd) == 1  # written since: synced
    # cut back and grown to the size synced before: not the bytes synced before, so synced again
    seg.write_pending()
    seg.synced_by_filesystem()
    size = seg.size
    segment_recovery.truncate_to(seg, 5)
    for o in range(5, 11):
        seg.append(one(o), o)
    seg.write_pending()
    assert seg.size == size
    seg.flush(indexes=False)
    assert synced.count(log_fd) == 2
    seg.close()
