"""Spark's floor for `make bench`: the gateway's plan shape with none of the gateway's work.

The same Kafka source and header decoding (`streaming.ingress.read_ingress`), the same grouping by
target (topic, partition) into the same stateful operator (`applyInPandasWithState`) with a function
that passes its rows through and keeps one trivial state value, and the gateway's sink shape with
nothing in it: Spark's `noop` sink, the rows counted as the micro-batch's observed metric. Its
micro-batch duration is the fixed cost Spark itself imposes on the machine; the gateway's overhead is
measured against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import LongType, StructField, StructType

from sinks.micro_batch import NOOP_SINK
from streaming.config import GatewayConfig
from streaming.ingress import read_ingress

FLOOR_METRIC = "floor"
STATE_SCHEMA = StructType([StructField("batches", LongType(), False)])


def pass_through(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    seen = state.get[0] if state.exists else 0
    for frame in frames:
        seen += len(frame)
        yield frame
    state.update((seen,))


def start_floor(spark: SparkSession, config: GatewayConfig, available_now: bool = False) -> StreamingQuery:
    ingress = read_ingress(spark, config)
    decided = ingress.groupBy("topic", "partition").applyInPandasWithState(
        pass_through, ingress.schema, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    writer = (
        decided.observe(FLOOR_METRIC, F.count(F.lit(1)).alias("rows")).writeStream.queryName(config.query_name)
        .option("checkpointLocation", str(config.checkpoint_location))
        .format(NOOP_SINK)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=config.trigger_interval)
    return writer.start()
