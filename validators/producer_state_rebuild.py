"""A partition's producer state rebuilt from its stored batches, as Kafka rebuilds it when it loads a log
(`UnifiedLog.rebuildProducerState` -> `loadProducersFromRecords`, every batch with a producer id through
`ProducerAppendInfo.append` with origin REPLICATION): pure, over the batches' headers and markers.

Per batch, in offset order (`ProducerAppendInfo.append`):

- a data batch is added to its producer's entry (`appendDataBatch`): its epoch (a new one clears the cached
  batches), its sequence range and offsets, `lastTimestamp` = the batch's maxTimestamp, and a transactional
  batch opens the producer's transaction here at its base offset when none is open;
- a control batch with a record is an end-transaction marker (`appendEndTxnMarker`): the producer's epoch,
  the marker's coordinator epoch and `lastTimestamp` = the marker record's timestamp, and no transaction open;
- an empty control batch is skipped (its transaction was cleaned from the log).

Replication origin: nothing is checked (sequences never; Kafka only logs a lower producer or coordinator
epoch), since the stage checked every batch when it appended it. `lastTimestamp` is the stored timestamp, as
Kafka's: the stage's own producer state keeps its append time instead (`producer_state`), which differs on
CreateTime topics by the producers' clock skew.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from validators.codec.control_batch import ControlRecordType, EndTransactionMarker
from validators.producer_state import (
    NO_PRODUCERS,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerStateEntry,
    ProducerTable,
    append_batch,
    append_end_txn_marker,
    increment_sequence,
)


class LoggedBatch(NamedTuple):
    """What a rebuild reads of one stored batch with a producer id: its header's fields and, for a control
    batch, its end-transaction marker (None: an empty control batch)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    timestamp: int  # a data batch's maxTimestamp; a marker's record timestamp
    is_transactional: bool
    is_control: bool = False
    marker: EndTransactionMarker | None = None


def rebuild_producer_state(batches: Iterable[LoggedBatch], topic_partition: str) -> ProducerTable:
    """The producer table the batches leave, from none (`loadProducersFromRecords`); not yet expired."""
    producers = NO_PRODUCERS
    for b in batches:
        entry = producers.get(b.producer_id)
        if b.is_control:
            if b.marker is not None:
                producers, _ = append_end_txn_marker(
                    producers, entry, b.producer_id, b.producer_epoch, b.marker.control_type is ControlRecordType.ABORT,
                    b.marker.coordinator_epoch, b.base_offset, b.timestamp, topic_partition, validate=False)
            continue
        # DefaultRecordBatch.lastSequence
        last_seq = (NO_SEQUENCE if b.base_sequence == NO_SEQUENCE
                    else increment_sequence(b.base_sequence, b.last_offset - b.base_offset))
        producers = append_batch(
            producers, entry, b.producer_id, b.producer_epoch,
            BatchMetadata(b.base_sequence, last_seq, b.base_offset, b.last_offset, b.timestamp), b.timestamp,
            b.is_transactional)
    return producers


def active_producers(producers: ProducerTable, now_ms: int, expiration_ms: int) -> list[ProducerStateEntry]:
    """The entries DescribeProducers lists (`ProducerStateManager.activeProducers`), by producer id: those
    `producer.id.expiration.ms` has not expired at `now_ms` (an open transaction never expires). Kafka expires
    every `producer.id.expiration.check.interval.ms` (10 minutes), so it may list one a little longer."""
    return sorted(producers.expired(now_ms, expiration_ms), key=lambda e: e.producer_id)
