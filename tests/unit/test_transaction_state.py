"""The transaction coordinator's rules (validators/transaction_state.py) against Kafka's
`TransactionCoordinator` / `TransactionMetadata` behaviour, transition by transition."""

from __future__ import annotations

from dataclasses import replace
from itertools import count

import pytest

from validators.errors import Errors
from validators.transaction_state import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    TransactionMetadata,
    TransactionState,
    TransactionStateError,
    add_partitions,
    complete,
    end_transaction,
    expired,
    fence_and_abort,
    init_producer_id,
    timed_out,
)

S = TransactionState
T0 = 1_700_000_000_000
TID = "orders-writer"


def ids() -> count[int]:
    return count(1000)


def init(current: TransactionMetadata | None, now: int = T0, **kw: object) -> TransactionMetadata:
    ids_ = kw.pop("ids", ids())
    t = init_producer_id(current, TID, 60_000, now, lambda: next(ids_), **kw)  # type: ignore[arg-type]
    assert t.error is Errors.NONE and t.write is not None, t
    return t.write


def ongoing(meta: TransactionMetadata, *parts: tuple[str, int], now: int = T0) -> TransactionMetadata:
    t = add_partitions(meta, meta.producer_id, meta.producer_epoch, parts or [("t", 0)], now)
    assert t.error is Errors.NONE and t.write is not None
    return t.write


def test_a_new_transactional_id_gets_a_new_producer_id_at_epoch_0() -> None:
    meta = init(None)
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (1000, 0, S.EMPTY)
    assert meta.last_producer_epoch == NO_PRODUCER_EPOCH and meta.timeout_ms == 60_000


def test_init_again_bumps_the_epoch_of_the_same_producer_id() -> None:
    first = init(None)
    second = init(first, now=T0 + 5)
    assert (second.producer_id, second.producer_epoch, second.last_update_ms) == (1000, 1, T0 + 5)


def test_a_v3_client_keeping_its_id_gets_the_next_epoch_and_a_retry_gets_it_again() -> None:
    first = init(None)
    bumped = init(first, expected=(1000, 0))
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    retried = init(bumped, expected=(1000, 0))  # the answer was lost: the same epoch again
    assert (retried.producer_epoch, retried.last_producer_epoch) == (1, 0)


def test_an_unknown_expected_producer_or_a_stale_epoch_is_fenced() -> None:
    meta = init(init(init(None)))  # epoch 2, last -1
    assert init_producer_id(meta, TID, 60_000, T0, lambda: 1, expected=(7, 0)).error is Errors.PRODUCER_FENCED
    assert init_producer_id(meta, TID, 60_000, T0, lambda: 1, expected=(1000, 0)).error is Errors.PRODUCER_FENCED


def test_bad_requests_are_refused_before_any_state() -> None:
    assert init_producer_id(None, "", 60_000, T0, lambda: 1).error is Errors.INVALID_REQUEST
    for timeout in (0, -1, 900_001):
        assert init_producer_id(None, TID, timeout, T0, lambda: 1).error is Errors.INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(None, TID, 3_600_000, T0, lambda: 1, max_timeout_ms=3_600_000).error is Errors.NONE


def test_init_during_an_open_transaction_fences_the_producer_and_aborts_it() -> None:
    meta = ongoing(init(None), ("a", 0), ("b", 1))
    t = init_producer_id(meta, TID, 60_000, T0 + 9, lambda: 1)
    assert t.error is Errors.NONE and t.write is not None
    assert t.write.state is S.PREPARE_ABORT and t.write.producer_epoch == meta.producer_epoch + 1
    assert t.write.partitions == {("a", 0), ("b", 1)}  # every partition still gets its abort marker
    # while the abort completes the client is told to retry
    assert init_producer_id(t.write, TID, 60_000, T0, lambda: 1).error is Errors.CONCURRENT_TRANSACTIONS
    done = complete(t.write, T0 + 10)
    assert (done.state, done.partitions) == (S.COMPLETE_ABORT, frozenset())
    assert init(done).producer_epoch == meta.producer_epoch + 2


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    meta = replace(init(None), producer_epoch=SHORT_MAX - 1)
    rotated = init(meta, ids=iter([2000]), expected=(1000, SHORT_MAX - 1))
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_id) == (2000, 0, 1000)
    assert rotated.last_producer_epoch == SHORT_MAX - 1
    # the producer retrying with its exhausted epoch (the answer was lost) gets the new id again, not fenced
    t = init_producer_id(rotated, TID, 60_000, T0, lambda: 1, expected=(1000, SHORT_MAX - 1))
    assert t.error is Errors.NONE and t.write is not None
    assert (t.write.producer_id, t.write.producer_epoch) == (2000, 0)
    # without an expected id (a fresh initTransactions) nothing about the old id is kept
    assert init(meta, ids=iter([3000])).last_producer_epoch == NO_PRODUCER_EPOCH


def test_add_partitions_opens_the_transaction_once_and_is_idempotent() -> None:
    meta = init(None)
    first = ongoing(meta, ("a", 0), now=T0 + 1)
    assert (first.state, first.start_ms, first.partitions) == (S.ONGOING, T0 + 1, {("a", 0)})
    more = ongoing(first, ("b", 2), now=T0 + 7)
    assert more.start_ms == T0 + 1 and more.partitions == {("a", 0), ("b", 2)}
    again = add_partitions(more, 1000, 0, [("a", 0)], T0 + 8)
    assert again == (Errors.NONE, None)  # already in: nothing written


@pytest.mark.parametrize(("pid", "epoch", "pending", "error"), [
    (999, 0, False, Errors.INVALID_PRODUCER_ID_MAPPING),
    (1000, 1, False, Errors.PRODUCER_FENCED),
    (1000, 0, True, Errors.CONCURRENT_TRANSACTIONS),
])
def test_add_partitions_and_end_txn_check_the_producer_in_kafkas_order(pid: int, epoch: int, pending: bool,
                                                                        error: Errors) -> None:
    meta = ongoing(init(None))
    assert add_partitions(meta, pid, epoch, [("x", 0)], T0, pending=pending).error is error
    assert end_transaction(meta, pid, epoch, True, T0, pending=pending).error is error
    assert add_partitions(None, 1000, 0, [("x", 0)], T0).error is Errors.INVALID_PRODUCER_ID_MAPPING


def test_end_txn_prepares_then_completes_and_answers_retries_as_kafka_does() -> None:
    meta = ongoing(init(None))
    prepared = end_transaction(meta, 1000, 0, True, T0 + 3).write
    assert prepared is not None and prepared.state is S.PREPARE_COMMIT
    assert end_transaction(prepared, 1000, 0, True, T0).error is Errors.CONCURRENT_TRANSACTIONS
    assert end_transaction(prepared, 1000, 0, False, T0).error is Errors.INVALID_TXN_STATE
    assert add_partitions(prepared, 1000, 0, [("z", 0)], T0).error is Errors.CONCURRENT_TRANSACTIONS
    done = complete(prepared, T0 + 4)
    assert done.state is S.COMPLETE_COMMIT
    assert end_transaction(done, 1000, 0, True, T0) == (Errors.NONE, None)  # a retried commit
    assert end_transaction(done, 1000, 0, False, T0).error is Errors.INVALID_TXN_STATE
    # Empty: nothing to end
    assert end_transaction(init(None), 1000, 0, True, T0).error is Errors.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert ongoing(done, now=T0 + 20).start_ms == T0 + 20


def test_abort_path_and_completion_only_from_a_prepared_state() -> None:
    aborting = end_transaction(ongoing(init(None)), 1000, 0, False, T0).write
    assert aborting is not None and aborting.state is S.PREPARE_ABORT
    assert complete(aborting, T0).state is S.COMPLETE_ABORT
    with pytest.raises(TransactionStateError, match="nothing to complete in state Ongoing"):
        complete(ongoing(init(None)), T0)


def test_a_transaction_past_its_timeout_is_fenced_and_aborted() -> None:
    meta = ongoing(init(None), now=T0)
    assert not timed_out(meta, T0 + 60_000)
    assert timed_out(meta, T0 + 60_001)
    assert not timed_out(init(None), T0 + 10**9)  # nothing open
    aborted = fence_and_abort(meta, T0 + 60_001)
    assert (aborted.state, aborted.producer_epoch) == (S.PREPARE_ABORT, 1)
    # the old producer is fenced from then on
    assert end_transaction(aborted, 1000, 0, True, T0).error is Errors.PRODUCER_FENCED


def test_an_idle_transactional_id_expires_only_without_an_open_transaction() -> None:
    meta = init(None, now=T0)
    assert not expired(meta, T0 + 1000, expiration_ms=2000)
    assert expired(meta, T0 + 2000, expiration_ms=2000)
    assert not expired(ongoing(meta, now=T0), T0 + 10**9, expiration_ms=2000)


def test_illegal_transitions_raise_and_the_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    with pytest.raises(TransactionStateError, match="illegal transition from Empty to PrepareCommit"):
        init(None).transition(S.PREPARE_COMMIT, T0)
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
