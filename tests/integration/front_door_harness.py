"""A running gateway with its Kafka front door, for tests with real Kafka clients: the query on the
session's Spark and broker, the front door's nodes on free ports of loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from front_door.cluster.leadership import leader, node_ids
from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from front_door.settings import FrontDoorSettings
from kafka_cluster.registry_store import RegistryStore
from streaming.config import GatewayConfig
from streaming.query import start_gateway, stop_gracefully
from streaming.registry_sync import open_registry_store
from tests.integration.gateway_io import create_gateway_topics

HOUR_MS = 3_600_000
# the integration tests' registry, a topic with a one-hour `before` window (KIP-937) and a rolling one
FRONT_DOOR_TOPICS = {
    "defaults": {"log.message.timestamp.after.max.ms": "3600000"},
    "topics": {
        "ct": {"partitions": 2, "configs": {"message.timestamp.type": "CreateTime"}},
        "lat": {"partitions": 2, "configs": {"message.timestamp.type": "LogAppendTime"}},
        "window": {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime",
                                                "message.timestamp.before.max.ms": str(HOUR_MS)}},
        # a segment per micro-batch (segment.ms=1): fetches cross segment boundaries
        "rolling": {"partitions": 1, "configs": {"segment.ms": "1"}},
        # two partitions per node of the default four: every node leads some, clients pipeline on each
        "spread": {"partitions": 8, "configs": {"message.timestamp.type": "CreateTime"}},
    },
}
# ... and two for large batches: "large" takes batches of several MB, "capped" Kafka's default 1 MiB + 12
LARGE_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
CAPPED_MAX_MESSAGE_BYTES = 1_048_588
LARGE_TOPICS = {
    **FRONT_DOOR_TOPICS,
    "topics": {
        **FRONT_DOOR_TOPICS["topics"],
        "large": {"partitions": 2, "configs": {"max.message.bytes": str(LARGE_MAX_MESSAGE_BYTES)}},
        "capped": {"partitions": 1, "configs": {"max.message.bytes": str(CAPPED_MAX_MESSAGE_BYTES)}},
    },
}


@dataclass
class RunningDoor:
    config: GatewayConfig
    door: FrontDoor
    settings: FrontDoorSettings
    registry: RegistryStore  # the topic registry the door serves and changes

    @property
    def bootstrap(self) -> str:
        assert self.door.address is not None
        return f"{self.door.address.host}:{self.door.address.port}"

    @property
    def nodes(self) -> int:
        return self.settings.nodes

    @property
    def segments_root(self) -> Path:
        return self.config.path(self.config.segments_root)

    def node_address(self, node_id: int) -> tuple[str, int]:
        """Where node `node_id` listens."""
        bound = self.door.bound[node_id - 1]
        return bound.host, bound.port

    def leader_address(self, topic: str, partition: int) -> tuple[str, int]:
        """Where the node leading `topic`-`partition` listens (a raw request for it goes there)."""
        return self.node_address(leader(topic, partition, node_ids(self.nodes)))

    def restart(self) -> None:
        """Stop the front door (its connections drop) and start a new one on the same ports."""
        ports = tuple(b.port for b in self.door.bound)
        self.door.stop()
        self.settings = replace(self.settings, ports=ports)
        self.door = FrontDoor(self.settings, self.registry.current, FrontDoorMetrics(), topic_store=self.registry)
        self.door.start()


@contextmanager
def running_front_door(spark: SparkSession, gateway_config: GatewayConfig,
                       topics: Mapping[str, Any] = FRONT_DOOR_TOPICS, nodes: int | None = None,
                       transaction_abort_interval_ms: int | None = None) -> Iterator[RunningDoor]:
    """The gateway and its front door on the registry `topics`, with `nodes` front-door nodes (default: the
    setting's default). Groups start without Kafka's initial rebalance delay, as the tests' local broker
    (`embedded/local_kafka.py`), so the same tests hold on both."""
    topics_file = Path(gateway_config.topics_file)
    topics_file.write_text(json.dumps(topics))
    config = gateway_config.with_overrides(trigger_interval="200 milliseconds", front_door_nodes=nodes,
                                           group_initial_rebalance_delay_ms=0)
    create_gateway_topics(config)
    query, _ = start_gateway(spark, config)  # seeds the registry from the topics file
    registry = open_registry_store(config)
    settings = config.front_door_settings(listen="127.0.0.1:0")
    if transaction_abort_interval_ms is not None:  # timed-out transactions looked for that often
        settings = replace(settings, transactions=replace(settings.transactions,
                                                          abort_interval_ms=transaction_abort_interval_ms))
    door = FrontDoor(settings, registry.current, FrontDoorMetrics(), topic_store=registry)
    running = RunningDoor(config, door, settings, registry)
    try:
        door.start()
        yield running
    finally:
        running.door.stop()
        stop_gracefully(query)
        registry.close()
