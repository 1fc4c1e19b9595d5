"""What the append decision returns (`validate_and_assign`): the partition state it threads through,
`Accepted` with the stored bytes and offsets, or `Rejected` with Kafka's error, message and record errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from validators.codec.record_batch import NO_TIMESTAMP
from validators.errors import Errors
from validators.producer_state import NO_PRODUCERS, CompletedTxn, ProducerTable


class PartitionState(NamedTuple):
    """What a partition leader remembers between appends (the Spark stage keeps it as columns
    log_start_offset, log_end_offset, last_append_time_ms and producers = producers_to_json(...)).
    A typed tuple, like `Accepted`: one is built per accepted batch."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    last_append_time_ms: int = -1
    producers: ProducerTable = NO_PRODUCERS


@dataclass(frozen=True, slots=True)
class RecordError:
    """Kafka's `ProduceResponse.RecordError`: 0-based position of the record in its batch, and why."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        # RecordError.toString, as processRecordErrors prints the first three
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class Accepted(NamedTuple):
    """The accepted decision. A typed tuple, not a frozen dataclass: one is built per batch on the hot path,
    where a frozen dataclass's `__init__` (a `object.__setattr__` per field) cost ~3 µs of ~25."""

    records: bytes  # the batch as stored (empty for an idempotent duplicate: nothing is appended)
    base_offset: int
    last_offset: int
    max_timestamp: int  # header maxTimestamp as stored: append time (LogAppendTime) or max CreateTime (-1: none)
    log_append_time_ms: int  # what the produce response carries: -1 for CreateTime topics (a duplicate: its cached batch timestamp)
    append_time_ms: int  # the gateway's monotonic append time of this decision, for every topic
    record_count: int
    state: PartitionState
    clock_held: bool = False  # append time was clamped to the last one (clock behind)
    future_timestamp_count: int = 0  # KIP-937: accepted records > 1 h ahead of now_ms (CreateTime topics)
    duplicate: bool = False  # idempotent retry of a cached batch: original offsets, nothing stored
    producer_max_timestamp: int = NO_TIMESTAMP  # header maxTimestamp as the producer sent it (unverified for LAT)
    input_magic: int = 2  # 0/1: a legacy message set, up-converted
    rebuilt: bool = False  # Path C: records re-encoded (legacy up-conversion, or recompression to the topic codec)
    completed_txn: CompletedTxn | None = None  # a transaction marker that ended a transaction with records here

    @property
    def log_start_offset(self) -> int:
        return self.state.log_start_offset


@dataclass(frozen=True, slots=True)
class Rejected:
    error: Errors
    message: str
    record_errors: tuple[RecordError, ...] = ()
    log_start_offset: int = -1  # the log start offset, or -1 for Kafka's "known" exceptions
    window: tuple[int, int] | None = None  # INVALID_TIMESTAMP on CreateTime: [now-before, now+after] as printed

    @property
    def response_error_message(self) -> str | None:
        """ProduceResponse ErrorMessage: Kafka fills it only for RecordValidationException."""
        return self.message if self.record_errors else None


AppendResult = Accepted | Rejected


# The gateway is the only leader of its partitions and never changes epoch.
GATEWAY_LEADER_EPOCH = 0


class RejectedBatch(Exception):
    """Internal: carries a Rejected out of nested helpers."""

    def __init__(self, result: Rejected) -> None:
        super().__init__(result.message)
        self.result = result


def invalid_record(message: str, lso: int) -> Rejected:
    return Rejected(Errors.INVALID_RECORD, message, log_start_offset=lso)
