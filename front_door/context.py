"""What every API handler of the front door reads: the nodes of its cluster, the topic registry, the
ingress bridge, the segment storage, the producer-id allocation, the group coordinator, the metrics and the
authorizer. One context serves every node's listener; which node a request came to is the request's
(`wire.Request.node_id`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from contract.limits import KAFKA_SOCKET_REQUEST_MAX_BYTES
from front_door.cluster.leadership import FIRST_NODE_ID, leader
from front_door.cluster.node import Node
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.placement import coordinator, partition_for
from front_door.ingress_bridge import IngressBridge
from front_door.metrics import FrontDoorMetrics
from front_door.network.broker_configs import BrokerConfigs
from front_door.network.connection_quotas import ConnectionQuotas
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.authorizer import AclAuthorizer
from front_door.security.scram_credentials import ScramCredentials
from front_door.transactions.placement import transaction_coordinator
from storage.topic_incarnations import IncarnationView
from validators.topic_config import TopicConfig, TopicRegistry

if TYPE_CHECKING:
    from front_door.cluster.door_cluster import DoorCluster
    from front_door.network.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from front_door.transactions.coordinator import TransactionCoordinator
    from kafka_cluster.registry_store import RegistryStore

CLUSTER_ID = "ingest-gateway"
# Metadata's controller of a lone door: its first node (there is no KRaft quorum; clients only display it).
# With several doors, the lowest live node id.
CONTROLLER_ID = FIRST_NODE_ID
NO_NODE = -1  # a group whose coordination is moving between doors: no coordinator for the moment


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
    nodes: tuple[Node, ...]  # this door's nodes, in order, as advertised on this context's listener
    registry: Callable[[], TopicRegistry]
    bridge: IngressBridge
    segments_root: Path
    producer_ids: ProducerIdManager
    metrics: FrontDoorMetrics
    groups: GroupCoordinator
    appended: AppendSignal = field(default_factory=AppendSignal)
    max_request_bytes: int = KAFKA_SOCKET_REQUEST_MAX_BYTES  # what DescribeConfigs says of socket.request.max.bytes
    registry_file: str = "the topic registry"  # the file topic admin requests are pointed at
    # Where topics are created, altered and deleted (`kafka_cluster/registry_store.py`); None: the registry is read-only
    # here and topic admin requests are refused
    topic_store: RegistryStore | None = None
    credentials: ScramCredentials | None = None  # the users (None: the security topic is not readable)
    _ids: tuple[TopicRegistry | None, dict[uuid.UUID, str]] = field(default=(None, {}))
    # Kafka's ACLs (`access.py`); None: no authorizer is configured and every request is allowed, as a
    # broker without `authorizer.class.name`
    authorizer: AclAuthorizer | None = None
    quotas: ConnectionQuotas | None = None  # per-IP connection creation rates (None: no security topic)
    broker_configs: BrokerConfigs | None = None  # the static and dynamic connection caps (DescribeConfigs shows)
    # The live doors (`door_cluster.py`) and this context's listener name in their registrations; None: this
    # door alone is the cluster
    cluster: DoorCluster | None = None
    listener: str = ""
    # The transaction coordinator (`transactions/coordinator.py`); None: the transaction state topic is not
    # readable, and transactional ids are refused
    transactions: TransactionCoordinator | None = None
    # Adds a transaction version 2 producer's partitions to its transaction at whichever door coordinates it
    # (`network/add_partitions_to_txn_manager.py`); None: no transactions
    add_partitions_to_txn: AddPartitionsToTxnManager | None = None
    _own_ids: tuple[int, ...] = field(init=False, default=())
    _incarnations: IncarnationView | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._own_ids = tuple(n.node_id for n in self.nodes)

    def own_node_ids(self) -> tuple[int, ...]:
        """This door's node ids."""
        return self._own_ids

    def node_ids(self) -> Sequence[int]:
        """Every node id of the cluster, sorted."""
        return self.cluster.node_ids() if self.cluster is not None else self._own_ids

    def brokers(self) -> tuple[Node, ...]:
        """Every node of the cluster as advertised on this listener: what Metadata and DescribeCluster list."""
        if self.cluster is None:
            return self.nodes
        return tuple(sorted(self.cluster.nodes(self.listener).values(), key=lambda n: n.node_id))

    def controller_id(self) -> int:
        ids = self.node_ids()
        return ids[0] if ids else CONTROLLER_ID

    def leader(self, topic: str, partition: int) -> int:
        """The node id leading a partition (`leadership.py`)."""
        return leader(topic, partition, self.node_ids())

    def sibling_leader(self, topic: str, partition: int, node_id: int) -> int | None:
        """The node of this door that leads a partition when `node_id`, asked, does not: the partition's data
        requests there are NOT_LEADER_OR_FOLLOWER. None when `node_id` leads it or another door does: every door
        appends through the one ingress topic and reads the one segments root, and while a door joins or leaves
        the doors name leaders from views a moment apart, all in one leader epoch, so a client can stay bound to
        a door its metadata no longer names (docs/deployment.md, "Several doors")."""
        lead = self.leader(topic, partition)
        return lead if lead != node_id and lead in self._own_ids else None

    def coordinator(self, group_id: str) -> int:
        """The node id coordinating a group (`groups/placement.py`). While its coordination moves between
        doors (`door_membership.py`): this door's node when it is loading the group, NO_NODE when it handed
        the group over and has not yet adopted the new view."""
        groups = self.groups
        if groups.loading or groups.moving:
            partition = partition_for(group_id)
            if partition in groups.loading:
                return groups.loading[partition]
            if partition in groups.moving:
                return NO_NODE
        return coordinator(group_id, self.node_ids())

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node id coordinating a transactional id (`transactions/placement.py`)."""
        return transaction_coordinator(transactional_id, self.node_ids())

    def coordinator_error(self, group_id: str, node_id: int) -> ErrorCode | None:
        """None when node `node_id` coordinates the group now; else Kafka's answer to a group request sent
        there: COORDINATOR_LOAD_IN_PROGRESS while this door loads the group (the client retries here),
        NOT_COORDINATOR otherwise (it looks the coordinator up again)."""
        if self.coordinator(group_id) != node_id:
            return ErrorCode.not_coordinator
        if self.groups.loading and partition_for(group_id) in self.groups.loading:
            return ErrorCode.coordinator_load_in_progress
        return None

    def node(self, node_id: int) -> Node | None:
        """A node as advertised on this listener (None: not a live node, or one without this listener)."""
        if self.cluster is not None:
            return self.cluster.nodes(self.listener).get(node_id)
        index = node_id - self.nodes[0].node_id if self.nodes else -1
        return self.nodes[index] if 0 <= index < len(self.nodes) else None

    def stored(self, config: TopicConfig) -> bool:
        """Whether the segment storage's partitions of the topic are this incarnation's: a topic deleted and
        re-created reads as empty until the query's next micro-batch has removed the old one's partitions
        (`storage/topic_incarnations.py`)."""
        view = self._incarnations
        if view is None:
            view = self._incarnations = IncarnationView(self.segments_root)
        return view.holds(config.name, str(config.id))

    def topic_ids(self) -> dict[uuid.UUID, str]:
        """Topic id -> name for the registry as it is now (reloads included)."""
        registry = self.registry()
        if self._ids[0] is not registry:
            self._ids = (registry, {config.id: name for name, config in registry.topics.items()})
        return self._ids[1]
