"""Spark's floor for `make bench`: the gateway's plan shape with none of the gateway's work.

The same Kafka source and header decoding (`streaming.ingress.read_ingress`), the same grouping by
bucket of target (topic, partition)s, with the same columns (`streaming.stage.stage_input`), into the same stateful operator (`applyInPandasWithState`) with a function
that passes its rows through and keeps one trivial state value, and the gateway's sink shape with
nothing in it: a foreachBatch running one job over the stage's rows, a `mapInArrow` in their own partitions
that counts them and hands back one row per task, its function bound into Spark once as the sink's is
(`sinks.arrow_map`). Its micro-batch duration is the fixed cost Spark itself
imposes on the machine; the gateway's overhead is measured against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import LongType, StructField, StructType

from sinks.arrow_map import ArrowMap
from streaming.config import GatewayConfig
from streaming.ingress import read_ingress
from streaming.stage import BUCKET_COLUMN, stage_input

COUNT_SCHEMA = StructType([StructField("rows", LongType(), False)])
STATE_SCHEMA = StructType([StructField("batches", LongType(), False)])


def pass_through(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    seen = state.get[0] if state.exists else 0
    for frame in frames:
        seen += len(frame)
        yield frame.drop(columns=[BUCKET_COLUMN])
    state.update((seen,))


def count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})


def start_floor(spark: SparkSession, config: GatewayConfig, available_now: bool = False) -> StreamingQuery:
    ingress = read_ingress(spark, config)
    staged = stage_input(ingress)
    passed = staged.drop(BUCKET_COLUMN)
    decided = staged.groupBy(BUCKET_COLUMN).applyInPandasWithState(
        pass_through, passed.schema, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    job = ArrowMap(count_rows, COUNT_SCHEMA, passed.columns)

    def pass_through_sink(rows: DataFrame, _batch_id: int) -> None:
        job(rows).collect()

    writer = (
        decided.writeStream.queryName(config.query_name)
        .option("checkpointLocation", str(config.checkpoint_location))
        .foreachBatch(pass_through_sink)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=config.trigger_interval)
    return writer.start()
