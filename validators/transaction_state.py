"""A transactional id's state at its coordinator: Kafka's `TransactionMetadata` and the rules of
`TransactionCoordinator` (Kafka 4.x: the classic protocol, transaction versions 0/1, and KIP-890's transaction
version 2, `contract.transaction_version`), as pure functions of the current metadata, the request and the clock.

The states and their legal predecessors (`TransactionState.validPreviousStates`):

    Empty              <- Empty, CompleteCommit, CompleteAbort
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      <- Ongoing
    PrepareAbort       <- Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort (the last three:
                          a transaction version 2 abort of a transaction that added no partition)
    CompleteCommit     <- PrepareCommit
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  <- Ongoing

A request's answer is a `Transition`: an error, or the metadata to write to the transaction log (the
coordinator answers once the write is durable, then applies it), or neither (answered as is, nothing
written). A coordinator with a write in flight for the id passes `pending=True`: Kafka's
`pendingTransitionInProgress`, answered CONCURRENT_TRANSACTIONS so the client backs off and retries.

PrepareEpochFence is never written: an InitProducerId that finds a transaction Ongoing, and the expiry of a
transaction past its timeout, bump the epoch (fencing the old producer) and abort with it, in one written
PrepareAbort (`fence_and_abort`).

Transaction version 2 (`end_transaction` with TV_2): every end bumps the epoch, the markers carry the bumped
one and EndTxn answers it; an epoch that would reach Short.MAX_VALUE gets the next producer id instead, at
epoch 0, once the transaction completes (`next_producer_id`). A retried EndTxn comes with the epoch before the
bump, so the previous epoch (or, after a rotation, the previous id at Short.MAX_VALUE - 1) is a retry, and the
current epoch after a completed transaction is the next transaction (only an abort of it is possible there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from contract.transaction_records import TransactionStatus
from contract.transaction_version import TransactionVersion
from validators.errors import Errors

NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH
SHORT_MAX = 32767
# Kafka's defaults (TransactionStateManagerConfig)
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms: 15 min
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms: 7 days
DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms

TopicPartition = tuple[str, int]


# Kafka's `TransactionState`: the ids are the transaction log's (`contract.transaction_records`)
TransactionState = TransactionStatus
_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT,
                                 _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class TransactionStateError(RuntimeError):
    """A transition Kafka's coordinator treats as impossible (`IllegalStateException`): a bug or a damaged log."""


@dataclass(frozen=True)
class TransactionMetadata:
    """Kafka's `TransactionMetadata` (without its runtime-only pending state)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1  # txnStartTimestamp: when the first partition joined the transaction
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID  # the id before a rotation (an exhausted epoch)
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump, for a retried request
    # the transaction version of the request that moved it here (`clientTransactionVersion`)
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0
    next_producer_id: int = NO_PRODUCER_ID  # TV_2: the id a prepared transaction's epoch overflows to

    def transition(self, state: TransactionState, now_ms: int, **changes: object) -> TransactionMetadata:
        """`prepareTransitionTo`: the new metadata, refusing an illegal move."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise TransactionStateError(f"transactional id {self.transactional_id}: illegal transition from "
                                        f"{self.state.kafka_name} to {state.kafka_name}")
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def transaction_producer_id(self) -> int:
        """The producer id the transaction's records and markers carry: after a TV_2 transaction whose epoch
        overflowed completes, the id before the rotation."""
        rotated = (self.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT) and self.producer_epoch == 0
                   and self.client_transaction_version.supports_epoch_bump and self.last_producer_id >= 0)
        return self.last_producer_id if rotated else self.producer_id

    @property
    def in_transaction(self) -> bool:
        """A transaction is open or being completed: its partitions must get markers."""
        return self.state in (_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE)


def is_epoch_exhausted(epoch: int) -> bool:
    """`TransactionMetadata.isEpochExhausted`: one epoch is kept for fencing the last producer."""
    return epoch >= SHORT_MAX - 1


class Transition(NamedTuple):
    """A request's outcome: `error`, else `write` to append to the transaction log (None: answer at once)."""

    error: Errors = Errors.NONE
    write: TransactionMetadata | None = None

    @classmethod
    def fail(cls, error: Errors) -> Transition:
        return cls(error, None)


def init_producer_id(
    current: TransactionMetadata | None, transactional_id: str, timeout_ms: int, now_ms: int,
    new_producer_id: Callable[[], int], *, max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
    expected: tuple[int, int] | None = None, pending: bool = False,
    transaction_version: TransactionVersion = TransactionVersion.TV_0,
) -> Transition:
    """`TransactionCoordinator.handleInitProducerId` for a transactional id. `expected`: the (producer id,
    epoch) a v3+ client sends to keep its id. The written metadata's state tells the coordinator what
    follows: Empty is the answer (its id and epoch); PrepareAbort means a transaction was Ongoing, its
    producer is fenced and it is being aborted (with the coordinator's `transaction_version`), and the client
    gets CONCURRENT_TRANSACTIONS and retries."""
    if not transactional_id:
        return Transition.fail(Errors.INVALID_REQUEST)
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        return Transition.fail(Errors.INVALID_TRANSACTION_TIMEOUT)
    if current is None:
        current = TransactionMetadata(transactional_id, new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms,
                                      _S.EMPTY, last_update_ms=now_ms)
    if pending:
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
    if expected is not None and not _valid_expected(current, *expected):
        return Transition.fail(Errors.PRODUCER_FENCED)
    state = current.state
    if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
    if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
        if current.epoch_exhausted and (expected is None or expected[1] == current.producer_epoch):
            # prepareProducerIdRotation: a new id at epoch 0, the old one remembered for a retried request
            return Transition(write=current.transition(
                _S.EMPTY, now_ms, producer_id=new_producer_id(), producer_epoch=0, timeout_ms=timeout_ms,
                partitions=frozenset(), start_ms=-1, last_producer_id=current.producer_id,
                last_producer_epoch=current.producer_epoch if expected is not None else NO_PRODUCER_EPOCH))
        return _increment_epoch(current, timeout_ms, None if expected is None else expected[1], now_ms)
    if state is _S.ONGOING:
        return Transition(write=fence_and_abort(current, now_ms, transaction_version))
    raise TransactionStateError(f"transactional id {transactional_id} found in state {state.kafka_name}")


def _valid_expected(current: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """`isValidProducerId`: a fresh id, the current id, or the previous one retried after its rotation."""
    return (current.producer_epoch == NO_PRODUCER_EPOCH or producer_id == current.producer_id
            or (producer_id == current.last_producer_id and is_epoch_exhausted(epoch)))


def _increment_epoch(current: TransactionMetadata, timeout_ms: int, expected_epoch: int | None,
                     now_ms: int) -> Transition:
    """`prepareIncrementProducerEpoch`: the next epoch, or the current one again for a retried request."""
    bumped = current.producer_epoch + 1
    if expected_epoch is None:
        epoch, last = bumped, NO_PRODUCER_EPOCH
    elif current.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == current.producer_epoch:
        epoch, last = bumped, current.producer_epoch
    elif expected_epoch == current.last_producer_epoch:
        epoch, last = current.producer_epoch, current.last_producer_epoch
    else:
        return Transition.fail(Errors.PRODUCER_FENCED)
    return Transition(write=current.transition(_S.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last,
                                               timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1))


def fence_and_abort(current: TransactionMetadata, now_ms: int,
                    transaction_version: TransactionVersion = TransactionVersion.TV_0) -> TransactionMetadata:
    """`prepareFenceProducerEpoch` then the abort (`endTransaction` with the coordinator's own
    `transaction_version`, the finalized one), as one write: the epoch bumped once so the markers fence the
    producer of the open transaction, and the transaction aborted. Under TV_2 the abort's bump is the fence's
    (Kafka 4.1 on), and the epoch before it is kept, so the fenced producer's EndTxn reads as a retry."""
    if current.producer_epoch >= SHORT_MAX:
        raise TransactionStateError(f"transactional id {current.transactional_id}: cannot fence epoch {SHORT_MAX}")
    if transaction_version.supports_epoch_bump:
        return _prepare_end(current, _S.PREPARE_ABORT, now_ms, NO_PRODUCER_ID, no_partition_added=False)
    fenced = current.transition(_S.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=current.producer_epoch + 1,
                                last_producer_epoch=NO_PRODUCER_EPOCH)
    return fenced.transition(_S.PREPARE_ABORT, now_ms, client_transaction_version=TransactionVersion.TV_0,
                             next_producer_id=NO_PRODUCER_ID)


def _producer_check(current: TransactionMetadata | None, producer_id: int, epoch: int,
                    pending: bool) -> Errors | None:
    """The checks of a classic EndTxn, in Kafka's order."""
    if current is None or current.producer_id != producer_id:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    if current.producer_epoch != epoch:
        return Errors.PRODUCER_FENCED
    if pending:
        return Errors.CONCURRENT_TRANSACTIONS
    return None


def add_partitions(current: TransactionMetadata | None, producer_id: int, epoch: int,
                   partitions: Iterable[TopicPartition], now_ms: int, *, pending: bool = False,
                   transaction_version: TransactionVersion = TransactionVersion.TV_0) -> Transition:
    """`handleAddPartitionsToTransaction` (AddOffsetsToTxn adds the group's offsets partition the same way; a
    leader adding a TV_2 producer's partition passes TV_2). A write in flight is checked first (Kafka 4.x: a
    producer whose epoch overflowed to a new id must not read as fenced while its transaction completes)."""
    if current is None:
        return Transition.fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    if pending:
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
    if current.producer_id != producer_id:
        return Transition.fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    if current.producer_epoch != epoch:
        return Transition.fail(Errors.PRODUCER_FENCED)
    added = frozenset(partitions)
    if current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
    if current.state is _S.ONGOING and added <= current.partitions:
        return Transition()  # already in: answered without a write
    starts = current.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
    return Transition(write=current.transition(
        _S.ONGOING, now_ms, partitions=current.partitions | added,
        start_ms=_next_start(current, now_ms) if starts else current.start_ms,
        client_transaction_version=transaction_version))


def _next_start(current: TransactionMetadata, now_ms: int) -> int:
    """A new transaction's start, later than the last one's even within a millisecond: the gateway tells a
    producer's transactions apart by it (its pending consumer offsets, `contract/group_records.py`)."""
    return max(now_ms, current.start_ms + 1)


def verify_partitions(current: TransactionMetadata | None, producer_id: int, epoch: int,
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Errors]:
    """`handleVerifyPartitionsInTransaction` (AddPartitionsToTxn v4+ with VerifyOnly): each partition NONE when
    the open transaction holds it, TRANSACTION_ABORTABLE when not."""
    wanted = list(partitions)
    if current is None or current.producer_id != producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif current.producer_epoch != epoch:
        error = Errors.PRODUCER_FENCED
    elif current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        error = Errors.CONCURRENT_TRANSACTIONS
    else:
        return {tp: Errors.NONE if tp in current.partitions else Errors.TRANSACTION_ABORTABLE for tp in wanted}
    return dict.fromkeys(wanted, error)


def end_transaction(current: TransactionMetadata | None, producer_id: int, epoch: int, commit: bool,
                    now_ms: int, *, pending: bool = False,
                    transaction_version: TransactionVersion = TransactionVersion.TV_0,
                    new_producer_id: Callable[[], int] | None = None) -> Transition:
    """`handleEndTransaction` from a client: PrepareCommit/PrepareAbort written, then the markers; a retry
    of a completed one answered NONE, a contradicting one INVALID_TXN_STATE. `transaction_version`: the
    request's (`TransactionVersion.for_end_txn`); TV_2 goes by `_end_transaction_v2`, which asks
    `new_producer_id` when the epoch is exhausted."""
    if transaction_version.supports_epoch_bump:
        return _end_transaction_v2(current, producer_id, epoch, commit, now_ms, pending, new_producer_id)
    error = _producer_check(current, producer_id, epoch, pending)
    if error is not None:
        return Transition.fail(error)
    assert current is not None
    state = current.state
    if state is _S.ONGOING:
        return Transition(write=current.transition(
            _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, now_ms,
            client_transaction_version=TransactionVersion.TV_0, next_producer_id=NO_PRODUCER_ID))
    if state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
        return Transition() if (state is _S.COMPLETE_COMMIT) == commit else Transition.fail(Errors.INVALID_TXN_STATE)
    if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        same = (state is _S.PREPARE_COMMIT) == commit
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS if same else Errors.INVALID_TXN_STATE)
    if state is _S.EMPTY:
        return Transition.fail(Errors.INVALID_TXN_STATE)
    raise TransactionStateError(f"transactional id {current.transactional_id} found in state {state.kafka_name}")


def _end_transaction_v2(current: TransactionMetadata | None, producer_id: int, epoch: int, commit: bool,
                        now_ms: int, pending: bool, new_producer_id: Callable[[], int] | None) -> Transition:
    """Kafka 4.x's `endTransaction` for transaction version 2. The state and the epoch together tell a retry
    (the epoch before the bump) from the next transaction (the current epoch). While the markers of the last one
    are written (PrepareCommit/PrepareAbort), the next transaction's EndTxn gets CONCURRENT_TRANSACTIONS, retried
    by the client, where Kafka fences it: Kafka's markers take milliseconds, the doors' a micro-batch.

        state           abort: retry / current    commit: retry / current
        Empty           PRODUCER_FENCED / bump    PRODUCER_FENCED / INVALID_TXN_STATE
        CompleteAbort   NONE / bump               INVALID_TXN_STATE / INVALID_TXN_STATE
        CompleteCommit  INVALID_TXN_STATE / bump  NONE / INVALID_TXN_STATE

    An abort from Empty or Complete* is a transaction that added no partition: prepared with nothing to mark."""
    if current is None:
        return Transition.fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    state = current.state
    retry_on_overflow = (current.last_producer_id == producer_id and epoch == SHORT_MAX - 1
                         and current.producer_epoch == 0)
    retry_on_bump = current.producer_epoch == epoch + 1
    if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        # Kafka fences the current epoch here: the next transaction's EndTxn cannot come while its markers are
        # written (milliseconds). The doors' markers take a micro-batch, so a client that ends an empty transaction
        # at once meets this state: CONCURRENT_TRANSACTIONS (below) has it retry once the markers are in
        valid_epoch = retry_on_bump or epoch == current.producer_epoch
    elif state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
        valid_epoch = retry_on_bump or retry_on_overflow or epoch == current.producer_epoch
    else:
        valid_epoch = epoch == current.producer_epoch
    if current.producer_id != producer_id and not retry_on_overflow:
        return Transition.fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    if not valid_epoch:
        return Transition.fail(Errors.PRODUCER_FENCED)
    if pending:
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
    is_retry = retry_on_bump or retry_on_overflow

    def prepare(target: TransactionState, no_partition_added: bool) -> Transition:
        next_id = NO_PRODUCER_ID
        if current.epoch_exhausted:
            if new_producer_id is None:
                raise TransactionStateError(f"transactional id {current.transactional_id}: epoch exhausted and no "
                                            "producer id to rotate to")
            next_id = new_producer_id()
        return Transition(write=_prepare_end(current, target, now_ms, next_id, no_partition_added))

    if state is _S.ONGOING:
        return prepare(_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, False)
    if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        if not is_retry:  # the next transaction's, while this one's markers are written: once they are
            return Transition.fail(Errors.CONCURRENT_TRANSACTIONS)
        same = (state is _S.PREPARE_COMMIT) == commit
        return Transition.fail(Errors.CONCURRENT_TRANSACTIONS if same else Errors.INVALID_TXN_STATE)
    if state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
        if commit:
            return Transition() if is_retry and state is _S.COMPLETE_COMMIT else Transition.fail(
                Errors.INVALID_TXN_STATE)
        if is_retry:
            return Transition() if state is _S.COMPLETE_ABORT else Transition.fail(Errors.INVALID_TXN_STATE)
        return prepare(_S.PREPARE_ABORT, True)
    raise TransactionStateError(f"transactional id {current.transactional_id} found in state {state.kafka_name}")


def _prepare_end(current: TransactionMetadata, target: TransactionState, now_ms: int, next_producer_id: int,
                 no_partition_added: bool) -> TransactionMetadata:
    """`prepareAbortOrCommit` with TV_2: the epoch bumped (the one before it kept), the next producer id when it
    overflows; a transaction that added no partition starts now."""
    return current.transition(
        target, now_ms, producer_epoch=current.producer_epoch + 1, last_producer_epoch=current.producer_epoch,
        start_ms=_next_start(current, now_ms) if no_partition_added else current.start_ms,
        next_producer_id=next_producer_id, client_transaction_version=TransactionVersion.TV_2)


def complete(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """`prepareComplete`: every partition has its marker; the transaction is over and its partitions cleared.
    A TV_2 transaction whose epoch overflowed moves to its next producer id at epoch 0 (the previous id kept,
    for a retried EndTxn)."""
    if current.state is _S.PREPARE_COMMIT:
        target = _S.COMPLETE_COMMIT
    elif current.state is _S.PREPARE_ABORT:
        target = _S.COMPLETE_ABORT
    else:
        raise TransactionStateError(f"transactional id {current.transactional_id}: nothing to complete in state "
                                    f"{current.state.kafka_name}")
    if current.client_transaction_version.supports_epoch_bump and current.next_producer_id != NO_PRODUCER_ID:
        return current.transition(target, now_ms, partitions=frozenset(), producer_id=current.next_producer_id,
                                  producer_epoch=0, last_producer_id=current.producer_id,
                                  next_producer_id=NO_PRODUCER_ID)
    return current.transition(target, now_ms, partitions=frozenset(), next_producer_id=NO_PRODUCER_ID)


def timed_out(current: TransactionMetadata, now_ms: int) -> bool:
    """`TransactionStateManager.timedOutTransactions`: an open transaction past its timeout is aborted."""
    return current.state in (_S.ONGOING, _S.PREPARE_EPOCH_FENCE) and current.start_ms + current.timeout_ms < now_ms


def expired(current: TransactionMetadata, now_ms: int,
            expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS) -> bool:
    """`transactional.id.expiration.ms`: an id idle that long, with no transaction open, is forgotten."""
    return (current.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
            and current.last_update_ms + expiration_ms <= now_ms)
