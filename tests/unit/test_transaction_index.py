"""TransactionIndex (Kafka's `TransactionIndex`, `AbortedTxn`, Kafka's TransactionIndexTest): the 34-byte
entry, append order, collecting the aborted transactions of a fetch range, truncation, the sanity check,
and damaged files (only `KafkaStorageError`, naming the file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import KafkaStorageError
from storage.file_names import SEGMENT_FILE_SUFFIXES, TXN_INDEX_FILE_SUFFIX, segment_file_name
from storage.index import CorruptIndexError, InvalidOffsetError
from storage.transaction_index import TOTAL_SIZE, AbortedTxn, TransactionIndex, TxnIndexSearchResult

INT64 = st.integers(-(2**63), 2**63 - 1)
# Kafka's TransactionIndexTest.testCollectAbortedTransactions
KAFKA_TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def path(tmp_path) -> Path:
    return tmp_path / segment_file_name(0, TXN_INDEX_FILE_SUFFIX)


@pytest.fixture
def idx(path):
    index = TransactionIndex(path, 0)
    yield index
    index.close()


def filled(path: Path, txns: list[AbortedTxn], start_offset: int = 0) -> TransactionIndex:
    index = TransactionIndex(path, start_offset)
    for txn in txns:
        index.append(txn)
    return index


# ------------------------------------------------------------------ the entry


def test_encode_is_kafkas_34_byte_layout():
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=0x1112131415161718,
                     last_offset=0x2122232425262728, last_stable_offset=0x3132333435363738)
    assert txn.encode() == bytes.fromhex(
        "0000" "0102030405060708" "1112131415161718" "2122232425262728" "3132333435363738")
    assert len(txn.encode()) == TOTAL_SIZE == 34
    # two's complement for negatives (producer id -1 is Kafka's NO_PRODUCER_ID)
    assert AbortedTxn(-1, 0, 1, -2).encode() == bytes.fromhex("0000" + "ff" * 8 + "00" * 8 + "00" * 7 + "01" + "ff" * 7 + "fe")


@given(INT64, INT64, INT64, INT64)
def test_decode_inverts_encode(pid, first, last, stable):
    txn = AbortedTxn(pid, first, last, stable)
    assert AbortedTxn.decode(txn.encode()) == txn
    assert AbortedTxn.decode(b"junk" + txn.encode(), 4) == txn


def test_decode_rejects_short_data_and_other_versions():
    data = AbortedTxn(7, 1, 2, 3).encode()
    with pytest.raises(ValueError, match="34 bytes, found 33"):
        AbortedTxn.decode(data[:-1])
    for version in (b"\x00\x01", b"\x01\x00", b"\xff\xff"):
        with pytest.raises(ValueError, match="Unexpected aborted transaction version"):
            AbortedTxn.decode(version + data[2:])


def test_fields_must_be_int64():
    with pytest.raises(ValueError, match="last_offset must be an int64"):
        AbortedTxn(1, 0, 2**63, 0)
    with pytest.raises(ValueError, match="producer_id must be an int64"):
        AbortedTxn("1", 0, 1, 0)  # type: ignore[arg-type]


def test_str_is_kafkas_to_string():
    assert str(AbortedTxn(983493, 137, 299, 200)) == (
        "AbortedTxn(version=0, producerId=983493, firstOffset=137, lastOffset=299, lastStableOffset=200)")


def test_suffix_defined_but_not_yet_a_segment_file():
    assert TXN_INDEX_FILE_SUFFIX == ".txnindex"
    assert TXN_INDEX_FILE_SUFFIX not in SEGMENT_FILE_SUFFIXES


# ------------------------------------------------------------------ appending


def test_file_created_at_first_append_and_holds_the_entries(idx, path):
    assert idx.all_aborted() == [] and idx.is_empty()
    idx.flush()
    assert not path.exists()
    for txn in KAFKA_TXNS:
        idx.append(txn)
    idx.flush()
    assert path.read_bytes() == b"".join(t.encode() for t in KAFKA_TXNS)
    assert idx.all_aborted() == KAFKA_TXNS and not idx.is_empty()


def test_last_offset_must_increase(idx, path):
    idx.append(AbortedTxn(1, 5, 15, 13))
    for last in (15, 10):  # Kafka's testLastOffsetMustIncrease, testLastOffsetCannotDecrease
        with pytest.raises(InvalidOffsetError) as e:
            idx.append(AbortedTxn(0, 0, last, 11))
        assert str(e.value) == (
            f"The last offset of appended transactions must increase sequentially, but {last} is not greater "
            f"than current last offset 15 of index {path.absolute()}")
    assert idx.all_aborted() == [AbortedTxn(1, 5, 15, 13)]


def test_reopened_index_appends_after_its_entries_in_order(path):
    # Kafka's testPositionSetCorrectlyWhenOpened, and the file's last entry still counts after a reopen
    filled(path, KAFKA_TXNS).close()
    reopened = TransactionIndex(path, 0)
    with pytest.raises(InvalidOffsetError, match="but 50 is not greater than current last offset 50"):
        reopened.append(AbortedTxn(3, 40, 50, 45))
    reopened.append(AbortedTxn(3, 50, 60, 55))
    assert reopened.all_aborted() == [*KAFKA_TXNS, AbortedTxn(3, 50, 60, 55)]
    reopened.close()
    assert TransactionIndex(path, 0).all_aborted() == [*KAFKA_TXNS, AbortedTxn(3, 50, 60, 55)]


def test_two_readers_see_what_the_writer_appended(idx, path):
    idx.append(KAFKA_TXNS[0])
    reader = TransactionIndex(path, 0)
    assert reader.all_aborted() == KAFKA_TXNS[:1]
    idx.append(KAFKA_TXNS[1])
    assert reader.all_aborted() == KAFKA_TXNS[:2]


# ------------------------------------------------------------------ collecting


def test_collect_aborted_is_kafkas(idx):
    for txn in KAFKA_TXNS:
        idx.append(txn)
    # Kafka's testCollectAbortedTransactions, case by case
    assert idx.collect_aborted(0, 100) == TxnIndexSearchResult(tuple(KAFKA_TXNS), False)
    assert idx.collect_aborted(0, 32) == TxnIndexSearchResult(tuple(KAFKA_TXNS[:3]), True)
    assert idx.collect_aborted(0, 35) == TxnIndexSearchResult(tuple(KAFKA_TXNS), True)
    assert idx.collect_aborted(10, 35) == TxnIndexSearchResult(tuple(KAFKA_TXNS), True)
    assert idx.collect_aborted(11, 35) == TxnIndexSearchResult(tuple(KAFKA_TXNS[1:]), True)
    assert idx.collect_aborted(20, 41) == TxnIndexSearchResult(tuple(KAFKA_TXNS[2:]), False)


def test_collect_aborted_bounds(path):
    txns = [AbortedTxn(5, 10, 20, 8), AbortedTxn(6, 30, 40, 25)]
    index = filled(path, txns)
    # the fetch offset is inclusive (a transaction ending there overlaps), the upper bound exclusive
    assert index.collect_aborted(20, 21).aborted_transactions == (txns[0],)
    assert index.collect_aborted(21, 30).aborted_transactions == ()
    assert index.collect_aborted(21, 31).aborted_transactions == (txns[1],)
    assert index.collect_aborted(41, 100).aborted_transactions == ()
    # complete at the first entry whose last stable offset reaches the upper bound; what follows is not read
    assert index.collect_aborted(0, 8) == TxnIndexSearchResult((), True)
    assert index.collect_aborted(0, 11) == TxnIndexSearchResult((txns[0],), True)
    assert index.collect_aborted(0, 26) == TxnIndexSearchResult((txns[0],), False)
    assert index.collect_aborted(0, 25) == TxnIndexSearchResult((txns[0],), True)
    assert index.collect_aborted(35, 25) == TxnIndexSearchResult((), True)  # empty range: nothing overlaps
    index.close()


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 60)), max_size=8),
       st.integers(-5, 200), st.integers(-5, 200))
def test_collect_aborted_matches_its_definition(tmp_path, spans, fetch, upper):
    path = tmp_path / "00000000000000000000.txnindex"
    path.unlink(missing_ok=True)
    txns, last = [], -1
    for pid, (start_gap, length, stable) in enumerate(spans):
        first = last + 1 + start_gap
        last = first + length
        txns.append(AbortedTxn(pid, first, last, stable))
    index = filled(path, txns)
    result = index.collect_aborted(fetch, upper)
    index.close()
    stop = next((i for i, t in enumerate(txns) if t.last_stable_offset >= upper), None)
    scanned = txns if stop is None else txns[: stop + 1]
    assert result.aborted_transactions == tuple(t for t in scanned if t.last_offset >= fetch and t.first_offset < upper)
    assert result.is_complete == (stop is not None)


# ------------------------------------------------------------------ truncating, resetting, deleting


def test_truncate_to_and_reset(idx, path):
    # Kafka's testTruncate
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        idx.append(txn)
    idx.truncate_to(51)
    assert idx.collect_aborted(0, 100).aborted_transactions == tuple(txns)
    idx.truncate_to(50)
    assert idx.collect_aborted(0, 100).aborted_transactions == tuple(txns[:3])
    assert path.stat().st_size == 3 * TOTAL_SIZE
    idx.truncate_to(16)  # cut at the first entry whose last offset is >= 16
    assert idx.all_aborted() == txns[:2]
    # the entry before the cut is the last one again
    with pytest.raises(InvalidOffsetError, match="but 15 is not greater than current last offset 15"):
        idx.append(AbortedTxn(9, 12, 15, 14))
    idx.append(AbortedTxn(9, 12, 16, 14))
    assert idx.all_aborted() == [*txns[:2], AbortedTxn(9, 12, 16, 14)]
    idx.truncate_to(0)
    assert idx.all_aborted() == [] and path.stat().st_size == 0
    idx.append(AbortedTxn(1, 1, 1, 1))  # anything goes after a truncation to empty
    idx.reset()
    assert idx.collect_aborted(0, 100) == TxnIndexSearchResult((), False)
    assert path.exists() and path.stat().st_size == 0
    idx.append(AbortedTxn(1, 0, 0, 0))
    assert idx.all_aborted() == [AbortedTxn(1, 0, 0, 0)]


def test_truncate_to_and_reset_without_a_file(idx, path):
    idx.truncate_to(0)
    idx.reset()
    assert not path.exists()


def test_truncate_to_a_reopened_file(path):
    filled(path, KAFKA_TXNS).close()
    index = TransactionIndex(path, 0)
    index.truncate_to(35)
    index.close()
    assert path.read_bytes() == b"".join(t.encode() for t in KAFKA_TXNS[:2])


def test_delete(idx, path):
    assert idx.delete() is False
    idx.append(KAFKA_TXNS[0])
    assert idx.delete() is True
    assert not path.exists()
    assert idx.all_aborted() == []


# ------------------------------------------------------------------ sanity check and damaged files


def test_sanity_check_is_kafkas(path):
    # Kafka's testSanityCheck: the same file opened with a later start offset
    filled(path, KAFKA_TXNS).close()
    TransactionIndex(path, 0).sanity_check()
    TransactionIndex(path, 10).sanity_check()  # the first entry's last offset is 10: not less
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex(path, 11).sanity_check()
    assert str(e.value) == (
        "Last offset of aborted transaction AbortedTxn(version=0, producerId=0, firstOffset=0, lastOffset=10, "
        f"lastStableOffset=11) in index {path.absolute()} is less than start offset 11")
    with pytest.raises(CorruptIndexError, match="lastOffset=10,"):
        TransactionIndex(path, 100).sanity_check()  # the first offending entry is named
    TransactionIndex(path.with_name("00000000000000000099.txnindex"), 99).sanity_check()  # no file: nothing wrong


def damaged(path: Path, data: bytes) -> TransactionIndex:
    path.write_bytes(data)
    return TransactionIndex(path, 0)


def every_operation(index: TransactionIndex) -> None:
    index.sanity_check()
    entries = index.all_aborted()
    index.collect_aborted(0, 2**62)
    index.truncate_to(2**62)
    last = max([t.last_offset for t in entries if t.last_offset < 2**62], default=-1)
    index.append(AbortedTxn(0, last + 1, last + 1, 0))
    assert index.all_aborted()[-1] == AbortedTxn(0, last + 1, last + 1, 0)


def test_size_not_a_multiple_of_34(path):
    good = b"".join(t.encode() for t in KAFKA_TXNS)
    for size in (1, 33, 35, len(good) - 1):
        index = damaged(path, good[:size] if size <= len(good) else good + b"\x00")
        for op in (index.sanity_check, index.all_aborted, lambda i=index: i.collect_aborted(0, 1),
                   lambda i=index: i.truncate_to(0), lambda i=index: i.append(AbortedTxn(0, 100, 100, 100))):
            with pytest.raises(CorruptIndexError) as e:
                op()
            assert str(e.value) == (f"Transaction index file {path.name} is corrupt, found {path.stat().st_size} "
                                    f"bytes which is not a multiple of 34.")
        index.close()
    # recovery's way out: reset, then re-append
    index = damaged(path, good[:40])
    index.reset()
    index.append(KAFKA_TXNS[0])
    assert index.all_aborted() == KAFKA_TXNS[:1]
    index.close()


def test_unknown_version(path):
    entries = [t.encode() for t in KAFKA_TXNS]
    entries[2] = b"\x01\x00" + entries[2][2:]
    index = damaged(path, b"".join(entries))
    with pytest.raises(CorruptIndexError) as e:
        index.sanity_check()
    assert str(e.value) == (f"Unexpected aborted transaction version 256 in transaction index {path.absolute()}, "
                            "current version is 0")
    with pytest.raises(CorruptIndexError, match="version 1 in"):
        damaged(path, b"\x00\x01" + entries[0][2:]).all_aborted()


def test_entries_out_of_order(path):
    index = damaged(path, KAFKA_TXNS[1].encode() + KAFKA_TXNS[0].encode())
    with pytest.raises(CorruptIndexError, match=f"{path.name} has entries out of order: last offset 10 after 15"):
        index.sanity_check()
    with pytest.raises(CorruptIndexError, match="out of order"):
        index.collect_aborted(0, 100)


def test_unreadable_file_is_a_storage_error(tmp_path):
    directory = tmp_path / "00000000000000000000.txnindex"
    directory.mkdir()  # a directory where the file should be
    index = TransactionIndex(directory, 0)
    with pytest.raises(KafkaStorageError, match=f"Failed to read from the transaction index {directory}"):
        index.all_aborted()
    with pytest.raises(KafkaStorageError, match=f"Failed to open the transaction index {directory}"):
        index.append(KAFKA_TXNS[0])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=5 * TOTAL_SIZE + 3))
def test_hostile_bytes_raise_only_storage_errors_naming_the_file(tmp_path, data):
    path = tmp_path / "00000000000000000000.txnindex"
    index = damaged(path, data)
    try:
        every_operation(index)
    except KafkaStorageError as e:
        assert path.name in str(e)
    finally:
        index.close()


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(INT64, INT64, st.integers(0, 2**40), INT64), max_size=6),
       st.integers(0, 5 * TOTAL_SIZE - 1), st.integers(1, 255))
def test_any_damaged_byte_is_caught_or_read_as_some_entry(tmp_path, fields, where, flip):
    """A flipped byte in a valid file: either every operation refuses the file, or it reads as valid
    entries that differ from what was written only in the damaged entry."""
    path = tmp_path / "00000000000000000000.txnindex"
    txns, last = [], -1
    for pid, first, gap, stable in fields:
        last += 1 + gap
        txns.append(AbortedTxn(pid, first, last, stable))
    data = bytearray(b"".join(t.encode() for t in txns))
    if not data:
        return
    where %= len(data)
    data[where] ^= flip
    index = damaged(path, bytes(data))
    try:
        read = index.all_aborted()
    except CorruptIndexError as e:
        assert path.name in str(e)
        with pytest.raises(CorruptIndexError):
            index.sanity_check()
    else:
        assert where % TOTAL_SIZE >= 2  # a damaged version is always caught
        assert len(read) == len(txns)
        assert [n for n, (a, b) in enumerate(zip(read, txns, strict=True)) if a != b] == [where // TOTAL_SIZE]
    finally:
        index.close()
