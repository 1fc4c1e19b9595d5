"""A standby driver's head start: what a new driver would otherwise do after the active one died.

`gateway run --standby` starts its JVM and Spark session (on a cluster: its application and executors),
its metrics and health endpoints, and then:
- `warm_up`: one small Python job over every executor core, so the Python workers are forked, the packed
  environment unpacked and the gateway's modules imported;
- `rehearse`: the query's own plan — the Kafka source on the ingress topic, the stateful stage on a
  RocksDB state store, the same shuffle, a foreachBatch running the sink's job shape (a `mapInArrow` over
  the decisions) — over the last message of each ingress partition, with a scratch checkpoint and nothing
  stored or published, so Spark's generated code (cached per JVM by its text), the Kafka consumer, the
  state store and the stage's and the sink's Python paths are loaded before takeover.
Then it waits for the driver lock (`driver_lock.py`). What is left at takeover is what only the active
may do: the front door (producer ids, groups and the ingress producer read the current state) and the
query, which resumes from the checkpoint the dead driver left.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from sinks.decisions import arrow_decisions
from sinks.micro_batch import TASK_SUMMARY_SCHEMA
from sinks.registry_watcher import RegistryWatcher
from streaming.config import GatewayConfig
from streaming.ingress import read_ingress
from streaming.stage import apply_stage, prepare_worker

log = logging.getLogger("gateway.standby")


def _import_gateway(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in each Python worker: imports what the stage and the sink import."""
    import streaming.stage  # noqa: F401  (the stateful stage, the sink's work and the validators under them)

    yield from batches


def warm_up(spark: SparkSession) -> float:
    """One Python task per executor core (local: per local core); returns the seconds it took."""
    started = time.monotonic()
    slots = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, slots, numPartitions=slots).mapInArrow(_import_gateway, "id long").count()
    return time.monotonic() - started


def _last_messages(config: GatewayConfig) -> str | None:
    """Spark's startingOffsets at the last message of each ingress partition (None: the topic is empty)."""
    consumer = Consumer(config.cluster.client({"group.id": config.cluster.group_id("standby-rehearsal", unique=False),
                                               "enable.auto.commit": False}))
    try:
        partitions = consumer.list_topics(config.ingress_topic, timeout=10).topics[config.ingress_topic].partitions
        starting: dict[str, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(config.ingress_topic, p), timeout=10)
            starting[str(p)] = max(low, high - 1)
        return json.dumps({config.ingress_topic: starting}) if any(starting.values()) else None
    finally:
        consumer.close()


def rehearse(spark: SparkSession, config: GatewayConfig, timeout_s: float = 300.0) -> float | None:
    """The query's plan over the ingress topic's last messages (module docstring); the seconds it took, or
    None when there was nothing to read. Nothing is stored, published or checkpointed where the query keeps it."""
    starting = _last_messages(config)
    if starting is None:
        return None
    started = time.monotonic()
    registry = RegistryWatcher(config.path(config.topics_file))
    decisions = apply_stage(read_ingress(spark, config, config.ingress_limits(registry.current()), starting), registry)
    with tempfile.TemporaryDirectory(prefix="gateway-rehearsal-") as checkpoint:
        query = (decisions.writeStream.queryName(f"{config.query_name}_standby_rehearsal")
                 .option("checkpointLocation", checkpoint).foreachBatch(_dry_run)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(timeout_s)
        finally:
            query.stop()
    return time.monotonic() - started


def _read_decisions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    prepare_worker()
    for _ in arrow_decisions(batches):  # read as the sink reads them; nothing stored or published
        pass
    yield from ()


def _dry_run(decisions: DataFrame, _batch_id: int) -> None:
    """The sink's job over the decisions, without its work."""
    decisions.mapInArrow(_read_decisions, TASK_SUMMARY_SCHEMA).collect()
