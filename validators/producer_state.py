"""Idempotent-producer state of one partition: Kafka's `ProducerStateEntry` / `ProducerAppendInfo`
rules for a leader receiving client batches (reference §1.1 step 17), as pure functions over an
immutable tuple of entries (kept in `PartitionState.producers`).

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from validators.errors import Errors

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 2147483647


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Kafka's `BatchMetadata` (which stores lastSeq, lastOffset, offsetDelta, timestamp)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # maxTimestamp of the batch as stored: append time (LogAppendTime) or max CreateTime


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp: int = -1  # gateway append time of the producer's last batch (expiry clock)

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


def increment_sequence(sequence: int, increment: int) -> int:
    """`DefaultRecordBatch.incrementSequence`: wraps past Integer.MAX_VALUE to 0."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    """`ProducerStateManager.isProducerExpired` (no open transaction is possible at the gateway)."""
    return now_ms - entry.last_timestamp >= expiration_ms


def expire(
    producers: tuple[ProducerStateEntry, ...], now_ms: int, expiration_ms: int
) -> tuple[ProducerStateEntry, ...]:
    """Drop every expired producer (`removeExpiredProducers`)."""
    if not producers:
        return producers
    kept = tuple(e for e in producers if not is_expired(e, now_ms, expiration_ms))
    return producers if len(kept) == len(producers) else kept


def find(
    producers: tuple[ProducerStateEntry, ...], producer_id: int, now_ms: int, expiration_ms: int
) -> ProducerStateEntry | None:
    """The live entry of a producer (an expired one counts as unknown)."""
    for e in producers:
        if e.producer_id == producer_id:
            return None if is_expired(e, now_ms, expiration_ms) else e
    return None


def check_append(
    entry: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    first_seq: int,
    first_offset: int,
    topic_partition: str,
) -> None:
    """`ProducerAppendInfo.maybeValidateDataBatch` for a CLIENT append; raises ProducerStateError."""
    current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
    # checkProducerEpoch (reference §1.1 step 17)
    if producer_epoch < current_epoch:
        raise ProducerStateError(
            Errors.INVALID_PRODUCER_EPOCH,
            f"Epoch of producer {producer_id} at offset {first_offset} in {topic_partition} is {producer_epoch}, "
            f"which is smaller than the last seen epoch {current_epoch}",
        )
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
        return
    last_seq = entry.last_seq if entry is not None else NO_SEQUENCE
    if not (current_epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, first_seq)):
        raise ProducerStateError(
            Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"Out of order sequence number for producer {producer_id} at offset {first_offset} in partition "
            f"{topic_partition}: {first_seq} (incoming seq. number), {last_seq} (current end sequence number)",
        )


def append_batch(
    producers: tuple[ProducerStateEntry, ...],
    entry: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    batch: BatchMetadata,
    append_time_ms: int,
) -> tuple[ProducerStateEntry, ...]:
    """`ProducerStateEntry.addBatch`: a new epoch clears the cache; keep the last 5 batches.
    `producers` should already be expired (see `expire`); the updated entry goes last."""
    if entry is None or entry.producer_epoch != producer_epoch:
        cached: tuple[BatchMetadata, ...] = ()
    else:
        cached = entry.batches
    cached = (cached + (batch,))[-NUM_BATCHES_TO_RETAIN:]
    updated = ProducerStateEntry(producer_id, producer_epoch, cached, append_time_ms)
    return tuple(e for e in producers if e.producer_id != producer_id) + (updated,)


# ------------------------------------------------------------------------------------------------
# the Spark stage keeps this as a string column


def producers_to_json(producers: tuple[ProducerStateEntry, ...]) -> str:
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


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"producer state: {what} must be an integer, got {value!r}")
    return value


def producers_from_json(text: str | None) -> tuple[ProducerStateEntry, ...]:
    """Inverse of `producers_to_json`; None or "" is the empty state. Raises ValueError on bad input."""
    if text is None or text == "":
        return ()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"producer state is not valid JSON: {e}") from None
    if not isinstance(doc, list):
        raise ValueError("producer state must be a JSON list")
    entries = []
    for item in doc:
        if not isinstance(item, dict) or not isinstance(item.get("batches"), list):
            raise ValueError(f"producer state entry must be an object with batches: {item!r}")
        batches = []
        for b in item["batches"]:
            if not isinstance(b, list) or len(b) != 5:
                raise ValueError(f"producer state batch must be [first_seq, last_seq, first_offset, last_offset, ts]: {b!r}")
            batches.append(BatchMetadata(*(_int(v, "batch field") for v in b)))
        entries.append(
            ProducerStateEntry(
                _int(item.get("producer_id"), "producer_id"),
                _int(item.get("producer_epoch"), "producer_epoch"),
                tuple(batches),
                _int(item.get("last_timestamp"), "last_timestamp"),
            )
        )
    return tuple(entries)
