"""Gateway-wide settings (conf/gateway.json); the topic registry lives in conf/topics.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from contract.topics import DEFAULT_DLQ_TOPIC, DEFAULT_INGRESS_TOPIC, DEFAULT_RESPONSE_TOPIC

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "conf" / "gateway.json"


@dataclass(frozen=True)
class GatewayConfig:
    bootstrap_servers: str | None = None  # None: start a local broker
    local_broker_port: int = 9092
    local_broker_dir: str = "var/kafka"
    ingress_topic: str = DEFAULT_INGRESS_TOPIC
    ingress_partitions: int = 3
    # Larger than any target topic's max.message.bytes, so an oversized batch reaches the
    # gateway and is rejected there with MESSAGE_TOO_LARGE rather than by the ingress broker.
    ingress_max_message_bytes: int = 16 * 1024 * 1024
    response_topic: str = DEFAULT_RESPONSE_TOPIC
    dlq_topic: str = DEFAULT_DLQ_TOPIC
    topics_file: str = "conf/topics.json"
    segments_root: str = "var/segments"
    checkpoint_root: str = "checkpoints"
    query_name: str = "gateway"
    spark_master: str = "local[*]"
    # Tasks of the stateful stage (and of the sink: the same tasks). One per executor core: each task has
    # a fixed cost per micro-batch (a state store, two Python workers), so more tasks than cores only add
    # latency. Fixed by the checkpoint once a query has run (Spark keeps its state partitioning).
    shuffle_partitions: int = 2
    trigger_interval: str = "1 second"
    max_offsets_per_trigger: int = 20000
    metrics_address: str = "127.0.0.1:9108"
    # Kafka's log.retention.check.interval.ms: how often retention runs over the segment storage (reference §5.6)
    retention_check_interval_ms: int = 300000
    ui_enabled: bool = True

    def path(self, value: str) -> Path:
        """Relative paths in the config are relative to the repository root."""
        p = Path(value)
        return p if p.is_absolute() else REPO_ROOT / p

    @property
    def checkpoint_location(self) -> Path:
        return self.path(self.checkpoint_root) / self.query_name

    def with_overrides(self, **overrides: Any) -> GatewayConfig:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def load_gateway_config(path: str | Path = DEFAULT_CONFIG, **overrides: Any) -> GatewayConfig:
    doc = json.loads(Path(path).read_text())
    known = {f.name for f in fields(GatewayConfig)}
    unknown = set(doc) - known
    if unknown:
        raise ValueError(f"Unknown gateway settings in {path}: {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    return GatewayConfig(**doc).with_overrides(**overrides)
