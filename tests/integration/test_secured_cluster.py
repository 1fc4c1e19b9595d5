"""The gateway as an operator deploys it against a secured Kafka cluster (SASL_SSL, SCRAM-SHA-512, ACLs): the
driver as `gateway run` on a real Spark standalone cluster (executors run the packed environment), `gateway
status` and `gateway dlq` as commands, and a `--standby` driver taking over a killed one. The fault tests'
accounting holds; and the gateway's password appears nowhere it could be read: the drivers' logs, the status
and dead-letter commands' output, the metrics, Spark's UI (plans and environment) and event log, the
checkpoint, the segments, the cluster's executor logs, the packed environment."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest

from streaming.config import REPO_ROOT
from tests.integration.fault_harness import (
    GatewayDriver,
    ResponseWatch,
    StandaloneCluster,
    account,
    send_wave,
)
from tests.integration.ports import free_port, free_ports
from tests.integration.secured_gateway import grant_listed, secured_config
from tests.integration.standby_harness import standby_configs, standby_failover
from tests.secured_kafka import GATEWAY, SecuredKafka

pytestmark = pytest.mark.integration

EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8", "replace")


def _command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streaming", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)


def _files(*roots: Path, skip: Iterable[Path] = ()) -> Iterable[Path]:
    skipped = set(skip)
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and path not in skipped:
                yield path


def test_standalone_cluster_over_sasl_ssl_and_the_password_nowhere(
        secured_kafka: SecuredKafka, cluster: StandaloneCluster, packed_env: Path, tmp_path: Path) -> None:
    work, events = tmp_path / "gateway", tmp_path / "event-log"
    events.mkdir()
    ui_port = free_port()
    config = secured_config(
        secured_kafka, work, spark_master=cluster.master_url, python_archive=str(packed_env), ui_enabled=True,
        metrics_address=f"127.0.0.1:{free_port()}", front_door_address=f"127.0.0.1:{free_ports(4)}",
        spark_conf={**EXECUTORS, **cluster.executor_conf, "spark.ui.port": str(ui_port),
                    "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
                    "spark.eventLog.compress": "false"})  # plain text, so the search below reads every byte
    grant_listed(secured_kafka, config)
    watch = ResponseWatch(config)
    driver = GatewayDriver(config, tmp_path).start()
    try:
        sent = send_wave(config, 200, 0)
        watch.wait_all(sent, 400)
        status = _command("status", "--config", str(driver.config_path))
        letters = _command("dlq", "list", "--config", str(driver.config_path), "--topic", config.dlq_topic)
        metrics = _get(f"http://{config.metrics_address}/metrics")
        ui = f"http://127.0.0.1:{ui_port}/api/v1/applications"
        app = json.loads(_get(ui))[0]["id"]
        plans = _get(f"{ui}/{app}/sql?details=true&planDescription=true")
        environment = _get(f"{ui}/{app}/environment")
        assert driver.stop() == 0, driver.log()[-3000:]
    finally:
        watch.stop()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.kill()
    result = account(config, sent)
    assert result.appended > 0 and result.rejected > 0
    # its recent errors come from the response topic, read over SASL_SSL
    # (the wave is answered in one micro-batch, so which rejections are the newest ten is a tie: either kind)
    assert status.returncode == 0 and re.search(r"(UNKNOWN_TOPIC_OR_PARTITION \(3\)|INVALID_TIMESTAMP \(32\))  request",
                                                status.stdout), status.stdout + status.stderr
    assert letters.returncode == 0 and "INVALID_TIMESTAMP" in letters.stdout, letters.stdout + letters.stderr
    assert "gateway_batches_total" in metrics
    assert config.query_name in plans and "spark.master" in environment
    assert "Kafka cluster" in driver.log() and "SCRAM-SHA-512 as gateway" in driver.log()

    password = secured_kafka.passwords[GATEWAY]
    texts = {"driver log": driver.log(), "status": status.stdout + status.stderr,
             "dlq list": letters.stdout + letters.stderr, "metrics": metrics, "UI plans": plans,
             "UI environment": environment}
    assert [name for name, text in texts.items() if password in text] == []
    files = list(_files(events, work, cluster.work_dir, skip=[work / "gateway.password"]))
    assert any(config.query_name.encode() in p.read_bytes() for p in _files(events))  # the search reads text
    assert [str(p) for p in files if password.encode() in p.read_bytes()] == []
    with gzip.open(packed_env) as packed:  # the packed environment, as the executors get it
        assert password.encode() not in packed.read()


def test_standby_takes_over_on_a_secured_cluster(secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    config = secured_config(secured_kafka, tmp_path / "gateway", spark_master="local[2]")
    active, standby = standby_configs(config, tmp_path)
    grant_listed(secured_kafka, active)
    figures = standby_failover(active, standby, tmp_path)
    assert figures["door_records"] > 0
    password = secured_kafka.passwords[GATEWAY]
    for name in ("active", "standby"):
        assert password not in (tmp_path / f"{name}.log").read_text(errors="replace")
