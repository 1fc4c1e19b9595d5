"""A standby driver's head start: what a new driver would otherwise do after the active one died.

`gateway run --standby` starts its JVM and Spark session (on a cluster: its application and executors),
its metrics and health endpoints, and then:
- `warm_up` (streaming/worker_warm_up.py): one small Python job over every executor core, so the Python workers
  are forked, the packed environment unpacked, the gateway's modules imported and each worker's producer of
  responses connected; again every `KEEP_WARM_S` while it waits (`KeepWarm`), since Spark ends a worker idle
  for a minute;
- `rehearse`: the query's own plan — the Kafka source on the ingress topic, the stateful stage on a
  RocksDB state store, the same shuffle, a foreachBatch running the sink's job shape (a `mapInArrow` over
  the decisions) — over the last message of each ingress partition, with a scratch checkpoint and nothing
  stored or published, so Spark's generated code (cached per JVM by its text), the Kafka consumer, the
  state store and the stage's and the sink's Python paths are loaded before takeover. On an ingress
  topic still empty (a fresh deployment: active and standby started together) the same plan runs over a
  scratch topic of its own (`<ingress topic>.rehearsal`, one partition) holding one batch for a registry
  topic, so a standby is as warm before the first produce as after a busy day.
Then it waits for the driver lock (`driver_lock.py`). What is left at takeover is what only the active
may do: the front door (producer ids, groups and the ingress producer read the current state) and the
query, which resumes from the checkpoint the dead driver left.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer
from pyspark.sql import DataFrame, SparkSession

from contract.ingress import ingress_headers, ingress_key
from contract.topics import rehearsal_topic
from kafka_cluster.admin import watermarks
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from sinks.decisions import arrow_decisions
from sinks.micro_batch import batch_id_and_decisions, micro_batch_job
from sinks.partition_task import SinkConfig
from sinks.registry_watcher import RegistryWatcher
from streaming.config import GatewayConfig
from streaming.ingress import read_ingress
from streaming.python_worker import prepare_worker
from streaming.stage import apply_stage
from streaming.worker_warm_up import warm_up
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.standby")

# A standby warms its Python workers up again this often: well inside Spark's one minute for an idle worker
KEEP_WARM_S = 20.0


class KeepWarm(threading.Thread):
    """A standby's warm-up again every `every_s` until `stop()`: Spark ends a Python worker idle for a minute
    (PythonWorkerFactory's IDLE_WORKER_TIMEOUT_NS), which would take the imports and the connected producers
    with it, so a standby waiting for weeks keeps them as they were at its start."""

    def __init__(self, spark: SparkSession, sink: SinkConfig | None, every_s: float = KEEP_WARM_S) -> None:
        super().__init__(name="standby-keep-warm", daemon=True)
        self.spark, self.sink, self.every_s = spark, sink, every_s
        self._stopping = threading.Event()
        self.runs = self.failures = 0
        self.workers: frozenset[tuple[str, int]] = frozenset()  # those of the last warm-up

    def run(self) -> None:
        failing = False
        while not self._stopping.wait(self.every_s):
            try:
                self.workers = warm_up(self.spark, self.sink).workers
                self.runs += 1
                if failing:
                    log.info("standby: warm again")
                failing = False
            except Exception as e:  # noqa: BLE001 - a cold worker at takeover is slower, not wrong
                self.failures += 1
                if not failing and not self._stopping.is_set():  # once per streak: an outage may be long
                    log.warning("standby: keeping warm failed (%s); trying again every %.0f s", e, self.every_s)
                failing = True

    def stop(self) -> None:
        self._stopping.set()


def _last_messages(config: GatewayConfig) -> str | None:
    """Spark's startingOffsets at the last message of each ingress partition (None: the topic is empty)."""
    consumer = Consumer(config.cluster.client({"group.id": config.cluster.group_id("standby-rehearsal", unique=False),
                                               "enable.auto.commit": False}))
    try:
        partitions = consumer.list_topics(config.ingress_topic, timeout=10).topics[config.ingress_topic].partitions
        starting: dict[str, int] = {}
        held = False
        for p in partitions:
            low, high = watermarks(consumer, config.ingress_topic, p, 10)
            starting[str(p)] = max(low, high - 1)
            held = held or high > low
        return json.dumps({config.ingress_topic: starting}) if held else None
    finally:
        consumer.close()


def scratch_ingress(config: GatewayConfig, registry: TopicRegistry) -> GatewayConfig | None:
    """`config` reading the rehearsal topic instead (`contract.topics`), which holds one batch more for the first
    topic of the registry (None without topics: the stage would have nothing to decide)."""
    if not len(registry):
        return None
    topic = rehearsal_topic(config.ingress_topic)  # made with the gateway's topics (`query.topic_specs`)
    target = sorted(registry.topics)[0]
    now = int(time.time() * 1000)
    batch = build_record_batch([(now + i, b"rehearsal", f"rehearsal {i}".encode(), ()) for i in range(10)])
    producer = Producer(config.cluster.client({"logger": KAFKA_CLIENT_LOG}))
    producer.produce(topic, key=ingress_key(target, 0), value=batch,
                     headers=ingress_headers(target, 0, f"rehearsal-{uuid.uuid4().hex}", client_id="standby"))
    if producer.flush(30):
        raise KafkaException(f"the rehearsal batch did not reach {topic} within 30 s")
    return config.with_overrides(ingress_topic=topic)


def rehearse(spark: SparkSession, config: GatewayConfig, timeout_s: float = 300.0) -> float | None:
    """The query's plan over the ingress topic's last messages, or over a scratch topic's while the ingress
    topic is empty (module docstring); the seconds it took, or None when there is nothing to decide (no
    topics). Nothing is stored, published or checkpointed where the query keeps it."""
    started = time.monotonic()
    registry = RegistryWatcher(config.path(config.topics_file))
    starting = _last_messages(config)
    if starting is None:
        scratch = scratch_ingress(config, registry.current())
        if scratch is None:
            return None
        config, starting = scratch, _last_messages(scratch)
        if starting is None:
            return None
    decisions = apply_stage(read_ingress(spark, config, config.ingress_limits(registry.current()), starting), registry)
    job = micro_batch_job(_read_decisions)  # the sink's job, without its work

    def dry_run(micro_batch: DataFrame, batch_id: int) -> None:
        job(micro_batch, batch_id).collect()

    with tempfile.TemporaryDirectory(prefix="gateway-rehearsal-") as checkpoint:
        query = (decisions.writeStream.queryName(f"{config.query_name}_standby_rehearsal")
                 .option("checkpointLocation", checkpoint).foreachBatch(dry_run)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(timeout_s)
        finally:
            query.stop()
    return time.monotonic() - started


def _read_decisions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    prepare_worker()
    _, decisions = batch_id_and_decisions(batches)
    for _ in arrow_decisions(decisions):  # read as the sink reads them; nothing stored or published
        pass
    yield from ()
