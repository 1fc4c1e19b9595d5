"""The decision row: what the stateful stage emits for each ingress batch and the sink's tasks read
(DESIGN §6). One definition: the stage derives its Spark output schema from it (`decision_columns`),
the sink reads its Arrow rows into it, the responses, dead letters and metric deltas take it typed.
Nulls are None (the rows come from Arrow, never through pandas' NaN)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import NoneType, UnionType
from typing import Annotated, NamedTuple, Union, get_args, get_origin, get_type_hints


class ColumnKind(Enum):
    INT32 = "int32"
    INT64 = "int64"
    STRING = "string"
    BOOLEAN = "boolean"
    BINARY = "binary"


Int32 = Annotated[int, ColumnKind.INT32]
Int64 = Annotated[int, ColumnKind.INT64]


class DecisionRow(NamedTuple):
    ingress_partition: Int32
    ingress_offset: Int64
    ingress_timestamp_ms: Int64
    request_id: str
    client_id: str | None
    acks: Int32
    topic: str | None  # gw.topic (None: header missing)
    partition: Int32 | None  # gw.partition parsed (None: missing or not a number)
    partition_header: str | None  # gw.partition as sent
    replay_of: str | None  # gw.replay.of: copied to the dead letter (no replay loops)
    error_code: Int32
    error_name: str | None
    error_message: str | None
    record_errors: str  # JSON list of {batch_index, message}: the first ones, bounded (contract.record_errors)
    record_error_count: Int32  # how many record errors the batch had (more than the list holds when it is cut)
    base_offset: Int64
    last_offset: Int64
    log_append_time_ms: Int64
    append_time_ms: Int64
    max_timestamp: Int64
    producer_max_timestamp: Int64  # header maxTimestamp as the producer sent it
    log_start_offset: Int64
    record_count: Int32
    clock_held: bool
    duplicate: bool  # idempotent retry: acknowledged, not stored again
    future_timestamps: Int32  # accepted records > 1 h ahead (KIP-937)
    window: str | None  # INVALID_TIMESTAMP: the accepted [now-before, now+after]
    batch_time_ms: Int64  # the micro-batch clock (`now`)
    batch: bytes | None  # stored bytes if accepted, original bytes if rejected; None while in the spool
    spool: str | None = None  # the spool file holding `batch` between the stage and the sink (sinks.batch_spool)
    spool_offset: Int64 = -1  # where in it
    spool_length: Int32 = -1  # how many bytes

    @property
    def batch_size(self) -> int:
        """The batch's length in bytes, wherever its bytes are (in `batch` or in the spool)."""
        return len(self.batch) if self.batch is not None else max(self.spool_length, 0)


DECISION_FIELDS: tuple[str, ...] = DecisionRow._fields


@dataclass(frozen=True)
class Column:
    name: str
    kind: ColumnKind
    nullable: bool


_PLAIN_KINDS = {str: ColumnKind.STRING, bool: ColumnKind.BOOLEAN, bytes: ColumnKind.BINARY}


def _column(name: str, hint: object) -> Column:
    nullable = False
    if get_origin(hint) in (Union, UnionType):
        (hint,) = (a for a in get_args(hint) if a is not NoneType)
        nullable = True
    if get_origin(hint) is Annotated:
        kind = get_args(hint)[1]
    else:
        kind = _PLAIN_KINDS[hint]  # type: ignore[index]
    return Column(name, kind, nullable)


def decision_columns() -> tuple[Column, ...]:
    """The columns in order, with their kind and nullability, read from `DecisionRow`'s annotations."""
    hints = get_type_hints(DecisionRow, include_extras=True)
    return tuple(_column(name, hints[name]) for name in DECISION_FIELDS)
