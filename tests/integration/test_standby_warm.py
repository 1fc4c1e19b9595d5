"""A standby's warm-up on a real local Spark session and broker: each task runs in a Python worker and connects
that worker's producer of responses; `KeepWarm` runs it again and again while the standby waits (Spark ends a
Python worker idle for a minute), and stops when told."""

from __future__ import annotations

import time

from pyspark.sql import SparkSession

from streaming.config import GatewayConfig
from streaming.query import sink_config
from streaming.standby import KeepWarm
from streaming.worker_warm_up import warm_up
from tests.integration.gateway_io import create_gateway_topics


def test_a_standby_warms_its_workers_up_again_while_it_waits(spark: SparkSession,
                                                             gateway_config: GatewayConfig) -> None:
    create_gateway_topics(gateway_config)
    sink = sink_config(gateway_config)
    first = warm_up(spark, sink)
    assert first.workers and all(pid > 0 for _, pid in first.workers)

    keep_warm = KeepWarm(spark, sink, every_s=0.1)
    keep_warm.start()
    deadline = time.monotonic() + 120
    while keep_warm.runs < 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # polling a counter: the thread signals nothing else
    keep_warm.stop()
    keep_warm.join(60)
    assert not keep_warm.is_alive()
    assert keep_warm.runs >= 2 and keep_warm.failures == 0
    assert keep_warm.workers  # the workers of its last warm-up, each with its producer connected
