"""Fault tests with real processes and real signals (issue 12): the gateway's driver started as an
operator starts it, mixed good and bad traffic, faults injected mid-stream, then the accounting of
`fault_harness.account` — every batch answered with identical responses, accepted batches stored
exactly once on contiguous offsets, every rejection dead-lettered, storage verified.

- On a real Spark standalone cluster (a master and two workers through `spark-class`, the packed
  Python environment of `make pack`): kill -9 an executor, then a whole worker, mid-stream.
- On the embedded default (`local[2,4]`) with its own broker: the segments root unusable for a while,
  then the broker stopped and started again — the supervisor must bring the query back by itself.

Recovery times (fault → first response to traffic sent after it) and duplicate responses are printed
(`pytest -s`); they are reported, not asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from embedded.local_kafka import LocalKafka
from streaming.config import REPO_ROOT, GatewayConfig
from tests.integration.conftest import TEST_TOPICS
from tests.integration.fault_harness import (
    GatewayDriver,
    ResponseWatch,
    StandaloneCluster,
    _wait_for,
    account,
    executor_pids,
    send_wave,
)
from tests.integration.gateway_io import create_gateway_topics


@pytest.fixture(scope="module")
def packed_env() -> Path:
    """`make pack`: the project's venv packed for the executors (spark.archives)."""
    subprocess.run(["make", "-s", "pack"], cwd=REPO_ROOT, check=True, timeout=600)
    return REPO_ROOT / "build" / "gateway-env.tar.gz"


def _config(tmp_path: Path, bootstrap_servers: str, **overrides: object) -> GatewayConfig:
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps(TEST_TOPICS))
    run = tmp_path.name[-12:].replace("-", "_")
    return GatewayConfig(
        bootstrap_servers=bootstrap_servers, ingress_topic=f"ingress-{run}", ingress_partitions=2,
        response_topic=f"responses-{run}", dlq_topic=f"dlq-{run}", topics_file=str(topics_file),
        segments_root=str(tmp_path / "segments"), checkpoint_root=str(tmp_path / "checkpoints"),
        query_name=f"gateway_{run}", shuffle_partitions=2, ui_enabled=False, metrics_address="127.0.0.1:0",
        restart_backoff_initial_s=0.5, restart_backoff_max_s=4.0, **overrides,  # type: ignore[arg-type]
    )


def _report(name: str, **figures: object) -> None:
    print(f"\n[fault] {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def test_standalone_cluster_survives_executor_and_worker_kills(kafka: LocalKafka, tmp_path: Path,
                                                               packed_env: Path) -> None:
    (tmp_path / "cluster").mkdir()
    cluster = StandaloneCluster(tmp_path / "cluster").start()
    config = _config(
        tmp_path, kafka.bootstrap_servers, spark_master=cluster.master_url, python_archive=str(packed_env),
        spark_conf={"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"},
    )
    create_gateway_topics(config)  # the driver creates them too; the watch subscribes before it runs
    driver = GatewayDriver(config, tmp_path).start()
    watch = ResponseWatch(config)
    try:
        started = time.monotonic()
        first = send_wave(config, 300, 0)
        watch.wait_all(first, 300)  # the first start on a cluster: executors, packed env, JVM warm-up
        startup = watch.first_after(first) - started
        assert "is shared with the executors" in driver.log()

        executors = executor_pids()
        assert len(executors) == 2, executors
        second = send_wave(config, 600, 10_000)
        os.kill(executors[0], 9)  # mid-stream: its tasks fail and are retried elsewhere
        killed = time.monotonic()
        watch.wait_all(second, 300)
        after_executor = watch.first_after(second) - killed

        third = send_wave(config, 600, 20_000)
        cluster.kill_worker(0)  # the worker and its executor
        killed = time.monotonic()
        watch.wait_all(third, 300)
        after_worker = watch.first_after(third) - killed

        assert driver.stop() == 0, driver.log()[-3000:]
        result = account(config, first + second + third)
        _report("standalone cluster", startup_s=round(startup, 1), executor_kill_to_response_s=round(after_executor, 1),
                worker_kill_to_response_s=round(after_worker, 1), **vars(result))
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.stop()
        cluster.stop()


def _restarts(log: str) -> int:
    return len(re.findall(r"gateway.supervisor query failed \(", log))


def test_supervisor_brings_the_query_back_after_storage_and_broker_faults(tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path / "kafka").start()  # its own broker: this test stops and restarts it
    config = _config(tmp_path, broker.bootstrap_servers, spark_master="local[2,4]", publish_timeout_ms=5000)
    create_gateway_topics(config)  # the driver creates them too; the watch subscribes before it runs
    driver = GatewayDriver(config, tmp_path).start()
    watch = ResponseWatch(config)
    root = config.path(config.segments_root)
    try:
        first = send_wave(config, 200, 0)
        watch.wait_all(first, 240)

        # The segments root unusable (a file where the directory was: even root cannot write under it).
        aside = root.with_name("segments-aside")
        root.rename(aside)
        root.write_text("not a directory\n")
        second = send_wave(config, 300, 10_000)
        _wait_for(lambda: "query failed (storage_io)" in driver.log(), "the supervisor to see the storage fault", 240)
        root.unlink()
        aside.rename(root)
        repaired = time.monotonic()
        watch.wait_all(second, 240)
        after_storage = watch.first_after(second) - repaired
        restarts_storage = _restarts(driver.log())

        # The broker stopped mid-stream until the query has failed, then started again.
        third = send_wave(config, 300, 20_000)
        broker.stop()
        _wait_for(lambda: _restarts(driver.log()) > restarts_storage, "the query to fail without its broker", 300)
        broker.start()
        back = time.monotonic()
        watch.wait_all(third, 300)
        after_broker = watch.first_after(third) - back

        log = driver.log()
        assert driver.stop() == 0, log[-3000:]
        result = account(config, first + second + third)
        _report("supervisor", storage_repair_to_response_s=round(after_storage, 1),
                broker_start_to_response_s=round(after_broker, 1), restarts=_restarts(log), **vars(result))
        assert restarts_storage >= 1 and _restarts(log) > restarts_storage
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.stop()
        broker.stop()
