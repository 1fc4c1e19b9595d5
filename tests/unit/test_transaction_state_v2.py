"""Transaction version 2 at the coordinator (validators/transaction_state.py) against Kafka 4.x's
`TransactionCoordinator.endTransaction` and `TransactionMetadata` (KIP-890): the epoch bumped by every end, the
retry table, the rotation to a new producer id, the leader's adds and verification, the coordinator's own aborts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.transaction_version import TransactionVersion
from validators.errors import Errors
from validators.transaction_state import (
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TransactionState,
    add_partitions,
    complete,
    end_transaction,
    fence_and_abort,
    init_producer_id,
    verify_partitions,
)

S = TransactionState
TV2 = TransactionVersion.TV_2
T0 = 1_700_000_000_000
TID = "orders-writer"


def fresh(epoch: int = 0) -> TransactionMetadata:
    return TransactionMetadata(TID, 1000, epoch, 60_000, S.EMPTY, last_update_ms=T0)


def ongoing(meta: TransactionMetadata, *parts: tuple[str, int], now: int = T0) -> TransactionMetadata:
    t = add_partitions(meta, meta.producer_id, meta.producer_epoch, parts or [("t", 0)], now, transaction_version=TV2)
    assert t.error is Errors.NONE and t.write is not None, t
    return t.write


def end(meta: TransactionMetadata, epoch: int, commit: bool, pid: int = 1000, **kw: object):  # type: ignore[no-untyped-def]
    return end_transaction(meta, pid, epoch, commit, T0 + 10, transaction_version=TV2, **kw)  # type: ignore[arg-type]


def test_request_versions_tell_the_transaction_version_as_kafka_does() -> None:
    assert [TransactionVersion.for_end_txn(v) for v in (0, 4, 5)] == [TransactionVersion.TV_0] * 2 + [TV2]
    assert [TransactionVersion.for_add_partitions_to_txn(v) for v in (3, 4, 5)] == [TransactionVersion.TV_0, TV2, TV2]
    assert TransactionVersion.of_level(7) is TV2 and TransactionVersion.of_level(-1) is TransactionVersion.TV_0
    assert TV2.supports_epoch_bump and not TransactionVersion.TV_1.supports_epoch_bump


def test_a_leaders_add_opens_a_tv2_transaction_and_the_end_bumps_the_epoch() -> None:
    meta = ongoing(fresh(3), ("a", 0), ("b", 1))
    assert (meta.state, meta.client_transaction_version, meta.partitions) == (S.ONGOING, TV2, {("a", 0), ("b", 1)})
    prepared = end(meta, 3, True).write
    assert prepared is not None
    # prepareAbortOrCommit with TV_2: the markers carry the bumped epoch, the one before it is kept
    assert (prepared.state, prepared.producer_epoch, prepared.last_producer_epoch) == (S.PREPARE_COMMIT, 4, 3)
    assert (prepared.next_producer_id, prepared.partitions, prepared.start_ms) == (NO_PRODUCER_ID, meta.partitions,
                                                                                   meta.start_ms)
    done = complete(prepared, T0 + 20)
    assert (done.state, done.producer_id, done.producer_epoch, done.partitions) == (S.COMPLETE_COMMIT, 1000, 4,
                                                                                    frozenset())
    # the next transaction runs at the bumped epoch; the old epoch is fenced from adding partitions
    assert ongoing(done, now=T0 + 30).producer_epoch == 4
    assert add_partitions(done, 1000, 3, [("a", 0)], T0, transaction_version=TV2).error is Errors.PRODUCER_FENCED


@pytest.mark.parametrize(("state", "epoch", "commit", "answer"), [
    # Kafka's table: a retry comes with the epoch before the bump, the current epoch is the next transaction
    (S.EMPTY, 4, False, "bump"), (S.EMPTY, 4, True, Errors.INVALID_TXN_STATE),
    (S.EMPTY, 3, False, Errors.PRODUCER_FENCED), (S.EMPTY, 3, True, Errors.PRODUCER_FENCED),
    (S.COMPLETE_ABORT, 3, False, Errors.NONE), (S.COMPLETE_ABORT, 4, False, "bump"),
    (S.COMPLETE_ABORT, 3, True, Errors.INVALID_TXN_STATE), (S.COMPLETE_ABORT, 4, True, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, 3, True, Errors.NONE), (S.COMPLETE_COMMIT, 4, True, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, 3, False, Errors.INVALID_TXN_STATE), (S.COMPLETE_COMMIT, 4, False, "bump"),
    # a prepared transaction: its retry waits, the contrary end is refused, any other epoch is fenced
    (S.PREPARE_COMMIT, 3, True, Errors.CONCURRENT_TRANSACTIONS), (S.PREPARE_COMMIT, 3, False, Errors.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, 3, False, Errors.CONCURRENT_TRANSACTIONS),
    # the next transaction's EndTxn while the markers are written: retried (Kafka fences it; its markers take ms)
    (S.PREPARE_ABORT, 4, False, Errors.CONCURRENT_TRANSACTIONS), (S.PREPARE_ABORT, 4, True, Errors.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, 5, True, Errors.PRODUCER_FENCED),
    (S.ONGOING, 3, True, Errors.PRODUCER_FENCED), (S.ONGOING, 5, True, Errors.PRODUCER_FENCED),
])
def test_end_txn_v2_tells_a_retry_from_the_next_transaction(state: TransactionState, epoch: int, commit: bool,
                                                            answer: Errors | str) -> None:
    meta = replace(fresh(4), state=state, client_transaction_version=TV2, last_producer_epoch=3, start_ms=T0)
    t = end(meta, epoch, commit)
    if answer == "bump":  # an abort of a transaction that added no partition: prepared, nothing to mark
        assert t.write is not None and t.error is Errors.NONE
        assert (t.write.state, t.write.producer_epoch, t.write.partitions) == (S.PREPARE_ABORT, 5, frozenset())
        assert t.write.start_ms > meta.start_ms
    else:
        assert (t.error, t.write) == (answer, None)


def test_end_txn_v2_checks_the_producer_id_then_the_epoch_then_a_write_in_flight() -> None:
    meta = ongoing(fresh(2))
    assert end(meta, 2, True, pid=999).error is Errors.INVALID_PRODUCER_ID_MAPPING
    assert end(meta, 1, True, pending=True).error is Errors.PRODUCER_FENCED
    assert end(meta, 2, True, pending=True).error is Errors.CONCURRENT_TRANSACTIONS
    assert end(None, 2, True).error is Errors.INVALID_PRODUCER_ID_MAPPING  # type: ignore[arg-type]


def test_an_exhausted_epoch_moves_to_the_next_producer_id_and_a_retry_with_the_old_one_is_answered() -> None:
    meta = ongoing(fresh(SHORT_MAX - 1), ("a", 0))
    with pytest.raises(RuntimeError, match="epoch exhausted"):
        end(meta, SHORT_MAX - 1, True)
    prepared = end(meta, SHORT_MAX - 1, True, new_producer_id=lambda: 2000).write
    assert prepared is not None
    # the markers go out with the old id at Short.MAX_VALUE; the transaction completes onto the new id at epoch 0
    assert (prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == (1000, SHORT_MAX, 2000)
    done = complete(prepared, T0 + 20)
    assert (done.producer_id, done.producer_epoch, done.last_producer_id) == (2000, 0, 1000)
    assert (done.next_producer_id, done.last_producer_epoch) == (NO_PRODUCER_ID, SHORT_MAX - 1)
    assert done.transaction_producer_id == 1000  # its offsets and outcome are the old id's
    # the client that lost the answer retries with the old id and exhausted epoch: NONE (retryOnOverflow)
    assert end(done, SHORT_MAX - 1, True, pid=1000) == (Errors.NONE, None)
    assert end(done, SHORT_MAX - 1, False, pid=1000).error is Errors.INVALID_TXN_STATE
    # the new id's first transaction
    nxt = ongoing(done, now=T0 + 30)
    assert (nxt.producer_id, nxt.producer_epoch, nxt.transaction_producer_id) == (2000, 0, 2000)


def test_the_coordinators_tv2_abort_of_a_fenced_or_timed_out_transaction_bumps_the_epoch_once() -> None:
    meta = ongoing(fresh(7))
    aborted = fence_and_abort(meta, T0 + 1, TV2)
    # Kafka 4.1+: the abort's bump is the fence's, and the producer's late EndTxn reads as a retry
    assert (aborted.state, aborted.producer_epoch, aborted.last_producer_epoch) == (S.PREPARE_ABORT, 8, 7)
    assert aborted.client_transaction_version is TV2
    assert end(aborted, 7, False).error is Errors.CONCURRENT_TRANSACTIONS
    done = complete(aborted, T0 + 2)
    assert end(done, 7, False) == (Errors.NONE, None)
    assert end(done, 7, True).error is Errors.INVALID_TXN_STATE
    # a classic client of the same transaction is fenced, as under the classic rules
    assert end_transaction(done, 1000, 7, False, T0).error is Errors.PRODUCER_FENCED
    # InitProducerId that finds it Ongoing fences it the same way
    t = init_producer_id(meta, TID, 60_000, T0, lambda: 1, transaction_version=TV2)
    assert t.write is not None and (t.write.state, t.write.producer_epoch) == (S.PREPARE_ABORT, 8)
    # the classic coordinator's fence: one bump, nothing kept of the epoch before
    classic = fence_and_abort(meta, T0 + 1)
    assert (classic.producer_epoch, classic.last_producer_epoch, classic.client_transaction_version) == (
        8, -1, TransactionVersion.TV_0)


def test_a_write_in_flight_is_checked_before_the_producer_when_adding_partitions() -> None:
    """Kafka 4.x: a producer moved to a new id by its last EndTxn gets CONCURRENT_TRANSACTIONS, not fenced,
    while that transaction completes."""
    meta = ongoing(fresh(1))
    assert add_partitions(meta, 999, 9, [("b", 0)], T0, pending=True).error is Errors.CONCURRENT_TRANSACTIONS
    assert add_partitions(meta, 999, 1, [("b", 0)], T0).error is Errors.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(meta, 1000, 0, [("b", 0)], T0).error is Errors.PRODUCER_FENCED
    assert add_partitions(None, 1000, 1, [("b", 0)], T0, pending=True).error is Errors.INVALID_PRODUCER_ID_MAPPING


def test_verify_only_names_the_partitions_of_the_open_transaction() -> None:
    meta = ongoing(fresh(1), ("a", 0))
    assert verify_partitions(meta, 1000, 1, [("a", 0), ("a", 1)]) == {
        ("a", 0): Errors.NONE, ("a", 1): Errors.TRANSACTION_ABORTABLE}
    assert verify_partitions(meta, 1000, 0, [("a", 0)]) == {("a", 0): Errors.PRODUCER_FENCED}
    assert verify_partitions(None, 1000, 1, [("a", 0)]) == {("a", 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    prepared = end(meta, 1, True).write
    assert prepared is not None
    assert verify_partitions(prepared, 1000, 2, [("a", 0)]) == {("a", 0): Errors.CONCURRENT_TRANSACTIONS}


def test_a_classic_end_keeps_the_epoch_and_marks_the_transaction_classic() -> None:
    meta = ongoing(fresh(2))
    prepared = end_transaction(meta, 1000, 2, True, T0).write
    assert prepared is not None
    assert (prepared.producer_epoch, prepared.client_transaction_version) == (2, TransactionVersion.TV_0)
    assert complete(prepared, T0).producer_epoch == 2
