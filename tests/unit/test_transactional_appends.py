"""Transactional batches and transaction markers through the append decision (validators/log_validator.py,
validators/producer_state.py), against Kafka's `ProducerAppendInfo` rules: a transaction opens at its first
batch, a marker ends it, the first unstable offset and the aborted-transaction entry follow."""

from __future__ import annotations

import pytest

from contract.transaction_version import TransactionVersion
from streaming.bucket_state import BucketState
from validators.append_result import Accepted, PartitionState, Rejected
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from validators.codec.record_batch import build_record_batch, parse_header
from validators.errors import Errors
from validators.log_validator import AppendOrigin, validate_and_assign
from validators.producer_state import CompletedTxn
from validators.topic_config import topic_config

NOW = 1_700_000_000_000
CONFIG = topic_config("t", 1, {"message.timestamp.type": "CreateTime"})
LAT = topic_config("t", 1, {"message.timestamp.type": "LogAppendTime"})
TXN = AppendOrigin.CLIENT_TRANSACTIONAL
COORDINATOR = AppendOrigin.COORDINATOR


def data(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True) -> bytes:
    return build_record_batch([(NOW, b"k", f"v{seq + i}".encode()) for i in range(n)], producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 3) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker(EndTransactionMarker(kind, coordinator_epoch), producer_id=pid, producer_epoch=epoch,
                                timestamp=NOW)


def accept(batch: bytes, state: PartitionState, origin: AppendOrigin = TXN, config=CONFIG) -> Accepted:  # type: ignore[no-untyped-def]
    result = validate_and_assign(batch, "t", 0, config, state, NOW, origin)
    assert type(result) is Accepted, result
    return result


def test_a_transactional_batch_needs_an_authorized_transactional_id() -> None:
    result = validate_and_assign(data(7, 0), "t", 0, CONFIG, PartitionState(), NOW)
    assert type(result) is Rejected and result.error is Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_transaction_opens_at_its_first_batch_and_a_commit_marker_ends_it() -> None:
    state = PartitionState(log_end_offset=10)
    first = accept(data(7, 0), state)
    second = accept(data(7, 2), first.state)
    assert (first.base_offset, second.base_offset) == (10, 12)
    assert second.state.producers.open_transactions == {7: 10}
    assert second.state.producers.first_unstable_offset() == 10
    done = accept(marker(7, commit=True), second.state, COORDINATOR)
    assert (done.base_offset, done.last_offset, done.record_count) == (14, 14, 1)
    assert done.completed_txn == CompletedTxn(7, 10, 14, False, 15)
    assert done.state.producers.open_transactions == {} and done.state.log_end_offset == 15
    header = parse_header(done.records)
    assert (header.base_offset, header.is_control_batch, header.is_transactional, header.producer_id) == (14, True, True, 7)


def test_an_abort_records_the_last_stable_offset_of_the_other_open_transactions() -> None:
    state = accept(data(7, 0), PartitionState()).state  # 0-1
    state = accept(data(8, 0, n=3), state).state  # 2-4
    aborted = accept(marker(7, commit=False), state, COORDINATOR)
    assert aborted.completed_txn == CompletedTxn(7, 0, 5, True, 2)  # producer 8's transaction is still open at 2
    assert aborted.state.producers.first_unstable_offset() == 2
    committed = accept(marker(8, commit=True), aborted.state, COORDINATOR)
    assert committed.completed_txn == CompletedTxn(8, 2, 6, False, 7)


def test_a_marker_for_a_producer_without_records_here_is_appended_and_completes_nothing() -> None:
    result = accept(marker(9, commit=True), PartitionState(log_end_offset=4), COORDINATOR)
    assert result.completed_txn is None and result.base_offset == 4 and result.state.log_end_offset == 5


def test_a_plain_batch_during_the_producers_open_transaction_is_invalid_txn_state() -> None:
    state = accept(data(7, 0), PartitionState()).state
    result = validate_and_assign(data(7, 2, transactional=False), "t", 0, CONFIG, state, NOW)
    assert type(result) is Rejected and result.error is Errors.INVALID_TXN_STATE
    assert result.message == "Expected transactional write from producer 7 at offset 2 in partition t-0"


def test_markers_of_an_older_producer_or_coordinator_epoch_are_fenced() -> None:
    state = accept(data(7, 0, epoch=2), PartitionState()).state
    old = validate_and_assign(marker(7, True, epoch=1), "t", 0, CONFIG, state, NOW, COORDINATOR)
    assert type(old) is Rejected and old.error is Errors.INVALID_PRODUCER_EPOCH
    state = accept(marker(7, True, epoch=2, coordinator_epoch=5), state, COORDINATOR).state
    zombie = validate_and_assign(marker(7, False, epoch=2, coordinator_epoch=4), "t", 0, CONFIG, state, NOW,
                                 COORDINATOR)
    assert type(zombie) is Rejected and zombie.error is Errors.TRANSACTION_COORDINATOR_FENCED
    assert "4 (zombie), 5 (current)" in zombie.message


@pytest.mark.parametrize("batch", [data(7, 0), b"\x00" * 80, build_record_batch([(NOW, b"k", b"v")], is_control=True)])
def test_a_marker_that_is_not_an_end_transaction_control_batch_is_invalid_record(batch: bytes) -> None:
    result = validate_and_assign(batch, "t", 0, CONFIG, PartitionState(), NOW, COORDINATOR)
    assert type(result) is Rejected and result.error in (Errors.INVALID_RECORD, Errors.CORRUPT_MESSAGE)


def test_a_client_may_not_write_a_control_batch_even_with_a_transactional_id() -> None:
    result = validate_and_assign(marker(7, True), "t", 0, CONFIG, PartitionState(), NOW, TXN)
    assert type(result) is Rejected and result.error is Errors.INVALID_RECORD
    assert "Clients are not allowed to write control records" in result.message


def test_a_marker_on_a_log_append_time_topic_is_stamped_with_the_append_time() -> None:
    result = accept(marker(7, True), PartitionState(last_append_time_ms=NOW + 50), COORDINATOR, LAT)
    header = parse_header(result.records)
    assert header.max_timestamp == NOW + 50 and header.timestamp_type == 1


def test_an_open_transaction_survives_the_stage_state_and_producer_expiry() -> None:
    state = accept(data(7, 0), PartitionState()).state
    bucket = BucketState()
    bucket.put("t", 0, state)
    restored = BucketState.from_json(bucket.to_json()).get("t", 0)
    assert restored.producers.open_transactions == {7: 0}
    expiring = topic_config("t", 1, {"producer.id.expiration.ms": "1000"})
    later = validate_and_assign(marker(7, True), "t", 0, expiring, restored, NOW + 10**9, COORDINATOR)
    assert type(later) is Accepted and later.completed_txn is not None  # still known, still open


def test_transaction_version_2_markers_carry_the_bumped_epoch_and_the_next_transaction_runs_at_it() -> None:
    """Kafka 4.x's `appendEndTxnMarker` with transaction version 2: each transaction's marker is one epoch above
    its batches, and the producer's next transaction starts at that epoch from sequence 0."""
    tv2 = TransactionVersion.TV_2
    state = PartitionState()
    for epoch in (0, 1, 2):
        opened = accept(data(7, 0, epoch=epoch), state)
        assert opened.state.producers.open_transactions == {7: opened.base_offset}
        done = validate_and_assign(marker(7, commit=epoch != 1, epoch=epoch + 1), "t", 0, CONFIG, opened.state, NOW,
                                   COORDINATOR, tv2)
        assert type(done) is Accepted and done.completed_txn is not None, done
        entry = done.state.producers.get(7)
        assert done.completed_txn.aborted == (epoch == 1) and entry is not None and entry.producer_epoch == epoch + 1
        state = done.state
    # the same epoch again, its transaction over here: a marker written again (an idempotent retry), appended
    again = validate_and_assign(marker(7, commit=True, epoch=3), "t", 0, CONFIG, state, NOW, COORDINATOR, tv2)
    assert type(again) is Accepted and again.completed_txn is None
    # a transaction open at the marker's epoch: no TV_2 coordinator wrote that marker
    opened = accept(data(7, 0, epoch=3), again.state)
    stale = validate_and_assign(marker(7, commit=True, epoch=3), "t", 0, CONFIG, opened.state, NOW, COORDINATOR, tv2)
    assert type(stale) is Rejected and stale.error is Errors.INVALID_PRODUCER_EPOCH
    assert stale.message == "Epoch of producer 7 at offset 12 in t-0 is 3, which is <= the last seen epoch 3 (TV2)"
    # the classic rule takes the same marker (an epoch not below the producer's)
    assert type(validate_and_assign(marker(7, commit=True, epoch=3), "t", 0, CONFIG, opened.state, NOW,
                                    COORDINATOR)) is Accepted
