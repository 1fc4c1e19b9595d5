"""What the fault tests on a standalone cluster share (test_faults.py, test_driver_restarts.py): a broker of
each module's own (one test stops and restarts it), the config of a gateway on the cluster, the report line.
A test module imports `broker` to use it as its fixture."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.local_kafka import LocalKafka
from streaming.config import GatewayConfig
from tests.integration.conftest import TEST_TOPICS
from tests.integration.fault_harness import StandaloneCluster
from tests.integration.gateway_io import create_gateway_topics

EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of the module's own: one test stops and restarts it."""
    kafka = LocalKafka(tmp_path_factory.mktemp("fault-kafka")).start()
    try:
        yield kafka
    finally:
        kafka.stop()


def cluster_config(tmp_path: Path, broker: LocalKafka, cluster: StandaloneCluster, packed_env: Path,
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


def report(name: str, **figures: object) -> None:
    print(f"\n[fault] {name}: " + ", ".join(f"{k}={round(v, 1) if isinstance(v, float) else v}"
                                            for k, v in figures.items()))


