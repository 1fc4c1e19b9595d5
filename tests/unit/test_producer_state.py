"""Idempotent producer state rules (ProducerStateEntry / ProducerAppendInfo, Kafka's produce path (`UnifiedLog.append`) step 17), the
table that holds the entries by producer id, and its encodings in the stage's state."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validators.errors import Errors
from validators.producer_state import (
    INT_MAX,
    NO_PRODUCERS,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateError,
    ProducerTable,
    append_batch,
    check_append,
    expire,
    find,
    increment_sequence,
    is_expired,
    producers_from_json,
    producers_from_state,
    producers_to_json,
    producers_to_state,
)

TP = "t-0"
PID = 1324


def entry(epoch: int = 10, last_seq: int = 4, last_ts: int = 1000) -> ProducerStateEntry:
    return ProducerStateEntry(PID, epoch, (BatchMetadata(0, last_seq, 0, last_seq, 77),), last_ts)


def test_increment_sequence_wraps_past_int_max() -> None:
    assert increment_sequence(0, 4) == 4
    assert increment_sequence(INT_MAX, 0) == INT_MAX
    assert increment_sequence(INT_MAX, 1) == 0
    assert increment_sequence(INT_MAX - 1, 3) == 1


def test_unknown_producer_accepts_any_sequence() -> None:
    check_append(None, PID, 0, 0, 0, TP)
    check_append(None, PID, 3, 42, 0, TP)  # state expired or deleted: no known epoch


def test_in_sequence_and_gap() -> None:
    check_append(entry(), PID, 10, 5, 5, TP)
    with pytest.raises(ProducerStateError) as e:
        check_append(entry(), PID, 10, 6, 100, TP)
    assert e.value.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert e.value.message == (
        "Out of order sequence number for producer 1324 at offset 100 in partition t-0: 6 (incoming seq. number), "
        "4 (current end sequence number)"
    )
    with pytest.raises(ProducerStateError, match=r": 4 \(incoming seq. number\), 4 \(current end"):
        check_append(entry(), PID, 10, 4, 100, TP)


def test_sequence_wraps_to_zero_after_int_max() -> None:
    check_append(entry(last_seq=INT_MAX), PID, 10, 0, 9, TP)
    with pytest.raises(ProducerStateError):
        check_append(entry(last_seq=INT_MAX), PID, 10, 1, 9, TP)


def test_stale_epoch() -> None:
    with pytest.raises(ProducerStateError) as e:
        check_append(entry(epoch=10), PID, 9, 5, 55, TP)
    assert e.value.error is Errors.INVALID_PRODUCER_EPOCH
    assert e.value.message == (
        "Epoch of producer 1324 at offset 55 in t-0 is 9, which is smaller than the last seen epoch 10"
    )


def test_new_epoch_must_start_at_zero() -> None:
    check_append(entry(epoch=10), PID, 11, 0, 5, TP)
    with pytest.raises(ProducerStateError) as e:
        check_append(entry(epoch=10), PID, 11, 5, 5, TP)
    assert e.value.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # (sic) Kafka's text has no space before "at offset"
    assert e.value.message == (
        "Invalid sequence number for new epoch of producer 1324at offset 5 in partition t-0: 11 (request epoch), "
        "5 (seq. number), 10 (current producer epoch)"
    )


def test_append_keeps_the_last_five_batches_and_a_new_epoch_clears_them() -> None:
    producers = NO_PRODUCERS
    e = None
    for i in range(7):
        producers = append_batch(producers, e, PID, 0, BatchMetadata(i, i, 10 + i, 10 + i, 100 + i), 500 + i)
        e = producers.get(PID)
        assert e is not None
    assert len(e.batches) == NUM_BATCHES_TO_RETAIN
    assert [b.first_seq for b in e.batches] == [2, 3, 4, 5, 6]
    assert e.last_timestamp == 506 and e.last_seq == 6
    assert e.find_duplicate(0, 2, 2) == BatchMetadata(2, 2, 12, 12, 102)
    assert e.find_duplicate(0, 1, 1) is None  # fell out of the cache
    assert e.find_duplicate(1, 2, 2) is None  # other epoch
    assert e.find_duplicate(0, 2, 3) is None  # not exactly a cached range
    producers = append_batch(producers, e, PID, 1, BatchMetadata(0, 0, 20, 20, 200), 600)
    assert list(producers) == [ProducerStateEntry(PID, 1, (BatchMetadata(0, 0, 20, 20, 200),), 600)]


def test_append_moves_the_updated_producer_last_and_keeps_others() -> None:
    other = ProducerStateEntry(7, 0, (BatchMetadata(0, 0, 0, 0, 1),), 1)
    mine = entry(last_ts=0)
    producers = append_batch(ProducerTable((mine, other)), mine, PID, 10, BatchMetadata(5, 5, 9, 9, 3), 4)
    assert [p.producer_id for p in producers] == [7, PID]
    assert producers.get(7) == other


def test_expiry_boundary_is_inclusive() -> None:
    e = entry(last_ts=1000)
    assert not is_expired(e, 1000 + 86_399_999, 86_400_000)
    assert is_expired(e, 1000 + 86_400_000, 86_400_000)
    table = ProducerTable((e,))
    assert find(table, PID, 1000 + 86_399_999, 86_400_000) is e
    assert find(table, PID, 1000 + 86_400_000, 86_400_000) is None
    assert find(table, 99, 0, 86_400_000) is None
    assert expire(table, 1000 + 86_400_000, 86_400_000) == NO_PRODUCERS
    assert expire(table, 1000, 86_400_000) is table


def test_json_round_trip() -> None:
    producers = ProducerTable((entry(), ProducerStateEntry(-5 + 10, 0, (), -1)))
    text = producers_to_json(producers)
    assert producers_from_json(text) == producers
    assert producers_to_json(NO_PRODUCERS) == "[]"
    assert producers_from_json("") == producers_from_json(None) == producers_from_json("[]") == NO_PRODUCERS
    assert '"producer_id":1324' in text  # compact
    assert producers_from_state(text) == producers  # the state of an earlier checkpoint


@pytest.mark.parametrize(
    "text", ["{", "{}", "[1]", '[{"batches": 1}]', '[{"producer_id": 1, "producer_epoch": 0, "last_timestamp": 0, '
                                                   '"batches": [[1, 2]]}]',
             '[{"producer_id": "1", "producer_epoch": 0, "last_timestamp": 0, "batches": []}]'],
)
def test_bad_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="producer state"):
        producers_from_json(text)


# ---------------------------------------------------------------------------------------------- the table

class _Reference:
    """The table's rules the plain way, as this module kept them before the table: a tuple, scanned whole
    for every expiry, lookup and update."""

    def __init__(self) -> None:
        self.entries: tuple[ProducerStateEntry, ...] = ()

    def expire(self, now: int, expiration: int) -> None:
        self.entries = tuple(e for e in self.entries if not is_expired(e, now, expiration))

    def find(self, pid: int, now: int, expiration: int) -> ProducerStateEntry | None:
        return next((e for e in self.entries if e.producer_id == pid and not is_expired(e, now, expiration)), None)

    def append(self, entry: ProducerStateEntry) -> None:
        self.entries = tuple(e for e in self.entries if e.producer_id != entry.producer_id) + (entry,)


_steps = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2), st.integers(0, 400)), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(_steps, st.sampled_from([50, 300, 86_400_000]))
def test_the_table_follows_the_reference_through_appends_expiry_and_both_encodings(
    steps: list[tuple[int, int, int]], expiration: int,
) -> None:
    """Appends of random producers at a clock that never goes back (the gateway's), with expiry before each,
    as `_decide_v2` does: same entries, same lookups; and the state read back from either encoding is the
    same table, also when the next micro-batch continues from it."""
    table, reference, now = NO_PRODUCERS, _Reference(), 0
    for i, (pid, epoch, advance) in enumerate(steps):
        now += advance
        table = expire(table, now, expiration)
        reference.expire(now, expiration)
        found = find(table, pid, now, expiration)
        assert found == reference.find(pid, now, expiration)
        batch = BatchMetadata(i, i, i, i, now)
        table = append_batch(table, found, pid, epoch, batch, now)
        reference.append(ProducerStateEntry(
            pid, epoch, ((found.batches if found and found.producer_epoch == epoch else ()) + (batch,))[-5:], now))
        assert list(table) == sorted(reference.entries, key=lambda e: (e.last_timestamp, e.producer_id))
        if i % 7 == 0:  # a micro-batch boundary: the stage writes the state and reads it back
            assert producers_from_json(producers_to_json(table)) == table
            table = producers_from_state(producers_to_state(table))
            assert list(table) == sorted(reference.entries, key=lambda e: (e.last_timestamp, e.producer_id))


def test_an_update_leaves_earlier_tables_as_they_were() -> None:
    first = ProducerTable((entry(),))
    second = append_batch(first, first.get(PID), PID, 10, BatchMetadata(5, 5, 5, 5, 5), 2000)
    assert first.get(PID) == entry() and second.get(PID) != entry()
    assert first != second


def test_the_state_encoding_keeps_every_field_at_its_limits() -> None:
    edge = ProducerStateEntry(
        2**63 - 1, 32767, tuple(BatchMetadata(INT_MAX - 4 + i, -1, 2**63 - 5 + i, 2**63 - 1, -(2**63)) for i in range(5)),
        -1, 2**63 - 1, 2**31 - 1,
    )
    table = ProducerTable((edge, entry(), ProducerStateEntry(0, -1, (), 0)))
    text = producers_to_state(table)
    assert text.startswith("P2:") and text.isascii()
    assert producers_from_state(text) == table
    assert producers_from_state(text).open_transactions == {2**63 - 1: 2**63 - 1}
    assert producers_from_state(producers_to_state(NO_PRODUCERS)) == NO_PRODUCERS


@pytest.mark.parametrize("payload", [b"\x00" * 7, b"\x00" * 180])
def test_a_state_of_the_wrong_length_is_a_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError, match="producer state"):
        producers_from_state("P1:" + base64.b64encode(payload).decode())


def test_a_state_with_too_many_cached_batches_is_a_value_error_when_read() -> None:
    good = producers_to_state(ProducerTable((entry(),)))
    raw = bytearray(base64.b64decode(good[3:]))
    raw[18] = 6  # the number of cached batches
    table = producers_from_state("P2:" + base64.b64encode(bytes(raw)).decode())
    with pytest.raises(ValueError, match="producer state: producer 1324 has 6 cached batches"):
        table.get(PID)


def test_a_state_written_before_transactions_reads_with_none_open() -> None:
    """A "P1:" checkpoint (entries without the transaction fields) is read as producers with no transaction."""
    p2 = base64.b64decode(producers_to_state(ProducerTable((entry(),)))[3:])
    table = producers_from_state("P1:" + base64.b64encode(p2[:-12]).decode())
    assert table == ProducerTable((entry(),)) and table.open_transactions == {}
    assert table.get(PID).current_txn_first_offset == -1  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=600).map(lambda b: "P1:" + base64.b64encode(b).decode()),
                 st.binary(max_size=600).map(lambda b: "P2:" + base64.b64encode(b).decode()),
                 st.text(max_size=60).map(lambda t: "P1:" + t),
                 st.text(max_size=60)))
def test_hostile_state_text_is_a_value_error_or_a_table(text: str) -> None:
    """The state column is the gateway's own, but a damaged checkpoint must fail with a clear error, never
    with anything else."""
    try:
        table = producers_from_state(text)
        list(table)
    except ValueError as e:
        assert "producer state" in str(e)
    else:
        assert isinstance(table, ProducerTable)
        assert json.loads(producers_to_json(table)) is not None
