"""A partition's producer state rebuilt from its stored batches (`validators/producer_state_rebuild.py`) as Kafka's
`loadProducersFromRecords` rebuilds it, and where the storage walk starts (`storage/producer_batches.py`)."""

from __future__ import annotations

from contract.transaction_version import TransactionVersion
from storage.producer_batches import walk_start
from tests.unit.test_transactional_appends import CONFIG, COORDINATOR, NOW, accept, data, marker
from validators.append_result import Accepted, PartitionState
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker
from validators.log_validator import validate_and_assign
from validators.producer_state import NO_OFFSET, ProducerStateEntry
from validators.producer_state_rebuild import LoggedBatch, active_producers, rebuild_producer_state

T0 = 1_700_000_000_000
DAY = 86_400_000
TP = "orders-0"


def _data(pid: int, offset: int, seq: int, count: int = 1, *, epoch: int = 0, txn: bool = False,
          ts: int = T0) -> LoggedBatch:
    return LoggedBatch(pid, epoch, seq, offset, offset + count - 1, ts, txn)


def _marker(pid: int, offset: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0,
            ts: int = T0) -> LoggedBatch:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return LoggedBatch(pid, epoch, -1, offset, offset, ts, True, True, EndTransactionMarker(kind, coordinator_epoch))


def _described(entries: list[ProducerStateEntry]) -> dict[int, tuple[int, int, int, int, int]]:
    """What DescribeProducers shows of each: epoch, last sequence, last timestamp, coordinator epoch, txn start."""
    return {e.producer_id: (e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                            e.current_txn_first_offset) for e in entries}


def test_idempotent_and_transactional_producers_committed_aborted_and_open() -> None:
    batches = [
        _data(5, 0, 0, 3, ts=T0 + 1),  # idempotent: offsets 0-2, sequences 0-2
        _data(7, 3, 0, 2, txn=True, ts=T0 + 2),  # 7's first transaction ...
        _data(5, 5, 3, 2, ts=T0 + 3),
        _marker(7, 7, commit=False, coordinator_epoch=4, ts=T0 + 4),  # ... aborted
        _data(7, 8, 2, txn=True, ts=T0 + 5),  # its second ...
        _marker(7, 9, commit=True, coordinator_epoch=4, ts=T0 + 6),  # ... committed
        _data(8, 10, 0, 2, txn=True, ts=T0 + 7),  # 8's transaction, open: it started at 10
        _data(8, 12, 2, txn=True, ts=T0 + 8),
    ]
    table = rebuild_producer_state(batches, TP)
    assert _described(active_producers(table, T0 + 9, DAY)) == {
        5: (0, 4, T0 + 3, -1, NO_OFFSET),
        7: (0, 2, T0 + 6, 4, NO_OFFSET),  # the marker's timestamp is its last
        8: (0, 2, T0 + 8, -1, 10),
    }
    assert table.open_transactions == {8: 10}


def test_a_new_epoch_a_marker_alone_and_an_empty_control_batch() -> None:
    batches = [
        _data(7, 0, 0, 5, txn=True),
        _marker(7, 5, commit=False, epoch=1, coordinator_epoch=2),  # InitProducerId's bump aborted it at epoch 1
        _data(7, 6, 0, txn=True, epoch=1),  # the new epoch starts at sequence 0
        LoggedBatch(7, 1, -1, 7, 7, T0, True, True, None),  # cleaned from the log: changes nothing
        _marker(9, 8, commit=True, coordinator_epoch=2),  # a producer that wrote nothing here
    ]
    described = _described(active_producers(rebuild_producer_state(batches, TP), T0, DAY))
    assert described == {7: (1, 0, T0, 2, 6), 9: (0, -1, T0, 2, NO_OFFSET)}


def test_transaction_version_2_transactions_read_back_as_the_stage_decided_them() -> None:
    """Each transaction's marker one epoch above its batches (KIP-890): the rebuilt producer is the one the stage
    holds after deciding them, at the last marker's epoch, and a new transaction at that epoch is open."""
    state, logged = PartitionState(), []
    for epoch, commit in ((0, True), (1, False), (2, True)):
        opened = accept(data(7, 0, epoch=epoch), state)
        logged.append(_data(7, opened.base_offset, 0, 2, epoch=epoch, txn=True, ts=NOW))
        done = validate_and_assign(marker(7, commit, epoch=epoch + 1), "t", 0, CONFIG, opened.state, NOW,
                                   COORDINATOR, TransactionVersion.TV_2)
        assert type(done) is Accepted, done
        logged.append(_marker(7, done.base_offset, commit, epoch=epoch + 1, coordinator_epoch=3, ts=NOW))
        state = done.state
    opened = accept(data(7, 0, epoch=3), state)
    logged.append(_data(7, opened.base_offset, 0, 2, epoch=3, txn=True, ts=NOW))
    rebuilt = rebuild_producer_state(logged, "t-0")
    assert _described(active_producers(rebuilt, NOW, DAY)) == _described(active_producers(opened.state.producers,
                                                                                           NOW, DAY))
    assert _described(active_producers(rebuilt, NOW, DAY)) == {7: (3, 1, NOW, 3, 9)}


def test_markers_read_back_are_not_checked_as_the_coordinator_s_are() -> None:
    """Kafka's REPLICATION origin: a lower producer or coordinator epoch is logged, not refused."""
    batches = [_marker(7, 0, commit=True, epoch=3, coordinator_epoch=5),
               _marker(7, 1, commit=False, epoch=2, coordinator_epoch=1)]
    assert _described(active_producers(rebuild_producer_state(batches, TP), T0, DAY)) == {7: (2, -1, T0, 1, NO_OFFSET)}


def test_expired_producers_are_not_active_but_an_open_transaction_never_expires() -> None:
    batches = [_data(5, 0, 0, ts=T0), _data(6, 1, 0, txn=True, ts=T0), _data(7, 2, 0, ts=T0 + DAY // 2)]
    table = rebuild_producer_state(batches, TP)
    # Kafka's rule: expired once now - lastTimestamp >= producer.id.expiration.ms
    assert [e.producer_id for e in active_producers(table, T0 + DAY - 1, DAY)] == [5, 6, 7]
    assert [e.producer_id for e in active_producers(table, T0 + DAY, DAY)] == [6, 7]


def test_the_walk_starts_at_the_first_segment_that_may_hold_a_live_producer() -> None:
    bases = [0, 100, 200, 300]
    max_ts = [T0, T0 + 10, T0 + 5, T0 + 20]
    asked: list[int] = []

    def max_timestamp(i: int) -> int:
        asked.append(i)
        return max_ts[i]

    assert walk_start(bases, max_timestamp, T0 + 7, None) == 1
    assert asked == [0, 1]  # nothing after the answer is opened
    assert walk_start(bases, max_timestamp, T0 + 10, None) == 3  # a batch at the cut has expired
    assert walk_start(bases, max_timestamp, T0 + 20, None) == 4  # nothing live: nothing to read
    # an open transaction that started before the cut: its segment is read
    assert walk_start(bases, max_timestamp, T0 + 20, 150) == 1
    assert walk_start(bases, max_timestamp, T0 + 20, 300) == 3
    assert walk_start(bases, max_timestamp, T0 + 7, 250) == 1
    assert walk_start([], max_timestamp, T0, 0) == 0
