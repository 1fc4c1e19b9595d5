"""What a front door is started with (`streaming/config.py` reads it from the gateway's config): its nodes'
addresses on each listener, the Kafka cluster behind it, the topics its state lasts in, and its security."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.topics import DEFAULT_GROUPS_TOPIC, DEFAULT_SECURITY_TOPIC
from front_door.cluster.door_cluster import DEFAULT_SESSION_TIMEOUT_MS, MAX_NODES_PER_DOOR, first_node_id
from front_door.cluster.leadership import DEFAULT_NODES, node_ids
from front_door.cluster.node import BrokerAddress, Node
from front_door.groups.coordinator_api import GroupSettings
from front_door.network.wire import DEFAULT_MAX_REQUEST_BYTES
from front_door.security.config import FrontDoorSecurity
from front_door.security.listeners import Listener, plaintext_listener
from front_door.transactions.coordinator import TransactionSettings
from kafka_cluster.security import KafkaCluster
from sinks.metrics.server import parse_address

_WILDCARDS = ("0.0.0.0", "::")


@dataclass(frozen=True)
class FrontDoorSettings:
    listen: str  # node 1's host:port (the bootstrap address); node i on port + i - 1; port 0: free ports
    advertised: str | None  # host:port clients reach node 1 at, node i at port + i - 1; None: the bound ones
    cluster: KafkaCluster  # the gateway's Kafka cluster (address and credentials)
    ingress_topic: str
    response_topic: str
    segments_root: Path
    publish_timeout_ms: int
    ingress_max_message_bytes: int
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    nodes: int = DEFAULT_NODES  # node ids 1..N, a listener each
    ports: tuple[int, ...] = ()  # each node's port instead of `listen`'s (a restart on a previous start's ports)
    # A taken port: a free one instead, with a warning (the gateway's run); False: the start fails.
    free_port_fallback: bool = False
    groups_topic: str = DEFAULT_GROUPS_TOPIC  # where committed offsets and groups last (groups/store.py)
    groups: GroupSettings = GroupSettings()
    # Several doors (`door_cluster.py`): this door's id (its node ids follow from it) and the topic where the
    # doors register; None: this door alone is the cluster
    door_id: int = 1
    doors_topic: str | None = None
    door_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    registry_file: str = "the topic registry"  # named in the refusal of topic admin requests
    security: FrontDoorSecurity = FrontDoorSecurity()  # listeners, TLS, SASL, ACLs (security/config.py)
    security_topic: str | None = DEFAULT_SECURITY_TOPIC  # where users and ACLs last; None: no users
    # where the transaction coordinator's state lasts (`transactions/store.py`); None: no transactions
    transaction_state_topic: str | None = None
    transactions: TransactionSettings = TransactionSettings()

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES_PER_DOOR:
            raise ValueError(f"front_door_nodes must be 1 to {MAX_NODES_PER_DOOR}, got {self.nodes}")
        if self.door_id < 1:
            raise ValueError(f"front_door_id must be at least 1, got {self.door_id}")
        if self.ports and len(self.ports) != self.nodes:
            raise ValueError(f"{len(self.ports)} ports for {self.nodes} front-door nodes")

    def listeners(self) -> tuple[Listener, ...]:
        """The listeners, the bootstrap one first: `security.listeners`, or PLAINTEXT on `listen`."""
        if self.security.listeners:
            return self.security.listeners
        parse_address(self.listen, "front_door_address")
        if self.advertised:
            parse_address(self.advertised, "front_door_advertised_address")
        return (plaintext_listener(self.listen, self.advertised),)

    def listen_addresses(self, listener: Listener | None = None) -> list[tuple[str, int]]:
        """(host, port) of each node on `listener` (default the first), node 1 first."""
        first = self.listeners()[0]
        listener = listener or first
        host, port = listener.host, listener.port
        if self.ports and listener == first:
            return [(host, p) for p in self.ports]
        if port and port + self.nodes - 1 > 65535:
            raise ValueError(f"listener {listener}: {self.nodes} nodes need ports up to {port + self.nodes - 1}")
        return [(host, port + i if port else 0) for i in range(self.nodes)]

    def advertised_nodes(self, bound: Sequence[BrokerAddress], listener: Listener | None = None) -> tuple[Node, ...]:
        """What Metadata says of each node to clients of `listener` (default the first): its advertised
        address with consecutive ports, or the bound address (a wildcard host replaced by this host's name)."""
        listener = listener or self.listeners()[0]
        if listener.advertised_host is not None and listener.advertised_port is not None:
            host, port = listener.advertised_host, listener.advertised_port
            return tuple(Node(n, host, port + i) for i, n in enumerate(self.node_ids()))
        return tuple(Node(n, b.host if b.host not in _WILDCARDS else socket.getfqdn(), b.port)
                     for n, b in zip(self.node_ids(), bound, strict=True))

    def node_ids(self) -> range:
        """This door's node ids (`door_cluster.first_node_id`)."""
        return node_ids(self.nodes, first_node_id(self.door_id))
