"""The sink's job shape on a real Spark session: a function bound into Spark once serves every later DataFrame,
its columns resolved by name against each, and the micro-batch's id reaches the tasks beside the rows."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from contract.decision_row import DecisionRow
from sinks.arrow_map import ArrowMap
from sinks.decisions import DECISION_SCHEMA
from sinks.micro_batch import NO_ROWS, batch_id_and_decisions, micro_batch_job

SUM_SCHEMA = StructType([StructField("total", LongType(), False)])


def _sum_x(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"total": [sum(pc.sum(b.column("x")).as_py() or 0 for b in batches)]})


def _seen(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    batch_id, decisions = batch_id_and_decisions(batches)
    rows = 0
    for batch in decisions:
        assert batch.schema.names == list(DecisionRow._fields)
        rows += batch.num_rows
    yield pa.RecordBatch.from_pydict({"summary": [json.dumps([batch_id, rows])]})  # the sink's summary column


def test_a_bound_function_serves_every_later_dataframe_by_column_name(spark: SparkSession) -> None:
    job = ArrowMap(_sum_x, SUM_SCHEMA, ["x", "y"])
    first = spark.range(10).select(F.col("id").alias("y"), (F.col("id") * 2).alias("x"))
    assert sum(r.total for r in job(first).collect()) == 90
    bound = job._udf_column
    second = spark.range(5).select((F.col("id") + 1).alias("x"), F.lit(0).alias("y"), F.lit("z").alias("other"))
    assert sum(r.total for r in job(second).collect()) == 15  # resolved against this plan, in its own order
    assert job._udf_column is bound  # made once


def test_each_micro_batch_id_reaches_the_tasks_of_one_bound_job(spark: SparkSession) -> None:
    job = micro_batch_job(_seen)
    rows = spark.range(0, 6, 1, 3).select(*(F.lit(None).cast(f.dataType).alias(f.name) for f in DECISION_SCHEMA.fields))
    for batch_id in (7, 8):
        seen = [json.loads(r.summary) for r in job(rows, batch_id).collect()]
        assert sorted(seen) == [[batch_id, 2]] * 3
    nothing = [json.loads(r.summary) for r in job(rows.limit(0), 9).collect()]
    assert all(s == [NO_ROWS, 0] for s in nothing)  # a task without rows needs no id
