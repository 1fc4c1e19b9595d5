"""Idempotent producer state rules (ProducerStateEntry / ProducerAppendInfo, reference §1.1 step 17)."""

from __future__ import annotations

import pytest

from validators.errors import Errors
from validators.producer_state import (
    INT_MAX,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateError,
    append_batch,
    check_append,
    expire,
    find,
    increment_sequence,
    is_expired,
    producers_from_json,
    producers_to_json,
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
    producers: tuple[ProducerStateEntry, ...] = ()
    e = None
    for i in range(7):
        producers = append_batch(producers, e, PID, 0, BatchMetadata(i, i, 10 + i, 10 + i, 100 + i), 500 + i)
        e = producers[-1]
    assert len(e.batches) == NUM_BATCHES_TO_RETAIN
    assert [b.first_seq for b in e.batches] == [2, 3, 4, 5, 6]
    assert e.last_timestamp == 506 and e.last_seq == 6
    assert e.find_duplicate(0, 2, 2) == BatchMetadata(2, 2, 12, 12, 102)
    assert e.find_duplicate(0, 1, 1) is None  # fell out of the cache
    assert e.find_duplicate(1, 2, 2) is None  # other epoch
    assert e.find_duplicate(0, 2, 3) is None  # not exactly a cached range
    producers = append_batch(producers, e, PID, 1, BatchMetadata(0, 0, 20, 20, 200), 600)
    assert producers[-1].producer_epoch == 1
    assert producers[-1].batches == (BatchMetadata(0, 0, 20, 20, 200),)


def test_append_moves_the_updated_producer_last_and_keeps_others() -> None:
    other = ProducerStateEntry(7, 0, (BatchMetadata(0, 0, 0, 0, 1),), 1)
    mine = entry()
    producers = append_batch((mine, other), mine, PID, 10, BatchMetadata(5, 5, 9, 9, 3), 4)
    assert [p.producer_id for p in producers] == [7, PID]


def test_expiry_boundary_is_inclusive() -> None:
    e = entry(last_ts=1000)
    assert not is_expired(e, 1000 + 86_399_999, 86_400_000)
    assert is_expired(e, 1000 + 86_400_000, 86_400_000)
    assert find((e,), PID, 1000 + 86_399_999, 86_400_000) is e
    assert find((e,), PID, 1000 + 86_400_000, 86_400_000) is None
    assert find((e,), 99, 0, 86_400_000) is None
    assert expire((e,), 1000 + 86_400_000, 86_400_000) == ()
    kept = (e,)
    assert expire(kept, 1000, 86_400_000) is kept


def test_json_round_trip() -> None:
    producers = (entry(), ProducerStateEntry(-5 + 10, 0, (), -1))
    text = producers_to_json(producers)
    assert producers_from_json(text) == producers
    assert producers_to_json(()) == "[]"
    assert producers_from_json("") == () and producers_from_json(None) == () and producers_from_json("[]") == ()
    assert '"producer_id":1324' in text  # compact


@pytest.mark.parametrize(
    "text", ["{", "{}", "[1]", '[{"batches": 1}]', '[{"producer_id": 1, "producer_epoch": 0, "last_timestamp": 0, '
                                                   '"batches": [[1, 2]]}]',
             '[{"producer_id": "1", "producer_epoch": 0, "last_timestamp": 0, "batches": []}]'],
)
def test_bad_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="producer state"):
        producers_from_json(text)
