"""TimeIndex — Kafka's TimeIndexTest (Kafka's `TimeIndexTest`): baseOffset 45, maxEntries 30, entries i -> (10i, 45+10i)."""

from __future__ import annotations

import pytest

from storage.index import CorruptIndexError, IndexFullError, InvalidOffsetError
from storage.time_index import TimeIndex, TimestampOffset, TimestampOrderError

BASE = 45
MAX_ENTRIES = 30


@pytest.fixture
def idx(tmp_path):
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, max_index_size=MAX_ENTRIES * 12)
    yield index
    index.close()


def append_entries(index: TimeIndex, n: int) -> None:
    for i in range(1, n + 1):
        index.maybe_append(i * 10, i * 10 + BASE)


def test_look_up(idx):
    assert idx.lookup(100) == TimestampOffset(-1, BASE)
    append_entries(idx, MAX_ENTRIES - 1)
    assert idx.lookup(9) == TimestampOffset(-1, BASE)
    assert idx.lookup(25) == TimestampOffset(20, 65)
    assert idx.lookup(30) == TimestampOffset(30, 75)


def test_entry(idx):
    append_entries(idx, MAX_ENTRIES - 1)
    assert idx.entry(0) == TimestampOffset(10, 55)
    assert idx.entry(1) == TimestampOffset(20, 65)
    assert idx.entry(2) == TimestampOffset(30, 75)
    assert idx.entry(3) == TimestampOffset(40, 85)


def test_entry_overflow(idx):
    with pytest.raises(IndexError):
        idx.entry(0)


def test_truncate(idx):
    append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate()
    assert idx.entries == 0
    append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate_to(10 + BASE)
    assert idx.entries == 0


def test_truncate_to_keeps_smaller_offsets(idx):
    append_entries(idx, 5)  # offsets 55, 65, 75, 85, 95
    idx.truncate_to(80)
    assert [e.offset for e in idx.all_entries()] == [55, 65, 75]
    idx.truncate_to(75)
    assert [e.offset for e in idx.all_entries()] == [55, 65]


def test_append(idx):
    append_entries(idx, MAX_ENTRIES - 1)
    with pytest.raises(IndexFullError):
        idx.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10000, (MAX_ENTRIES - 2) * 10, skip_full_check=True)
    assert idx.maybe_append(10000, 1000, skip_full_check=True)
    assert idx.last_entry == TimestampOffset(10000, 1000)


def test_timestamp_going_backwards_is_refused_and_equal_skipped(idx):
    assert idx.maybe_append(100, 50)
    assert not idx.maybe_append(100, 60)  # equal timestamp: silently skipped
    with pytest.raises(TimestampOrderError):
        idx.maybe_append(99, 70)
    assert idx.entries == 1


def test_is_full(idx):
    append_entries(idx, MAX_ENTRIES - 2)
    assert not idx.is_full()
    idx.maybe_append(MAX_ENTRIES * 10, MAX_ENTRIES * 10 + BASE)
    assert idx.is_full()  # maxEntries - 1: one slot stays for the roll/close entry


def test_last_entry(idx):
    assert idx.last_entry == TimestampOffset(-1, BASE)
    idx.maybe_append(1, 1 + BASE)
    assert idx.last_entry == TimestampOffset(1, 1 + BASE)


def test_no_timestamp_is_never_indexed(idx):
    assert not idx.maybe_append(-1, BASE + 1)
    assert idx.entries == 0


def test_sanity_check(tmp_path):
    path = tmp_path / "00000000000000000045.timeindex"
    index = TimeIndex(path, BASE, max_index_size=MAX_ENTRIES * 12)
    append_entries(index, 3)
    index.close()
    TimeIndex(path, BASE, writable=False).sanity_check()

    data = bytearray(path.read_bytes())  # last offset below the base offset
    data[-4:] = (-1).to_bytes(4, "big", signed=True)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, writable=False).sanity_check()

    data = bytearray(path.read_bytes())  # last timestamp below the first
    data[-12:] = (5).to_bytes(8, "big") + (30).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, writable=False).sanity_check()

    path.write_bytes(bytes(data) + b"\x00" * 5)  # not a multiple of 12
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, writable=False).sanity_check()


def test_resize_and_trim(tmp_path):
    path = tmp_path / "00000000000000000045.timeindex"
    index = TimeIndex(path, BASE, max_index_size=MAX_ENTRIES * 12 + 5)
    assert index.max_entries == MAX_ENTRIES  # Kafka's capacity, rounded down to whole entries
    assert path.stat().st_size == 0  # the file holds only the entries written
    append_entries(index, 4)
    index.trim_to_valid_size()
    assert path.stat().st_size == 4 * 12 and index.max_entries == 4
    index.resize(MAX_ENTRIES * 12)
    assert index.max_entries == MAX_ENTRIES and index.entries == 4 and path.stat().st_size == 4 * 12
    index.maybe_append(50, 50 + BASE)
    index.write_pending()
    assert path.stat().st_size == 5 * 12
    index.truncate_to_entries(4)
    assert path.stat().st_size == 4 * 12  # a dropped entry is off the disk too
    index.close()
    assert path.stat().st_size == 4 * 12
    reopened = TimeIndex(path, BASE, writable=False)
    assert reopened.entries == 4 and reopened.entry_size == 12
    assert reopened.entry(3) == TimestampOffset(40, 85)
