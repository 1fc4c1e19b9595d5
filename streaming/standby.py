"""A standby driver's head start: what a new driver would otherwise do after the active one died.

`gateway run --standby` starts its JVM and Spark session (on a cluster: its application and executors),
its metrics and health endpoints, and runs `warm_up` — one small Python job over every executor core, so
the Python workers are forked, the packed environment unpacked and the gateway's modules imported before
it is needed. Then it waits for the driver lock (`driver_lock.py`). What is left at takeover is what only
the active may do: the front door (producer ids, groups and the ingress producer read the current state)
and the query, which resumes from the checkpoint the dead driver left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

log = logging.getLogger("gateway.standby")


def _import_gateway(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in each Python worker: imports what the stage and the sink import."""
    import sinks.partition_task  # noqa: F401  (the sink's task)
    import streaming.stage  # noqa: F401  (the stateful stage and the validators under it)

    yield from batches


def warm_up(spark: SparkSession) -> float:
    """One Python task per executor core (local: per local core); returns the seconds it took."""
    started = time.monotonic()
    slots = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, slots, numPartitions=slots).mapInArrow(_import_gateway, "id long").count()
    return time.monotonic() - started
