"""OffsetIndex (Kafka's `OffsetIndex`, `TimeIndex`, Kafka's OffsetIndexTest): append, lookup, truncate, sanity, capacity."""

from __future__ import annotations

import pytest

from storage.index import CorruptIndexError, IndexFullError, InvalidOffsetError
from storage.offset_index import OffsetIndex, OffsetPosition

BASE = 45


@pytest.fixture
def idx(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, max_index_size=30 * 8)
    yield index
    index.close()


def test_lookup_empty_and_floor(idx):
    assert idx.lookup(100) == OffsetPosition(BASE, 0)
    for i in range(1, 11):
        idx.append(BASE + i * 3, i * 100)
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert idx.lookup(BASE + 3) == OffsetPosition(BASE + 3, 100)
    assert idx.lookup(BASE + 4) == OffsetPosition(BASE + 3, 100)
    assert idx.lookup(BASE + 29) == OffsetPosition(BASE + 27, 900)
    assert idx.lookup(10**9) == OffsetPosition(BASE + 30, 1000)


def test_append_out_of_order_and_full(idx):
    idx.append(BASE + 1, 10)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 1, 20)
    for i in range(2, 31):
        idx.append(BASE + i, i * 10)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.append(BASE + 100, 1000)


def test_truncate_to(idx):
    for i in range(1, 6):
        idx.append(BASE + i * 10, i)
    idx.truncate_to(BASE + 30)
    assert [e.offset for e in idx.all_entries()] == [BASE + 10, BASE + 20]
    idx.truncate_to(BASE + 15)
    assert [e.offset for e in idx.all_entries()] == [BASE + 10]
    idx.truncate_to(BASE)
    assert idx.entries == 0


def test_capacity_then_trimmed_and_reopened(tmp_path):
    path = tmp_path / "00000000000000000045.index"
    index = OffsetIndex(path, BASE, max_index_size=30 * 8 + 7)
    assert index.max_entries == 30 and path.stat().st_size == 0  # the capacity, not allocated
    index.append(BASE + 2, 77)
    index.close()
    assert path.read_bytes() == (2).to_bytes(4, "big") + (77).to_bytes(4, "big")
    again = OffsetIndex(path, BASE, max_index_size=240)
    assert again.entries == 1 and again.max_entries == 1  # existing file: taken as is until resized
    again.resize(240)
    assert again.max_entries == 30 and path.stat().st_size == 8
    again.append(BASE + 3, 99)
    again.close()
    assert OffsetIndex(path, BASE, writable=False).all_entries() == [OffsetPosition(BASE + 2, 77), OffsetPosition(BASE + 3, 99)]


def test_sanity_check(tmp_path):
    path = tmp_path / "00000000000000000045.index"
    path.write_bytes((1).to_bytes(4, "big") + (0).to_bytes(4, "big") + b"\x00\x00\x00")
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, writable=False).sanity_check()
    path.write_bytes((5).to_bytes(4, "big") + (0).to_bytes(4, "big") + (-2).to_bytes(4, "big", signed=True) + bytes(4))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, writable=False).sanity_check()
    # an untrimmed (preallocated, zero-filled) index after a crash is out of order: rebuilt at load
    path.write_bytes((5).to_bytes(4, "big") + (0).to_bytes(4, "big") + bytes(64))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, writable=False).sanity_check()


def test_relative_offset_overflow(idx):
    from storage.index import IndexOffsetOverflowError

    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 0)
