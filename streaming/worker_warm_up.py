"""Python workers warmed before the query needs them (`warm_up`): one plain Python job, an RDD's
`mapPartitions` with a task per executor core (no SQL plan for the driver to analyse), each task importing
what the stateful stage and the sink import and connecting its worker's producer of responses and dead letters.

Spark keeps one Python daemon per workers' environment (`PythonWorkerFactory`, keyed by the interpreter and
the environment variables a runner gives its workers) and hands a finished task's worker, modules imported and
producer connected, to the next task that asks for one (worker reuse). The query's SQL runners (the stage's
`applyInPandasWithState`, the sink's `mapInArrow`) and a plain Python job ask with the same environment once
simplified tracebacks are off (`spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled`, set by
streaming/session.py): `SPARK_SIMPLIFIED_TRACEBACK` is the one variable only the SQL runners add. So the
warm-up's daemon and workers are the query's.

`gateway run` warms up on a thread (`WarmUpBeside`): the daemon's start and the imports (pandas, pyarrow, the
gateway) as soon as the session is up, beside the broker's start and the topics' creation; the producers'
connections once the topics exist, beside the front door's start and the driver's plan of the first
micro-batch. They would otherwise come after that plan (docs/performance.md, "Start-up"). A standby warms up
while it waits (streaming/standby.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from kafka_cluster.publisher import connect
from streaming.python_worker import prepare_worker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sinks.partition_task import SinkConfig

log = logging.getLogger("gateway.warm_up")

# How long `WarmUpBeside` waits for the gateway's topics (a start that fails before them never gives them)
SINK_WAIT_S = 300.0


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up did: its seconds, and the Python workers (host, pid) its tasks ran in."""

    seconds: float
    workers: frozenset[tuple[str, int]]


def _warm_worker(sink: SinkConfig | None, _slots: Iterable[int]) -> Iterator[tuple[str, int]]:
    """Runs in each Python worker: imports what the stage and the sink import, and connects the worker's
    producer of responses and dead letters (`sink`); yields the worker's host and pid."""
    import sinks.micro_batch  # noqa: F401  (the sink's work and the storage under it)
    import streaming.stage  # noqa: F401  (the stateful stage, pandas and the validators under it)
    prepare_worker()  # its collector settled on the imports, before a task's data (streaming/python_heap.py)

    if sink is not None:
        connect(sink.cluster, sink.max_message_bytes, (sink.response_topic, sink.dlq_topic), sink.publish_timeout_ms)
    yield socket.gethostname(), os.getpid()


def warm_up(spark: SparkSession, sink: SinkConfig | None = None) -> WarmUp:
    """One Python task per executor core (local: per local core)."""
    started = time.monotonic()
    slots = max(1, spark.sparkContext.defaultParallelism)
    workers = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(partial(_warm_worker, sink)).collect()
    return WarmUp(time.monotonic() - started, frozenset(workers))


class WarmUpBeside:
    """`gateway run`'s warm-up on a thread of its own: `begin` when the session is up (workers forked, modules
    imported), `connect` when the gateway's topics exist (the same workers' producers connected). A warm-up
    that fails costs nothing but its time: the first micro-batch starts its workers itself."""

    def __init__(self) -> None:
        self._sink: Future[SinkConfig] = Future()

    def begin(self, spark: SparkSession) -> None:
        threading.Thread(target=self._run, args=(spark,), name="python-workers-warm-up", daemon=True).start()

    def connect(self, sink: SinkConfig) -> None:
        self._sink.set_result(sink)

    def _run(self, spark: SparkSession) -> None:
        try:
            forked = warm_up(spark).seconds
            connected = warm_up(spark, self._sink.result(timeout=SINK_WAIT_S)).seconds
            log.debug("Python workers warmed in %.1f s, their producers connected in %.1f s", forked, connected)
        except Exception as e:  # noqa: BLE001 - see the class docstring
            log.debug("warming the Python workers up failed: %s", e)
