"""The warm-up's Python workers are the query's, on a real local Spark session with the gateway's settings:
its plain Python job starts them from the daemon the SQL runners (the stage's, the sink's `mapInArrow`) ask,
and a SQL task after it runs in a worker that has the gateway's modules imported already."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from streaming.worker_warm_up import warm_up


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    warm = "streaming.stage" in sys.modules and "sinks.micro_batch" in sys.modules  # before this task imports any
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "daemon": [os.getppid()], "warm": [warm]})


def test_a_sql_task_after_the_warm_up_runs_in_a_warmed_worker_of_the_same_daemon(spark: SparkSession) -> None:
    warmed = warm_up(spark)
    assert warmed.workers
    daemons = {_parent(pid) for _, pid in warmed.workers}
    slots = spark.sparkContext.defaultParallelism
    rows = spark.range(0, slots, numPartitions=slots).mapInArrow(_worker, "pid long, daemon long, warm boolean").collect()
    assert {r.daemon for r in rows} == daemons  # a second daemon would be a cold start beside the warm one
    assert all(r.warm for r in rows), rows
