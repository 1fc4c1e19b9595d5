"""Spark for the integration tests: one real local session (the project's own factory) per run."""

from __future__ import annotations

import fcntl
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.config import REPO_ROOT, GatewayConfig
from streaming.session import build_spark_session, stop_session
from tests.integration.fault_harness import StandaloneCluster


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    base = GatewayConfig(
        spark_master="local[2]", shuffle_partitions=2, ui_enabled=False,
        checkpoint_root=str(tmp_path_factory.mktemp("spark-checkpoints")),
    )
    session = build_spark_session(base, app_name="gateway-tests")
    yield session
    stop_session(session)


TEST_TOPICS = {
    "defaults": {"log.message.timestamp.after.max.ms": "3600000"},
    "topics": {
        "ct": {"partitions": 2, "configs": {"message.timestamp.type": "CreateTime"}},
        "lat": {"partitions": 2, "configs": {"message.timestamp.type": "LogAppendTime"}},
    },
}


@pytest.fixture
def gateway_config(kafka, tmp_path: Path) -> GatewayConfig:
    """A gateway of its own per test: fresh ingress/response/DLQ topics, storage and checkpoint."""
    run = uuid.uuid4().hex[:8]
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps(TEST_TOPICS))
    return GatewayConfig(
        bootstrap_servers=kafka.bootstrap_servers,
        ingress_topic=f"ingress-{run}",
        ingress_partitions=2,
        response_topic=f"responses-{run}",
        dlq_topic=f"dlq-{run}",
        groups_topic=f"groups-{run}",
        topics_file=str(topics_file),
        segments_root=str(tmp_path / "segments"),
        checkpoint_root=str(tmp_path / "checkpoints"),
        query_name=f"gateway_{run}",
        spark_master="local[2]",
        shuffle_partitions=2,
        ui_enabled=False,
    )


@pytest.fixture(scope="module")
def packed_env() -> Path:
    """`make pack`: the project's venv packed for the executors (spark.archives); one test worker packs it at a
    time (the others wait, then find it made)."""
    lock_path = REPO_ROOT / "build" / ".pack.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "pack"], cwd=REPO_ROOT, check=True, timeout=600)
    return REPO_ROOT / "build" / "gateway-env.tar.gz"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone cluster (a master and two workers) for one test module."""
    spark = StandaloneCluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield spark
    finally:
        spark.stop()
