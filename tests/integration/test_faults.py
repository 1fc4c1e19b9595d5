"""Fault tests with real processes and real signals, on a real Spark standalone cluster
started here (a master and two workers through `spark-class`, small memory; executors run the packed
Python environment of `make pack`) with a broker of its own: the gateway's driver started as an
operator starts it, mixed good and bad traffic, faults injected mid-stream, then the accounting of
`fault_harness.account` — every batch answered with identical responses, accepted batches stored
exactly once on disjoint, contiguous offsets, every rejection dead-lettered, `segments verify` clean.

Recovery times (fault or restart → first response to traffic sent after it) and duplicate responses
are printed (`pytest -s`): reported, not asserted.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.local_kafka import LocalKafka
from storage.crash_point import CRASH_ENV, KILL_PIDFILE_ENV
from streaming.config import GatewayConfig
from tests.integration.conftest import TEST_TOPICS
from tests.integration.fault_harness import (
    NOW_MS,
    GatewayDriver,
    ResponseWatch,
    StandaloneCluster,
    _wait_for,
    account,
    send_wave,
)
from tests.integration.gateway_io import create_gateway_topics, produce_batches
from tests.integration.standby_harness import standby_configs, standby_failover
from validators.codec.record_batch import build_record_batch

EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of this module's own: one test stops and restarts it."""
    kafka = LocalKafka(tmp_path_factory.mktemp("fault-kafka")).start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _config(tmp_path: Path, broker: LocalKafka, cluster: StandaloneCluster, packed_env: Path,
            **overrides: object) -> GatewayConfig:
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps(TEST_TOPICS))
    run = re.sub(r"\W", "_", tmp_path.name)[-16:]
    settings: dict[str, object] = dict(
        bootstrap_servers=broker.bootstrap_servers, ingress_topic=f"ingress-{run}", ingress_partitions=2,
        response_topic=f"responses-{run}", dlq_topic=f"dlq-{run}", topics_file=str(topics_file),
        segments_root=str(tmp_path / "segments"), checkpoint_root=str(tmp_path / "checkpoints"),
        query_name=f"gateway_{run}", shuffle_partitions=2, ui_enabled=False, metrics_address="127.0.0.1:0",
        spark_master=cluster.master_url, python_archive=str(packed_env), spark_conf=dict(EXECUTORS),
        restart_backoff_initial_s=0.5, restart_backoff_max_s=4.0,
    )
    settings.update(overrides)
    settings["spark_conf"] = {**settings["spark_conf"], **cluster.executor_conf}  # type: ignore[dict-item]
    config = GatewayConfig(**settings)  # type: ignore[arg-type]
    create_gateway_topics(config)  # the driver creates them too; the response watch subscribes first
    return config


def _report(name: str, **figures: object) -> None:
    print(f"\n[fault] {name}: " + ", ".join(f"{k}={round(v, 1) if isinstance(v, float) else v}"
                                            for k, v in figures.items()))


def _broker_unreachable(log: str) -> int:
    """Lines of the driver's log (librdkafka's and the Java client's) about a broker it cannot reach."""
    return len(re.findall(r"Connection refused|could not be established|Broker may not be available", log))


def _restarts(log: str) -> int:
    return len(re.findall(r"gateway.supervisor query failed \(", log))


def test_executor_and_worker_killed_mid_stream(broker: LocalKafka, cluster: StandaloneCluster, packed_env: Path,
                                               tmp_path: Path) -> None:
    config = _config(tmp_path, broker, cluster, packed_env)
    watch = ResponseWatch(config)
    driver = GatewayDriver(config, tmp_path).start()
    try:
        started = time.monotonic()
        first = send_wave(config, 300, 0)
        watch.wait_all(first, 300)  # the first start on a cluster: executors, packed env, JVM warm-up
        startup = watch.first_after(first) - started
        assert "is shared with the executors" in driver.log()

        executors = cluster.executor_pids()
        assert len(executors) == 2, executors
        second = send_wave(config, 600, 10_000)
        os.kill(executors[0], 9)  # mid-stream: its tasks fail and are retried on the other executor
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
        _report("executor and worker kill -9", first_response_after_start_s=startup,
                executor_kill_to_response_s=after_executor, worker_kill_to_response_s=after_worker, **vars(result))
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()
        cluster.start_worker(0)  # the next tests get two workers again


def test_driver_killed_at_several_points_and_restarted(broker: LocalKafka, cluster: StandaloneCluster,
                                                       packed_env: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, broker, cluster, packed_env)
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
        _wait_for(lambda: driver.logged("query_started"), "the query to start", 240)
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
        _report("driver kill -9 x3", **recoveries, **vars(result))
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()


WIDE_PARTITIONS = 1000


def _wide_traffic(n: int, seed: int) -> list[tuple[str, int, bytes]]:
    """Batches spread round-robin over `WIDE_PARTITIONS` partitions of topic `wide`; every 7th too far in the
    future (INVALID_TIMESTAMP)."""
    out = []
    for i in range(seed, seed + n):
        ts = NOW_MS + (3 * 3_600_000 if i % 7 == 0 else 0) + i
        out.append(("wide", i % WIDE_PARTITIONS, build_record_batch([(ts, f"k{i}".encode(), f"v{i}".encode() * 3)])))
    return out


def test_driver_killed_with_a_thousand_partitions_per_micro_batch(
    broker: LocalKafka, cluster: StandaloneCluster, packed_env: Path, tmp_path: Path
) -> None:
    """Micro-batches spread over 1 000 target partitions (hundreds per task: the group commit, the bounded open
    partitions): the driver killed mid-stream, then right after a group commit and before its publish; every
    batch answered, stored exactly once, every rejection dead-lettered."""
    config = _config(tmp_path, broker, cluster, packed_env)
    topics = {**TEST_TOPICS, "topics": {**TEST_TOPICS["topics"],  # type: ignore[dict-item]
                                        "wide": {"partitions": WIDE_PARTITIONS,
                                                 "configs": {"message.timestamp.type": "CreateTime"}}}}
    config.path(config.topics_file).write_text(json.dumps(topics))
    pidfile = tmp_path / "driver.pid"
    crashing = config.with_overrides(spark_conf={**config.spark_conf, f"spark.executorEnv.{CRASH_ENV}": "committed:1",
                                                 f"spark.executorEnv.{KILL_PIDFILE_ENV}": str(pidfile)})
    watch = ResponseWatch(config)
    recoveries: dict[str, float] = {}
    driver = GatewayDriver(config, tmp_path).start()
    try:
        first = produce_batches(config, _wide_traffic(3000, 0))
        _wait_for(lambda: watch.answered(first) >= 500, "part of the wave to be answered", 300)
        driver.kill()  # mid-stream
        driver = GatewayDriver(crashing, tmp_path).start()
        assert driver.proc is not None
        pidfile.write_text(str(driver.proc.pid))
        second = produce_batches(config, _wide_traffic(3000, 3000))
        _wait_for(lambda: driver.proc is not None and driver.proc.poll() is not None, "the crash point", 300)
        driver = GatewayDriver(config, tmp_path).start()
        recoveries["after_group_commit_crash_s"] = watch.first_since(time.monotonic())
        watch.wait_all(first + second, 300)
        assert driver.stop() == 0, driver.log()[-3000:]
        result = account(config, first + second)
        assert result.appended > 0 and result.rejected > 0
        touched = {p.name for p in config.path(config.segments_root).iterdir() if p.name.startswith("wide-")}
        assert len(touched) == WIDE_PARTITIONS
        _report("driver kill -9 x2, 1 000 partitions", **recoveries, **vars(result))
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()


def test_standby_driver_takes_over_a_killed_active_one(broker: LocalKafka, cluster: StandaloneCluster,
                                                       packed_env: Path, tmp_path: Path) -> None:
    """A `--standby` driver with its own application and executors (one core each) takes over."""
    config = _config(tmp_path, broker, cluster, packed_env, spark_conf={**EXECUTORS, "spark.cores.max": "1"})
    active, standby = standby_configs(config, tmp_path)
    _report("standby failover (standalone cluster)", **standby_failover(active, standby, tmp_path))


def test_supervisor_rides_out_unusable_storage_and_a_broker_restart(broker: LocalKafka, cluster: StandaloneCluster,
                                                                    packed_env: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, broker, cluster, packed_env, publish_timeout_ms=5000)
    watch = ResponseWatch(config)
    driver = GatewayDriver(config, tmp_path).start()
    root = config.path(config.segments_root)
    try:
        first = send_wave(config, 200, 0)
        watch.wait_all(first, 300)

        # The segments root unusable (a file where the directory was: even root cannot write under it).
        aside = root.with_name("segments-aside")
        root.rename(aside)
        root.write_text("not a directory\n")
        second = send_wave(config, 300, 10_000)
        _wait_for(lambda: "query failed (storage_io)" in driver.log(), "the supervisor to see the storage fault", 300)
        root.unlink()
        aside.rename(root)
        repaired = time.monotonic()
        watch.wait_all(second, 300)
        after_storage = watch.first_after(second) - repaired
        restarts_storage = _restarts(driver.log())

        # The broker stopped mid-stream until the gateway has noticed (its Kafka clients log the refused
        # connections), then started again: the query rides it out or the supervisor restarts it.
        third = send_wave(config, 300, 20_000)
        noticed = _broker_unreachable(driver.log())
        broker.stop()
        _wait_for(lambda: _broker_unreachable(driver.log()) > noticed, "the gateway to notice the outage", 300)
        broker.start()
        back = time.monotonic()
        watch.wait_all(third, 300)
        after_broker = watch.first_after(third) - back

        log = driver.log()
        assert driver.stop() == 0, log[-3000:]
        result = account(config, first + second + third)
        _report("storage unusable, broker restart", storage_repair_to_response_s=after_storage,
                broker_start_to_response_s=after_broker, restarts=_restarts(log), **vars(result))
        assert restarts_storage >= 1
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()
