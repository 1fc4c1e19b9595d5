"""The gateway's driver killed with kill -9 at several points on a real Spark standalone cluster (a cluster
and a broker of this module's own, `cluster_faults.py`) and restarted as an operator restarts it: during
start-up, mid-stream, and by an executor right after a segment commit before that micro-batch's responses
are published. The fault tests' accounting holds after each (`fault_harness.account`); the recovery times
are printed (`pytest -s`), not asserted.
"""

from __future__ import annotations

import time
from pathlib import Path

from embedded.local_kafka import LocalKafka
from sinks.storage.crash_point import CRASH_ENV, KILL_PIDFILE_ENV
from tests.integration.cluster_faults import broker, cluster_config, report
from tests.integration.fault_harness import (
    GatewayDriver,
    ResponseWatch,
    StandaloneCluster,
    _wait_for,
    account,
    send_wave,
)

__all__ = ["broker"]  # the module's fixture


def test_driver_killed_at_several_points_and_restarted(broker: LocalKafka, cluster: StandaloneCluster,
                                                       packed_env: Path, tmp_path: Path) -> None:
    config = cluster_config(tmp_path, broker, cluster, packed_env)
    pidfile = tmp_path / "driver.pid"
    # the third run: an executor kills the driver right after a segment commit, before the publish
    crashing = config.with_overrides(spark_conf={**config.spark_conf, f"spark.executorEnv.{CRASH_ENV}": "committed:1",
                                                 f"spark.executorEnv.{KILL_PIDFILE_ENV}": str(pidfile)})
    watch = ResponseWatch(config)
    recoveries: dict[str, float] = {}
    driver = GatewayDriver(config, tmp_path).start()
    try:
        # 1. during start-up: the query has started, no micro-batch has completed
        first = send_wave(config, 300, 0)
        _wait_for(lambda: "query_started" in driver.log(), "the query to start", 240)
        driver.kill()
        driver = GatewayDriver(config, tmp_path).start()
        recoveries["after_startup_kill_s"] = watch.first_since(time.monotonic())
        watch.wait_all(first, 300)

        # 2. mid-stream: some of a wave answered, the rest in flight
        second = send_wave(config, 600, 10_000)
        _wait_for(lambda: watch.answered(second) >= 100, "part of the wave to be answered", 240)
        driver.kill()  # usually with part of the wave unanswered (a micro-batch can answer all of it first)

        # 3. restarted with a crash point: an executor kills the driver right after the first segment
        # commit of the run, before that micro-batch's responses are published
        driver = GatewayDriver(crashing, tmp_path).start()
        assert driver.proc is not None
        pidfile.write_text(str(driver.proc.pid))
        third = send_wave(config, 600, 20_000)
        _wait_for(lambda: driver.proc is not None and driver.proc.poll() is not None, "the crash point", 300)
        driver = GatewayDriver(config, tmp_path).start()
        recoveries["after_commit_crash_s"] = watch.first_since(time.monotonic())
        watch.wait_all(first + second + third, 300)

        assert driver.stop() == 0, driver.log()[-3000:]
        result = account(config, first + second + third)
        report("driver kill -9 x3", **recoveries, **vars(result))
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()
