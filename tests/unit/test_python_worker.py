"""What a Spark Python worker of the query imports when it takes up its task: the functions are pickled by
reference to their modules (`streaming/python_worker.py`), so each worker imports only what its side needs.
The sink's worker does not import pandas (~45 MiB and ~0.35 s of CPU at every worker's start); the stage's does
not import the storage or the Kafka client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pyspark import cloudpickle

from kafka_cluster.security import KafkaCluster
from sinks.micro_batch import SinkTask
from sinks.partition_task import SinkConfig
from sinks.registry_watcher import RegistryWatcher
from streaming.python_worker import prepare_worker
from streaming.stage import stage_function

REPO = Path(__file__).resolve().parents[2]
# as a worker forked from Spark's daemon: pyspark.worker imported, then the task's function unpickled
_WORKER = """
import json, pickle, sys
import pyspark.worker
pickle.loads(sys.stdin.buffer.read())
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after_unpickling(function: object) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _WORKER], input=cloudpickle.dumps(function), cwd=REPO,
                         capture_output=True, timeout=120, check=True)
    return set(json.loads(out.stdout))


def test_the_sinks_worker_does_not_import_pandas(tmp_path: Path) -> None:
    task = SinkTask(SinkConfig(KafkaCluster("127.0.0.1:1"), tmp_path, "ingress", "responses", "dlq", 1 << 20),
                    RegistryWatcher(REPO / "conf" / "topics.json"), prepare_worker)
    modules = _modules_after_unpickling(task)
    assert "sinks.partition_task" in modules and "streaming.python_worker" in modules
    assert "pandas" not in modules and "streaming.stage" not in modules


def test_the_stages_worker_does_not_import_the_storage_or_the_kafka_client() -> None:
    modules = _modules_after_unpickling(stage_function(RegistryWatcher(REPO / "conf" / "topics.json")))
    assert "streaming.stage" in modules and "pandas" in modules
    assert not {m for m in modules if m.split(".")[0] in ("storage", "confluent_kafka", "kafka_cluster")}
    assert "sinks.partition_task" not in modules and "sinks.micro_batch" not in modules
