"""What every API handler of the front door reads: the nodes of its cluster, the topic registry, the
ingress bridge, the segment storage, the producer-id allocation, the group coordinator, the metrics and the
authorizer. One context serves every node's listener; which node a request came to is the request's
(`wire.Request.node_id`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from contract.limits import KAFKA_SOCKET_REQUEST_MAX_BYTES
from front_door.connection_quotas import ConnectionQuotas
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.placement import coordinator
from front_door.ingress_bridge import IngressBridge
from front_door.leadership import FIRST_NODE_ID, leader
from front_door.metrics import FrontDoorMetrics
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.authorizer import AclAuthorizer
from front_door.security.scram_credentials import ScramCredentials
from front_door.topic_ids import topic_id
from validators.topic_config import TopicRegistry

CLUSTER_ID = "ingest-gateway"
# Metadata's controller: the bootstrap node (there is no KRaft quorum; clients only display it)
CONTROLLER_ID = FIRST_NODE_ID


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int


@dataclass(frozen=True)
class Node:
    """One broker of the front door's cluster: a node id with a listener of its own, and the address
    Metadata advertises for it."""

    node_id: int
    host: str
    port: int


class AppendSignal:
    """Wakes long-polling fetches when the gateway answered a batch (any response on the response topic
    means segment storage moved). Used on the loop's thread only."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            pass


@dataclass
class Context:
    nodes: tuple[Node, ...]  # node ids 1..N, in order
    registry: Callable[[], TopicRegistry]
    bridge: IngressBridge
    segments_root: Path
    producer_ids: ProducerIdManager
    metrics: FrontDoorMetrics
    groups: GroupCoordinator
    appended: AppendSignal = field(default_factory=AppendSignal)
    max_request_bytes: int = KAFKA_SOCKET_REQUEST_MAX_BYTES  # what DescribeConfigs says of socket.request.max.bytes
    registry_file: str = "the topic registry"  # the file topic admin requests are pointed at
    credentials: ScramCredentials | None = None  # the users (None: the security topic is not readable)
    _ids: tuple[TopicRegistry | None, dict[uuid.UUID, str]] = field(default=(None, {}))
    # Kafka's ACLs (`access.py`); None: no authorizer is configured and every request is allowed, as a
    # broker without `authorizer.class.name`
    authorizer: AclAuthorizer | None = None
    quotas: ConnectionQuotas | None = None  # per-IP connection creation rates (None: no security topic)

    def leader(self, topic: str, partition: int) -> int:
        """The node id leading a partition (`leadership.py`)."""
        return leader(topic, partition, len(self.nodes))

    def coordinator(self, group_id: str) -> int:
        """The node id coordinating a group (`groups/placement.py`)."""
        return coordinator(group_id, len(self.nodes))

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - FIRST_NODE_ID]

    def topic_ids(self) -> dict[uuid.UUID, str]:
        """Topic id -> name for the registry as it is now (reloads included)."""
        registry = self.registry()
        if self._ids[0] is not registry:
            self._ids = (registry, {topic_id(name): name for name in registry.topics})
        return self._ids[1]
