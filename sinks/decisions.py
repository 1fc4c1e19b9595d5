"""The decisions DataFrame: the stateful stage's typed decision rows (`contract.decision_row.DecisionRow`) as
Spark columns, what the stage emits and the foreachBatch sink's tasks read back (docs/design.md). The column
names are the row's fields, in its order; the types are here, once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from contract.decision_row import DecisionRow

_INT, _LONG, _TEXT, _BOOL = IntegerType(), LongType(), StringType(), BooleanType()
# (Spark type, nullable) of each field of DecisionRow, in its order
_COLUMNS: dict[str, tuple[DataType, bool]] = {
    "ingress_partition": (_INT, False), "ingress_offset": (_LONG, False), "ingress_timestamp_ms": (_LONG, False),
    "request_id": (_TEXT, False), "client_id": (_TEXT, True), "acks": (_INT, False), "topic": (_TEXT, True),
    "partition": (_INT, True), "partition_header": (_TEXT, True), "replay_of": (_TEXT, True),
    "error_code": (_INT, False), "error_name": (_TEXT, True), "error_message": (_TEXT, True),
    "record_errors": (_TEXT, False), "record_error_count": (_INT, False), "base_offset": (_LONG, False),
    "last_offset": (_LONG, False), "log_append_time_ms": (_LONG, False), "append_time_ms": (_LONG, False),
    "max_timestamp": (_LONG, False), "producer_max_timestamp": (_LONG, False), "log_start_offset": (_LONG, False),
    "record_count": (_INT, False), "clock_held": (_BOOL, False), "duplicate": (_BOOL, False),
    "future_timestamps": (_INT, False), "window": (_TEXT, True), "batch_time_ms": (_LONG, False),
    "batch": (BinaryType(), False), "principal": (_TEXT, True), "first_unstable_offset": (_LONG, False),
    "aborted_txn_first_offset": (_LONG, False), "aborted_txn_last_stable_offset": (_LONG, False),
}
if tuple(_COLUMNS) != DecisionRow._fields:  # one definition of the row: its columns follow it
    raise ImportError(f"decision columns {tuple(_COLUMNS)} are not DecisionRow's fields {DecisionRow._fields}")

DECISION_SCHEMA = StructType([StructField(name, kind, nullable) for name, (kind, nullable) in _COLUMNS.items()])


def arrow_decision_chunks(batches: Iterable[Any]) -> Iterator[list[DecisionRow]]:
    """The decision rows of a task's Arrow record batches, one list per batch, in order (nulls as None: no
    pandas coercion)."""
    for batch in batches:
        if tuple(batch.schema.names) != DecisionRow._fields:
            raise ValueError(f"decision columns {batch.schema.names} are not the decision row {DecisionRow._fields}")
        yield list(map(DecisionRow._make, zip(*(column.to_pylist() for column in batch.columns), strict=True)))


def arrow_decisions(batches: Iterable[Any]) -> Iterator[DecisionRow]:
    """`arrow_decision_chunks`, row by row."""
    for chunk in arrow_decision_chunks(batches):
        yield from chunk
