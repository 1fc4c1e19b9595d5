"""The stored batches a partition's producer state is rebuilt from (`validators/producer_state_rebuild.py`), read
from its committed segments as Kafka's `UnifiedLog.rebuildProducerState` reads them: every batch with a producer
id at or after the log start offset, its header only, and a control batch's one record for its marker.

Where the walk starts. Kafka loads its latest producer snapshot and reads the segments after it; the snapshots
keep every producer until `producer.id.expiration.ms` expires it. The gateway writes no snapshots (the stage's
producer state is in Spark's state store), so the walk reads the retained log — not all of it: it starts at the
first segment whose largest timestamp is after `now - producer.id.expiration.ms`, or at the segment that holds the
partition's first unstable offset (from the commit record) when that one is earlier (`walk_start`). What it skips
cannot change a listed producer's epoch, last sequence, last timestamp or open transaction:

- every batch in a skipped segment has a timestamp at or before the cut, so a producer whose last batch or marker
  is there has expired (Kafka's `now - lastTimestamp >= producer.id.expiration.ms`), unless its transaction is
  still open; an open transaction starts at or after the first unstable offset, whose segment is read;
- a producer with a batch or marker after the cut takes those fields from it.

What is kept shorter than Kafka keeps it: the coordinator epoch of a producer whose last marker is in a skipped
segment reads -1 until its next marker, and a producer whose batches retention or DeleteRecords removed is not
listed (Kafka's snapshots keep it until it expires). A directory without a commit record (a copy of a broker's)
has no first unstable offset to start from: every segment of it is read.

Nothing is cached between requests: each reads one batch header per batch from where the walk starts (a day of
batches by default), and decodes only the markers' one record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence

from storage.file_records import BatchInfo, CorruptRecordError
from storage.log_reader import PartitionReader
from storage.segment import LogSegment
from validators.codec.compression import CorruptCompressedDataError
from validators.codec.control_batch import read_end_txn_marker
from validators.codec.record_batch import NO_PRODUCER_ID, NO_TIMESTAMP, decode_record_batch, is_valid
from validators.codec.records import InvalidRecordError
from validators.producer_state_rebuild import LoggedBatch


def walk_start(bases: Sequence[int], max_timestamp: Callable[[int], int], since_ms: int,
               first_unstable_offset: int | None) -> int:
    """The index of the first segment to read among segments with base offsets `bases` (oldest first): the first
    that may hold a batch after `since_ms` (`max_timestamp(i)`, the segment's largest timestamp, asked in order
    and only until the answer is known) or that holds `first_unstable_offset`; `len(bases)` when none does."""
    for i in range(len(bases)):
        last = i + 1 == len(bases)
        if first_unstable_offset is not None and (last or bases[i + 1] > first_unstable_offset):
            return i
        if max_timestamp(i) > since_ms:
            return i
    return len(bases)


def _logged(segment: LogSegment, batch: BatchInfo) -> LoggedBatch:
    header = batch.header
    timestamp, marker = header.max_timestamp, None
    if header.is_control_batch and header.records_count > 0:
        data = segment.read_bytes(batch.position, batch.size)
        where = f"{segment.log_path}: control batch at position {batch.position} (offset {batch.base_offset})"
        if len(data) != batch.size or not is_valid(data):
            raise CorruptRecordError(f"{where} fails its CRC")
        try:
            decoded = decode_record_batch(data)
            marker = read_end_txn_marker(decoded)
        except (ValueError, KeyError, IndexError, struct.error, CorruptCompressedDataError, InvalidRecordError) as e:
            raise CorruptRecordError(f"{where} is no end-transaction marker: {e}") from None
        timestamp = decoded.records[0].timestamp  # `ProducerAppendInfo.append`: the marker record's
    return LoggedBatch(header.producer_id, header.producer_epoch, header.base_sequence, header.base_offset,
                       header.last_offset, timestamp, header.is_transactional, header.is_control_batch, marker)


def producer_batches(reader: PartitionReader, since_ms: int) -> Iterator[LoggedBatch]:
    """The batches with a producer id of the segments from `walk_start` on, in offset order. Raises
    KafkaStorageError (CorruptRecordError naming the file) for a batch that cannot be read."""
    views = reader.segments

    def max_timestamp(i: int) -> int:
        try:
            return views[i].max_timestamp_and_offset()[0]
        except FileNotFoundError:  # retention deleted it after the commit record was read: nothing to start at
            return NO_TIMESTAMP

    unstable = reader.head.first_unstable_offset if reader.head is not None else None
    start = 0 if reader.head is None else walk_start([v.base_offset for v in views], max_timestamp, since_ms, unstable)
    for view in views[start:]:
        try:
            segment = view.segment
        except FileNotFoundError:  # retention deleted it after the commit record was read: no longer retained
            continue
        for batch in segment.batches_from(0):
            if batch.last_offset < reader.log_start_offset or batch.header.producer_id <= NO_PRODUCER_ID:
                continue
            yield _logged(segment, batch)
