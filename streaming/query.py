"""Query lifecycle: build the pipeline (ingress → the stateful stage's decisions → the foreachBatch sink), start, stop."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from contract.limits import IngressLimits
from contract.topics import (
    DOORS_TOPIC_CONFIGS,
    DOORS_TOPIC_PARTITIONS,
    GROUPS_TOPIC_CONFIGS,
    GROUPS_TOPIC_PARTITIONS,
    REGISTRY_TOPIC_CONFIGS,
    REGISTRY_TOPIC_PARTITIONS,
    REHEARSAL_TOPIC_CONFIGS,
    SECURITY_TOPIC_PARTITIONS,
    TRANSACTION_STATE_TOPIC_CONFIGS,
    TRANSACTION_STATE_TOPIC_PARTITIONS,
    rehearsal_topic,
)
from kafka_cluster.registry_store import RegistryStore
from sinks.metrics.gateway_metrics import GatewayMetrics
from sinks.micro_batch import GatewaySink, MicroBatchObserver
from sinks.partition_task import SinkConfig
from sinks.registry_watcher import RegistryWatcher
from streaming.config import GatewayConfig
from streaming.ingress import read_ingress
from streaming.python_worker import prepare_sink_worker
from streaming.registry_sync import EXECUTOR_REGISTRY_FILE, RegistrySync, open_registry_store
from streaming.retention_schedule import RetentionSchedule
from streaming.sink_listener import SinkListener
from streaming.stage import apply_stage

log = logging.getLogger("gateway.query")


def sink_config(config: GatewayConfig, limits: IngressLimits | None = None) -> SinkConfig:
    limits = limits or config.ingress_limits()
    return SinkConfig(
        cluster=config.cluster,
        segments_root=config.path(config.segments_root),
        ingress_topic=config.ingress_topic,
        response_topic=config.response_topic,
        dlq_topic=config.dlq_topic,
        max_message_bytes=limits.dead_letter_message_bytes,
        publish_timeout_ms=config.publish_timeout_ms,
    )


def start_gateway(
    spark: SparkSession, config: GatewayConfig, available_now: bool = False, observers: Sequence[MicroBatchObserver] = (),
    metrics: GatewayMetrics | None = None, registry_store: RegistryStore | None = None,
) -> tuple[StreamingQuery, GatewaySink]:
    """Start the gateway query. `available_now` processes what the ingress topic holds and stops
    (tests, backfills); otherwise it runs with the configured processing-time trigger. Retention of the
    segment storage runs beside it on the driver (`sink.retention`, a `RetentionSchedule`) and stops
    when the query terminates; it counts its deletions into `metrics` when given."""
    config.checkpoint_location.mkdir(parents=True, exist_ok=True)
    # The registry on the cluster (a store of the caller's, or one of the query's own, closed with it); a bad
    # seed file fails the start, a bad change of it later keeps the registry as it is
    store = registry_store if registry_store is not None else open_registry_store(config)
    try:
        sync = RegistrySync(store, config.path(config.topics_file), config.checkpoint_location / EXECUTOR_REGISTRY_FILE,
                            config.path(config.segments_root), owns_store=registry_store is None).start()
    except BaseException:
        if registry_store is None:
            store.close()
        raise
    registry = RegistryWatcher(sync.executor_file)  # what the tasks decide and append with (`RegistrySync`)
    limits = config.ingress_limits(store.current())
    sink = GatewaySink(sink_config(config, limits), registry, observers, prepare_sink_worker,
                       before_write=sync.before_micro_batch, on_close=sync.close)
    # Kafka's scheduled retention (`UnifiedLog.deleteRetentionMsBreachedSegments`): started with the query, stopped when it terminates
    retention = RetentionSchedule(sink.config.segments_root, store.current, config.retention_check_interval_ms,
                                  metrics=metrics)
    decisions = apply_stage(read_ingress(spark, config, limits), registry)
    writer = (
        decisions.writeStream.queryName(config.query_name)
        .option("checkpointLocation", str(config.checkpoint_location))
        .foreachBatch(sink.write)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=config.trigger_interval)
    listener = SinkListener.register(spark, sink)  # before the start: it hears every report of the query
    try:
        query = writer.start()
    except BaseException:
        listener.remove()
        sync.close()
        raise
    listener.bind(str(query.id))
    sink.retention = retention.start(query, spark)  # its listener stops it when the query terminates
    log.info("gateway query %s started (checkpoint %s)", query.id, config.checkpoint_location)
    return query, sink


def topic_specs(config: GatewayConfig, limits: IngressLimits | None = None) -> list[tuple[str, int, dict[str, str]]]:
    """The gateway's own Kafka topics, each as large as it must be (`contract.limits`): ingress carries
    the largest batch that can pass the front door; dead letters that batch and their headers; responses
    as many record errors as dead letters; a standby's rehearsal topic one batch; the front door's groups and
    security topics, the transaction state and the topic registry are compacted. `create_topics` raises a smaller max.message.bytes of a topic that already
    exists."""
    limits = limits or config.ingress_limits()
    letters = {"max.message.bytes": str(limits.dead_letter_message_bytes)}
    return [
        (config.ingress_topic, config.ingress_partitions, {"max.message.bytes": str(limits.ingress_message_bytes)}),
        (config.response_topic, config.ingress_partitions, letters),
        (config.dlq_topic, 1, letters),
        (rehearsal_topic(config.ingress_topic), 1, {**REHEARSAL_TOPIC_CONFIGS,
                                                     "max.message.bytes": str(limits.ingress_message_bytes)}),
        (config.groups_topic, GROUPS_TOPIC_PARTITIONS, GROUPS_TOPIC_CONFIGS),
        security_topic_spec(config),
        (config.registry_topic_name, REGISTRY_TOPIC_PARTITIONS, REGISTRY_TOPIC_CONFIGS),
        *([(config.transaction_state_topic_name, TRANSACTION_STATE_TOPIC_PARTITIONS, TRANSACTION_STATE_TOPIC_CONFIGS)]
          if config.front_door_address else []),
        *([(config.doors_topic, DOORS_TOPIC_PARTITIONS, DOORS_TOPIC_CONFIGS)] if config.doors_topic else []),
    ]


def security_topic_spec(config: GatewayConfig) -> tuple[str, int, dict[str, str]]:
    """The front door's users and ACLs (`front_door/cluster/security_store.py`): compacted like the groups topic, one
    partition for one order of changes; `gateway users` creates it alone, before any door runs."""
    return config.security_topic, SECURITY_TOPIC_PARTITIONS, GROUPS_TOPIC_CONFIGS


def stop_gracefully(query: StreamingQuery, timeout_s: float = 60.0) -> None:
    """Stop between micro-batches: wait (bounded) for the micro-batch running now to end, then stop. With a
    backlog the next trigger starts at once, so waiting for no trigger to be active would wait the whole bound;
    the end of the running one is the gap. Interrupting a micro-batch is safe (it is replayed with the same
    clock and the sink skips what was committed) but noisy; waiting avoids it in the common case."""
    import time

    def last_batch() -> int:
        progress = query.lastProgress
        return int(progress["batchId"]) if progress else -1

    deadline = time.monotonic() + timeout_s
    running = last_batch()
    while (query.isActive and query.status.get("isTriggerActive") and last_batch() == running
           and time.monotonic() < deadline):
        time.sleep(0.2)  # polling Spark's status; there is no completion callback to wait on
    query.stop()
