"""The ingress source: raw produce batches from Kafka, headers decoded into columns (docs/design.md: ingress topic)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from contract.ingress import (
    HEADER_ACKS,
    HEADER_CLIENT_ID,
    HEADER_ORIGIN,
    HEADER_PARTITION,
    HEADER_PRINCIPAL,
    HEADER_REPLAY_OF,
    HEADER_REQUEST_ID,
    HEADER_TOPIC,
    HEADER_TRANSACTION_VERSION,
    HEADER_TRANSACTIONAL_ID,
)
from contract.limits import IngressLimits
from streaming.config import GatewayConfig


def _header_sql(name: str) -> str:
    """UTF-8 value of the first header called `name`, or null. A value that is not valid UTF-8 is read with
    replacement characters (`make_valid_utf8`; Spark's `decode` raises on it, which would stop the query) and is
    then rejected by the stage as an illegal name.

    Found by position among the header keys (`array_position` is 1-based, 0 when absent; `get` of -1 is null)
    rather than with `filter(headers, h -> ...)`: Spark compiles these expressions, while a lambda's higher-order
    function is evaluated row by row, each element reading the session's SQL settings afresh (a copy of the
    process's environment and system properties each time, in Spark 4.2's executors): eleven headers a row
    took 0.25-0.5 ms of the source's task per ingress message under load (docs/performance.md, "Scale")."""
    return f"make_valid_utf8(cast(get(headers.value, array_position(headers.key, '{name}') - 1) as string))"


def _header(name: str) -> Column:
    return F.expr(_header_sql(name))


def _header_int(name: str) -> Column:
    return F.expr(f"try_cast(trim({_header_sql(name)}) as int)")


def read_ingress(spark: SparkSession, config: GatewayConfig, limits: IngressLimits | None = None,
                 starting_offsets: str = "earliest") -> DataFrame:
    """`starting_offsets` is Spark's option (a new checkpoint only): the query's is "earliest"; a standby's
    rehearsal starts at the last message of each partition."""
    limits = limits or config.ingress_limits()
    raw = (
        spark.readStream.format("kafka")
        .options(**config.cluster.spark_options())
        .option("subscribe", config.ingress_topic)
        .option("groupIdPrefix", config.cluster.group_id("spark-source", unique=False))
        .option("includeHeaders", "true")
        .option("startingOffsets", starting_offsets)
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        # A fetch carries a whole largest ingress message (`contract.limits`); oversized batches are
        # rejected by the stage, never stuck in the source.
        .option("kafka.max.partition.fetch.bytes", str(limits.ingress_message_bytes))
        .option("kafka.fetch.max.bytes", str(limits.fetch_max_bytes))
        # The task reads offsets the broker already has; a long-poll wait only delays a fetch that
        # the cached consumer left in flight at the end of the previous micro-batch (~10 ms a task).
        .option("kafka.fetch.max.wait.ms", "0")
        .load()
    )
    return decode_ingress(raw)


def decode_ingress(raw: DataFrame) -> DataFrame:
    """One row per ingress message. `gw.partition` is parsed with try_cast, so "01" and "1" are the
    same target partition and a non-number becomes null (rejected by the stage, never dropped)."""
    return raw.select(
        F.col("partition").alias("ingress_partition"),
        F.col("offset").alias("ingress_offset"),
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("ingress_timestamp_ms"),
        F.coalesce(F.col("value"), F.lit(b"").cast("binary")).alias("batch"),
        _header(HEADER_TOPIC).alias("topic"),
        _header_int(HEADER_PARTITION).alias("partition"),
        _header(HEADER_PARTITION).alias("partition_header"),
        F.coalesce(
            _header(HEADER_REQUEST_ID),
            F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string")),
        ).alias("request_id"),
        _header(HEADER_CLIENT_ID).alias("client_id"),
        F.coalesce(_header_int(HEADER_ACKS), F.lit(-1)).alias("acks"),
        _header(HEADER_REPLAY_OF).alias("replay_of"),
        _header(HEADER_PRINCIPAL).alias("principal"),
        _header(HEADER_TRANSACTIONAL_ID).alias("transactional_id"),
        _header(HEADER_ORIGIN).alias("origin"),
        F.coalesce(_header_int(HEADER_TRANSACTION_VERSION), F.lit(0)).alias("transaction_version"),
    )

