"""Idempotent-producer state of one partition: Kafka's `ProducerStateEntry` / `ProducerAppendInfo`
rules for a leader receiving client batches (Kafka's produce path (`UnifiedLog.append`) step 17), as pure functions over an
immutable table of entries by producer id (`ProducerTable`, kept in `PartitionState.producers`).

Per producer id the leader keeps the epoch, the metadata of its last <= 5 appended batches
(first/last sequence, first/last offset, the stored batch's maxTimestamp) and the time of its last
append (for expiry). The rules, in Kafka's order:

1. Duplicate: same epoch and exactly the sequence range of one of the cached batches → the append
   is acknowledged with the cached offsets and nothing is written (`findDuplicateBatch`).
2. Epoch: a batch epoch below the current one → INVALID_PRODUCER_EPOCH (47) (`checkProducerEpoch`).
3. Sequence (`checkSequence`): a new epoch must start at sequence 0 unless the producer is unknown
   (no state: new, or expired) → OUT_OF_ORDER_SEQUENCE_NUMBER (45); within an epoch the first
   sequence must be last + 1 (0 after Integer.MAX_VALUE) → 45.
4. Append: a new epoch clears the cached batches; at most 5 are kept (oldest dropped).

Expiry (`ProducerStateManager.removeExpiredProducers`): an entry is forgotten once
`now - lastTimestamp >= producer.id.expiration.ms`. Kafka sets lastTimestamp from the batch's
maxTimestamp (the producer's CreateTime on CreateTime topics) and compares it with the broker's wall
clock every 10 minutes; the gateway records its own monotonic append time instead and checks on every
append with the micro-batch clock, so expiry is deterministic on replay and immune to producer clocks.

Like Kafka's map of producer ids, a lookup and an update cost the same with ten producers or ten thousand
(every idempotent client instance — Java's default — gets a producer id of its own, and entries live
`producer.id.expiration.ms`, a day by default): the table is a persistent map, and an expiry pass runs only
when its oldest entry may have expired.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import NamedTuple

import immutables

from contract.transaction_version import TransactionVersion
from validators.errors import Errors

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH, Kafka's value before any marker
INT_MAX = 2147483647


class BatchMetadata(NamedTuple):
    """Kafka's `BatchMetadata` (which stores lastSeq, lastOffset, offsetDelta, timestamp); a typed tuple,
    like the entry: a partition's state is read from JSON every micro-batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # maxTimestamp of the batch as stored: append time (LogAppendTime) or max CreateTime


class ProducerStateEntry(NamedTuple):
    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp: int = -1  # gateway append time of the producer's last batch (expiry clock)
    current_txn_first_offset: int = NO_OFFSET  # the open transaction's first offset here (`currentTxnFirstOffset`)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH  # of the last transaction marker (`coordinatorEpoch`)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """`ProducerStateEntry.findDuplicateBatch`: same epoch and exactly a cached sequence range."""
        if producer_epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateError(Exception):
    """A rejected append: INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER with Kafka's text."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


# A producer's entry in the stage's state column (`producers_to_state`): fixed-size, big-endian — producer id,
# epoch, last timestamp, number of cached batches, then 5 batch slots (first/last sequence, first/last offset,
# timestamp), unused ones zero; then the open transaction's first offset and the coordinator epoch.
_RECORD_V1 = struct.Struct(">qhqB" + "iiqqq" * NUM_BATCHES_TO_RETAIN)  # "P1:" checkpoints: no transactions
_TXN_FIELDS = struct.Struct(">qi")
_RECORD = struct.Struct(_RECORD_V1.format + "qi")
_RECORD_IDS = struct.Struct(f">q{_RECORD.size - 8}x")
_RECORD_LAST_TIMESTAMP = struct.Struct(">10xq")
_RECORD_TXN_FIRST_OFFSET = struct.Struct(f">{_RECORD_V1.size}xq4x")
_V1_PREFIX = "P1:"
_STATE_PREFIX = "P2:"  # what tells this encoding from the earlier ones
_NO_TXN = _TXN_FIELDS.pack(NO_OFFSET, NO_COORDINATOR_EPOCH)


def _last_timestamp(value: ProducerStateEntry | bytes) -> int:
    return _RECORD_LAST_TIMESTAMP.unpack_from(value)[0] if type(value) is bytes else value.last_timestamp


def _txn_first_offset(value: ProducerStateEntry | bytes) -> int:
    return _RECORD_TXN_FIRST_OFFSET.unpack_from(value)[0] if type(value) is bytes else value.current_txn_first_offset


def _decoded(value: ProducerStateEntry | bytes) -> ProducerStateEntry:
    if type(value) is not bytes:
        return value
    fields = _RECORD.unpack(value)
    count = fields[3]
    if count > NUM_BATCHES_TO_RETAIN:
        raise ValueError(f"producer state: producer {fields[0]} has {count} cached batches, at most {NUM_BATCHES_TO_RETAIN}")
    batches = tuple(BatchMetadata(*fields[4 + 5 * i: 9 + 5 * i]) for i in range(count))
    return ProducerStateEntry(fields[0], fields[1], batches, fields[2], fields[-2], fields[-1])


def _encoded(value: ProducerStateEntry | bytes) -> bytes:
    if type(value) is bytes:
        return value
    slots = list(chain.from_iterable(value.batches))
    slots += [0] * (5 * NUM_BATCHES_TO_RETAIN - len(slots))
    return _RECORD.pack(value.producer_id, value.producer_epoch, value.last_timestamp, len(value.batches), *slots,
                        value.current_txn_first_offset, value.coordinator_epoch)


class ProducerTable:
    """The entries by producer id (Kafka's `ProducerStateManager.producers`), immutable: an update returns a
    new table sharing the rest (`immutables.Map`), so a decision costs O(log n) and earlier states stay valid.
    Read from the stage's state, an entry stays in its encoded form until it is looked up, and is written
    back as it was: a micro-batch pays for the producers it sees, not for every producer of the last day.
    Iterates in the order of the last append (then producer id). `oldest` is a lower bound of the entries'
    `last_timestamp`, exact after an expiry pass, so that `expired` scans only when one can be due.
    `open_transactions` maps the producers with a transaction open here to its first offset (Kafka's
    `ongoingTxns`): the partition's first unstable offset is the least of them."""

    __slots__ = ("_map", "_oldest", "_open")

    def __init__(self, entries: Iterable[ProducerStateEntry] = ()) -> None:
        self._map: immutables.Map[int, ProducerStateEntry | bytes] = immutables.Map(
            (e.producer_id, e) for e in entries)
        self._oldest = min((e.last_timestamp for e in self._map.values()), default=None)  # type: ignore[union-attr]
        self._open: immutables.Map[int, int] = immutables.Map(
            (e.producer_id, e.current_txn_first_offset) for e in self._map.values()  # type: ignore[union-attr]
            if e.current_txn_first_offset >= 0)  # type: ignore[union-attr]

    @classmethod
    def _of(cls, entries: immutables.Map[int, ProducerStateEntry | bytes], oldest: int | None,
            open_txns: immutables.Map[int, int]) -> ProducerTable:
        table = cls.__new__(cls)
        table._map, table._oldest, table._open = entries, oldest, open_txns
        return table

    def __len__(self) -> int:
        return len(self._map)

    def __bool__(self) -> bool:
        return len(self._map) > 0

    def __iter__(self) -> Iterator[ProducerStateEntry]:
        entries = [_decoded(v) for v in self._map.values()]
        return iter(sorted(entries, key=lambda e: (e.last_timestamp, e.producer_id)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerTable):
            return NotImplemented
        return self._map == other._map or (len(self) == len(other) and list(self) == list(other))

    __hash__ = None  # type: ignore[assignment]  # equal tables may hold entries encoded and decoded

    def __repr__(self) -> str:
        return f"ProducerTable({list(self)!r})"

    @property
    def open_transactions(self) -> dict[int, int]:
        return dict(self._open)

    def first_unstable_offset(self, other_than: int | None = None) -> int | None:
        """The first offset of the earliest open transaction (of a producer other than `other_than`), None when
        none is open: Kafka's `firstUnstableOffset`, below which read_committed consumers may read."""
        if not self._open:  # the common case, on every decision row
            return None
        offsets = [o for p, o in self._open.items() if p != other_than]
        return min(offsets) if offsets else None

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        value = self._map.get(producer_id)
        return None if value is None else _decoded(value)

    def with_entry(self, entry: ProducerStateEntry) -> ProducerTable:
        """The table with `entry` in place of its producer's (or added)."""
        oldest = entry.last_timestamp if self._oldest is None else min(self._oldest, entry.last_timestamp)
        open_txns = self._open
        if entry.current_txn_first_offset >= 0:
            if open_txns.get(entry.producer_id) != entry.current_txn_first_offset:
                open_txns = open_txns.set(entry.producer_id, entry.current_txn_first_offset)
        elif entry.producer_id in open_txns:
            open_txns = open_txns.delete(entry.producer_id)
        return ProducerTable._of(self._map.set(entry.producer_id, entry), oldest, open_txns)

    def expired(self, now_ms: int, expiration_ms: int) -> ProducerTable:
        """Without the expired entries (`removeExpiredProducers`: never one with an open transaction); itself
        when none is."""
        if self._oldest is None or now_ms - self._oldest < expiration_ms:
            return self
        with self._map.mutate() as kept:
            for producer_id, value in self._map.items():
                if now_ms - _last_timestamp(value) >= expiration_ms and _txn_first_offset(value) < 0:
                    del kept[producer_id]
            entries = kept.finish()
        return ProducerTable._of(entries, min(map(_last_timestamp, entries.values()), default=None), self._open)

    def to_state(self) -> str:
        """The stage's state column (`producers_to_state`)."""
        return _STATE_PREFIX + base64.b64encode(b"".join(map(_encoded, self._map.values()))).decode("ascii")

    @staticmethod
    def from_state(text: str) -> ProducerTable:
        """Inverse of `to_state` (and the "P1:" encoding without transactions): entries kept encoded, checked when
        decoded. Raises ValueError."""
        try:
            data = base64.b64decode(text[len(_STATE_PREFIX):], validate=True)
        except ValueError as e:  # binascii.Error, or characters outside ASCII
            raise ValueError(f"producer state is not base64: {e}") from None
        size = _RECORD_V1.size if text.startswith(_V1_PREFIX) else _RECORD.size
        if len(data) % size:
            raise ValueError(f"producer state: {len(data)} bytes is not a whole number of {size}-byte entries")
        records = [data[at: at + size] for at in range(0, len(data), size)]
        if size != _RECORD.size:
            records = [r + _NO_TXN for r in records]
            data = b"".join(records)
        size = _RECORD.size
        ids = [i for (i,) in _RECORD_IDS.iter_unpack(data)]
        entries = immutables.Map(zip(ids, records, strict=True))
        oldest = min((t for (t,) in struct.iter_unpack(f">10xq{size - 18}x", data)), default=None)
        open_txns = immutables.Map(
            (i, o) for i, (o,) in zip(ids, _RECORD_TXN_FIRST_OFFSET.iter_unpack(data), strict=True) if o >= 0)
        return ProducerTable._of(entries, oldest, open_txns)


NO_PRODUCERS = ProducerTable()


def increment_sequence(sequence: int, increment: int) -> int:
    """`DefaultRecordBatch.incrementSequence`: wraps past Integer.MAX_VALUE to 0."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    """`ProducerStateManager.isProducerExpired`: idle that long, and no transaction open."""
    return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms


def expire(producers: ProducerTable, now_ms: int, expiration_ms: int) -> ProducerTable:
    """Drop every expired producer (`removeExpiredProducers`)."""
    return producers.expired(now_ms, expiration_ms)


def find(producers: ProducerTable, producer_id: int, now_ms: int, expiration_ms: int) -> ProducerStateEntry | None:
    """The live entry of a producer (an expired one counts as unknown)."""
    e = producers.get(producer_id)
    return None if e is None or is_expired(e, now_ms, expiration_ms) else e


def _check_epoch(entry: ProducerStateEntry | None, producer_id: int, producer_epoch: int, offset: int,
                 topic_partition: str) -> int:
    """`ProducerAppendInfo.checkProducerEpoch`: the current epoch, or INVALID_PRODUCER_EPOCH for an older one."""
    current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
    if producer_epoch < current_epoch:
        raise ProducerStateError(
            Errors.INVALID_PRODUCER_EPOCH,
            f"Epoch of producer {producer_id} at offset {offset} in {topic_partition} is {producer_epoch}, "
            f"which is smaller than the last seen epoch {current_epoch}",
        )
    return current_epoch


def check_append(
    entry: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    first_seq: int,
    first_offset: int,
    topic_partition: str,
    is_transactional: bool = False,
) -> None:
    """`ProducerAppendInfo.maybeValidateDataBatch` for a CLIENT append, and `updateCurrentTxnFirstOffset`'s
    check; raises ProducerStateError."""
    current_epoch = _check_epoch(entry, producer_id, producer_epoch, first_offset, topic_partition)
    # checkSequence
    if producer_epoch != current_epoch:
        if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
            # (sic) no space before "at offset" - Kafka's text
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Invalid sequence number for new epoch of producer {producer_id}at offset {first_offset} in "
                f"partition {topic_partition}: {producer_epoch} (request epoch), {first_seq} (seq. number), "
                f"{current_epoch} (current producer epoch)",
            )
    else:
        last_seq = entry.last_seq if entry is not None else NO_SEQUENCE
        if not (current_epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, first_seq)):
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {producer_id} at offset {first_offset} in partition "
                f"{topic_partition}: {first_seq} (incoming seq. number), {last_seq} (current end sequence number)",
            )
    if not is_transactional and entry is not None and entry.current_txn_first_offset >= 0:
        raise ProducerStateError(
            Errors.INVALID_TXN_STATE,
            f"Expected transactional write from producer {producer_id} at offset {first_offset} in partition "
            f"{topic_partition}",
        )


def append_batch(
    producers: ProducerTable,
    entry: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    batch: BatchMetadata,
    append_time_ms: int,
    is_transactional: bool = False,
) -> ProducerTable:
    """`ProducerStateEntry.addBatch`: a new epoch clears the cache; keep the last 5 batches. A transactional
    batch opens the producer's transaction here if none is open (`updateCurrentTxnFirstOffset`).
    `producers` should already be expired (see `expire`)."""
    if entry is None or entry.producer_epoch != producer_epoch:
        cached: tuple[BatchMetadata, ...] = ()
    else:
        cached = entry.batches
    cached = (cached + (batch,))[-NUM_BATCHES_TO_RETAIN:]
    txn_first = entry.current_txn_first_offset if entry is not None else NO_OFFSET
    if is_transactional and txn_first < 0:
        txn_first = batch.first_offset
    coordinator_epoch = entry.coordinator_epoch if entry is not None else NO_COORDINATOR_EPOCH
    return producers.with_entry(ProducerStateEntry(producer_id, producer_epoch, cached, append_time_ms, txn_first,
                                                   coordinator_epoch))


def _check_marker_epoch_v2(entry: ProducerStateEntry | None, producer_id: int, producer_epoch: int, offset: int,
                           topic_partition: str) -> None:
    """Kafka 4.x's `checkProducerEpoch` for a transaction version 2 marker: its epoch must be above the
    producer's, except the same epoch with no transaction open here, a marker written again (its transaction
    already ended here: an idempotent retry, appended again)."""
    current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
    if producer_epoch > current_epoch:
        return
    if producer_epoch == current_epoch and (entry is None or entry.current_txn_first_offset < 0):
        return
    raise ProducerStateError(
        Errors.INVALID_PRODUCER_EPOCH,
        f"Epoch of producer {producer_id} at offset {offset} in {topic_partition} is {producer_epoch}, which is "
        f"<= the last seen epoch {current_epoch} (TV{int(TransactionVersion.TV_2)})",
    )


class CompletedTxn(NamedTuple):
    """Kafka's `CompletedTxn`, with the last stable offset its aborted-transaction index entry records
    (`ProducerStateManager.lastStableOffset`)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool
    last_stable_offset: int


def append_end_txn_marker(
    producers: ProducerTable,
    entry: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    aborted: bool,
    coordinator_epoch: int,
    offset: int,
    append_time_ms: int,
    topic_partition: str,
    validate: bool = True,
    transaction_version: TransactionVersion = TransactionVersion.TV_0,
) -> tuple[ProducerTable, CompletedTxn | None]:
    """`ProducerAppendInfo.appendEndTxnMarker`: a commit or abort marker at `offset` ends the producer's open
    transaction here. Only a transaction with records here completes (a marker may reach a partition the
    producer never wrote to, and is appended all the same). Raises ProducerStateError, unless `validate` is
    False: a marker read back from the log, which Kafka's REPLICATION origin takes with its epochs unchecked.
    `transaction_version` TV_2: the marker carries the epoch bumped at the transaction's end, so it must be
    above the producer's (`_check_marker_epoch_v2`)."""
    if validate and transaction_version.supports_epoch_bump:
        _check_marker_epoch_v2(entry, producer_id, producer_epoch, offset, topic_partition)
    elif validate:
        _check_epoch(entry, producer_id, producer_epoch, offset, topic_partition)
    current_coordinator_epoch = entry.coordinator_epoch if entry is not None else NO_COORDINATOR_EPOCH
    if validate and current_coordinator_epoch > coordinator_epoch:
        raise ProducerStateError(
            Errors.TRANSACTION_COORDINATOR_FENCED,
            f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in partition "
            f"{topic_partition}: {coordinator_epoch} (zombie), {current_coordinator_epoch} (current)",
        )
    completed = None
    if entry is not None and entry.current_txn_first_offset >= 0:
        others = producers.first_unstable_offset(other_than=producer_id)
        completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset, aborted,
                                 offset + 1 if others is None else others)
    # maybeUpdateProducerEpoch: a new epoch forgets the cached batches
    batches = entry.batches if entry is not None and entry.producer_epoch == producer_epoch else ()
    updated = ProducerStateEntry(producer_id, producer_epoch, batches, append_time_ms, NO_OFFSET, coordinator_epoch)
    return producers.with_entry(updated), completed


# ------------------------------------------------------------------------------------------------
# the Spark stage keeps this as a string column


def producers_to_state(producers: ProducerTable) -> str:
    """The stage's state column: fixed-size binary entries (`ProducerTable.to_state`)."""
    return producers.to_state()


def producers_from_state(text: str | None) -> ProducerTable:
    """The stage's state column, in this encoding or the JSON of earlier checkpoints (`producers_to_json`).
    Raises ValueError on bad input."""
    if text is not None and text.startswith((_STATE_PREFIX, _V1_PREFIX)):
        return ProducerTable.from_state(text)
    return producers_from_json(text)


def producers_to_json(producers: ProducerTable) -> str:
    """Compact JSON: `[{"producer_id", "producer_epoch", "last_timestamp", "batches": [[first_seq,
    last_seq, first_offset, last_offset, timestamp], ...]}, ...]`."""
    return json.dumps(
        [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_timestamp": e.last_timestamp,
                "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp] for b in e.batches],
            }
            for e in producers
        ],
        separators=(",", ":"),
    )


def producers_from_json(text: str | None) -> ProducerTable:
    """Inverse of `producers_to_json`; None or "" is the empty state. Raises ValueError on bad input."""
    if text is None or text == "":
        return NO_PRODUCERS
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"producer state is not valid JSON: {e}") from None
    if not isinstance(doc, list):
        raise ValueError("producer state must be a JSON list")
    for item in doc:
        if type(item) is not dict or type(item.get("batches")) is not list:
            raise ValueError(f"producer state entry must be an object with batches: {item!r}")
    # The checks below run over the whole document at once, in C (`map`, `chain`, `set`): a partition's state
    # is read every micro-batch, and may hold thousands of producers.
    heads = [(item.get("producer_id"), item.get("producer_epoch"), item.get("last_timestamp")) for item in doc]
    batch_lists = [item["batches"] for item in doc]
    batches = list(chain.from_iterable(batch_lists))
    if set(map(type, batches)) - {list} or set(map(len, batches)) - {5}:
        bad = next(b for b in batches if type(b) is not list or len(b) != 5)
        raise ValueError(f"producer state batch must be [first_seq, last_seq, first_offset, last_offset, ts]: {bad!r}")
    # every number an int (bool is an int subclass, and not a number here)
    if set(map(type, chain(chain.from_iterable(heads), chain.from_iterable(batches)))) - {int}:
        named = chain(*(zip(("producer_id", "producer_epoch", "last_timestamp"), h, strict=True) for h in heads),
                      (("batch field", v) for b in batches for v in b))
        what, value = next((what, v) for what, v in named if type(v) is not int)
        raise ValueError(f"producer state: {what} must be an integer, got {value!r}")
    make = BatchMetadata._make
    return ProducerTable(
        ProducerStateEntry(h[0], h[1], tuple(map(make, b)), h[2]) for h, b in zip(heads, batch_lists, strict=True)
    )
