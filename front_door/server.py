"""The front door's listener: an asyncio server on its own thread in the gateway's driver.

Per connection, requests are read in order and each is handled as its own task, so a client's pipelined
produce requests (librdkafka and the Java client keep up to 5 in flight) all wait for the gateway at the
same time; responses are written in request order, as Kafka guarantees. A produce request hands its
batches to the ingress topic before the next request is read, so a partition's batches keep their order.

A connection that sends something unreadable (a bad size, an unknown API or version, bytes that do not
parse) is closed, as a Kafka broker closes it; nothing else is affected. A handler that fails closes only
its own connection.

The front door is a cluster of `nodes` brokers (`leadership.py` says why): node i has a listener of its
own — node 1 on `listen` (the bootstrap address), node i on its port + i - 1, or each on a free port when
that port is 0 — and every connection knows the node it was accepted on. All listeners share the loop,
the ingress bridge and the context: a node is an address and a set of partitions it leads, not a process.
Several doors with one `doors_topic` are one cluster (`door_cluster.py`, `door_membership.py`): each has its
own node ids, and leadership and group coordination spread over every live door's nodes.

Every node has a port on every listener (`security/listeners.py`, Kafka's `listeners`): PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL. Each port has an `acceptor.py`, which applies the connection quotas before a TLS
handshake or a read; TLS is asyncio's (`security/tls.py`); an SSL client certificate's subject is the
connection's principal (`security/ssl_principal.py`). A SASL listener's connection is read frame by frame by
`_authenticate` (`security/sasl_server.py`) until it has logged in; only then are its requests handled, each
carrying its principal, which Kafka's ACLs check (`access.py`, `security/authorizer.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop
from kio.index import schema_name_map
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from contract.topics import DEFAULT_GROUPS_TOPIC, DEFAULT_SECURITY_TOPIC
from front_door.api_keys import ApiKey
from front_door.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    unsupported,
)
from front_door.apis.api_versions import ADVERTISED
from front_door.cluster.door_cluster import (
    DEFAULT_SESSION_TIMEOUT_MS,
    MAX_NODES_PER_DOOR,
    DoorCluster,
    first_node_id,
)
from front_door.cluster.kafka_security_store import KafkaSecurityStore
from front_door.cluster.leadership import DEFAULT_NODES, node_ids
from front_door.cluster.node import BrokerAddress, Node
from front_door.cluster.security_store import QUOTA_KIND, SecurityStoreError
from front_door.context import AppendSignal, Context
from front_door.door_membership import DoorMembership
from front_door.groups.coordinator import GroupCoordinator, GroupSettings
from front_door.groups.placement import partition_for
from front_door.groups.store import GroupStoreError, KafkaGroupStore
from front_door.ingress_bridge import IngressBridge
from front_door.metrics import FrontDoorMetrics
from front_door.network.acceptor import Acceptor, bind
from front_door.network.broker_configs import BrokerConfigs
from front_door.network.connection_limits import ConnectionLimitError, ConnectionsPerIp, NameLookups
from front_door.network.connection_quotas import ConnectionQuotas
from front_door.network.connection_slots import ConnectionSlots
from front_door.network.in_flight import InFlightBytes
from front_door.network.principal import ANONYMOUS, KafkaPrincipal, user
from front_door.network.wire import (
    DEFAULT_MAX_REQUEST_BYTES,
    SIZE,
    BadRequestError,
    CloseConnection,
    Request,
    UnsupportedApiError,
    encode_response,
    frame_size,
    parse_request,
)
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.acl_apis import ACL_HANDLERS
from front_door.security.audit import OncePerWindow
from front_door.security.authorizer import AclAuthorizer
from front_door.security.config import FrontDoorSecurity
from front_door.security.listeners import Listener, plaintext_listener
from front_door.security.sasl_server import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslConnection,
    SaslState,
)
from front_door.security.scram_credentials import ScramCredentials
from front_door.security.ssl_principal import PrincipalMappingError, distinguished_name, principal_name
from front_door.stopping import StopBounds, async_step, blocking_step
from front_door.transactions.coordinator import TransactionCoordinator, TransactionSettings
from front_door.transactions.startup import start_transactions
from sinks.kafka_security import KafkaCluster, SecurityProtocol
from sinks.metrics.server import parse_address
from sinks.registry_store import RegistryStore
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.front_door")

Handler = Callable[[Context, Request], Awaitable[Any]]
HANDLERS: dict[int, Handler] = {
    **dict.fromkeys(unsupported.REFUSED_APIS, unsupported.handle),
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
    ApiKey.END_TXN: end_txn.handle,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers.handle,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
    ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.JOIN_GROUP: join_group.handle,
    ApiKey.SYNC_GROUP: sync_group.handle,
    ApiKey.HEARTBEAT: heartbeat.handle,
    ApiKey.LEAVE_GROUP: leave_group.handle,
    ApiKey.OFFSET_COMMIT: offset_commit.handle,
    ApiKey.OFFSET_FETCH: offset_fetch.handle,
    ApiKey.LIST_GROUPS: list_groups.handle,
    ApiKey.DESCRIBE_GROUPS: describe_groups.handle,
    ApiKey.DELETE_GROUPS: delete_groups.handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    ApiKey.CREATE_TOPICS: create_topics.create_topics,
    ApiKey.DELETE_TOPICS: delete_topics.delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions.create_partitions,
    ApiKey.SASL_HANDSHAKE: sasl_handshake.handle,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate.handle,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas.handle,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas.handle,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs.handle,
    ApiKey.ALTER_CONFIGS: alter_configs.handle,
    ApiKey.DELETE_RECORDS: delete_records.handle,
    ApiKey.OFFSET_DELETE: offset_delete.handle,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions.handle,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials.handle,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials.handle,
    **ACL_HANDLERS,
}
# Read on a SASL listener before the connection is authenticated (SaslServerAuthenticator); anything else
# closes the connection unanswered.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def _kio_versions(name: str) -> tuple[int, int]:
    versions = sorted(schema_name_map[name])
    return versions[0], versions[-1]


# What is read: the advertised APIs, and the refused ones in every version kio knows (to answer them).
READABLE: dict[int, tuple[int, int]] = {
    **{key: _kio_versions(name) for key, name in unsupported.REFUSED_APIS.items()},
    **ADVERTISED,
}
# Requests a connection may have in flight before the front door stops reading from it; their bytes are
# bounded too, by max_request_bytes per connection (front_door/network/in_flight.py). A produce is answered after a
# micro-batch (~0.2-1 s), so a client pipelining small requests (librdkafka, linger 5 ms) has hundreds in
# flight: capped at 100, 2 000 records/s over 4 partitions were 32-78 % delivered while sent, at 1 000 78-98 %.
MAX_IN_FLIGHT_PER_CONNECTION = 1000
# Kafka's sasl.server.max.receive.size: the largest frame read before a connection is authenticated
SASL_MAX_RECEIVE_BYTES = 524288
# KIP-368: a SaslHandshake on an authenticated connection begins a re-authentication, at most once a second
# (KafkaChannel.maybeBeginServerReauthentication; more often it is answered as KafkaApis answers it)
REAUTHENTICATION_START = ApiKey.SASL_HANDSHAKE.to_bytes(2, "big")
MIN_REAUTH_INTERVAL_S = 1.0


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, "unknown") if api_key in READABLE else "unknown"


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


class FrontDoor:
    """`start()` binds and returns the address clients use; `stop()` closes every connection and the door's
    Kafka clients, each step bounded by `stop_bounds` (`stopping.py`)."""

    def __init__(self, settings: FrontDoorSettings, registry: Callable[[], TopicRegistry],
                 metrics: FrontDoorMetrics, topic_store: RegistryStore | None = None) -> None:
        self.settings = settings
        self._registry = registry
        self._topic_store = topic_store  # None: topics are read-only on this door
        self._on_stop: list[Callable[[], None]] = []
        self.metrics = metrics
        # libuv's loop (uvloop): its TLS and socket transports are native code, where asyncio's are Python
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="front-door", daemon=True)
        self._acceptors: list[Acceptor] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.context: Context | None = None
        self._bridge: IngressBridge | None = None
        self._group_store: KafkaGroupStore | None = None
        self._transactions: TransactionCoordinator | None = None
        self._security_store: KafkaSecurityStore | None = None
        self._membership: DoorMembership | None = None
        self._failed_logins = OncePerWindow()  # by (client host, mechanism)
        self._rejected_connections = OncePerWindow()  # by client address
        self._closes = OncePerWindow()  # connections closed for what they sent, by (client host, listener, why)
        # open connections by client address, across the listeners (max.connections.per.ip)
        connections = settings.security.connections
        self._per_ip = ConnectionsPerIp(connections.max_connections_per_ip,
                                        dict(connections.max_connections_per_ip_overrides))
        # open connections and their creation rates, for the door and by listener (max.connections*)
        self._slots = ConnectionSlots(connections.slots)
        self._quotas = ConnectionQuotas()  # per-IP connection creation rates, from the security store at start
        self._broker_configs: BrokerConfigs | None = None  # the dynamic connection caps, once started
        # the overrides' host names, looked up off the loop; each lookup's end applies the caps again
        self._names = NameLookups(on_resolved=self._reconfigure_connections)
        self._contexts: dict[str, Context] = {}  # by listener name: each with its listener's node addresses
        self.address: BrokerAddress | None = None  # node 1 as advertised: what clients bootstrap from
        self.bound: tuple[BrokerAddress, ...] = ()  # each node's address on the first listener, node 1 first
        self.listener_addresses: dict[str, tuple[BrokerAddress, ...]] = {}  # each listener's, node 1 first
        self.stop_bounds = StopBounds()

    def start(self) -> BrokerAddress:
        """Binds every node's listener and returns node 1's bound address."""
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=120)
        except BaseException:
            self.stop()
            raise

    async def _start(self) -> BrokerAddress:
        s = self.settings
        listeners = s.listeners()
        appended = AppendSignal()
        self._bridge = bridge = IngressBridge(
            s.cluster, s.ingress_topic, s.response_topic, publish_timeout_ms=s.publish_timeout_ms,
            max_message_bytes=s.ingress_max_message_bytes, on_response=appended.notify,
            on_phases=self.metrics.produce_phases)
        # Bound first (a taken port fails before anything else starts), served once the bridge is up.
        bound: dict[str, list[Acceptor]] = {}
        for listener in listeners:
            tls = s.security.tls.listener_context(listener) if listener.protocol.tls and s.security.tls else None
            for node_id, (host, port) in zip(s.node_ids(), s.listen_addresses(listener), strict=True):
                acceptor = self._bind(listener, tls, node_id, host, port)
                bound.setdefault(listener.name, []).append(acceptor)
                self._acceptors.append(acceptor)
        await asyncio.to_thread(bridge.start, self._loop)
        advertised = {}
        for listener in listeners:
            addresses = tuple(BrokerAddress(*acceptor.address) for acceptor in bound[listener.name])
            self.listener_addresses[listener.name] = addresses
            advertised[listener.name] = s.advertised_nodes(addresses, listener)
        cluster = await self._join_doors(tuple(advertised.items()))
        groups = await self._start_groups()
        credentials, authorizer = await self._start_security()
        quotas = self._quotas = ConnectionQuotas(self._security_store)
        broker_configs = self._broker_configs = BrokerConfigs(
            dict(s.security.connection_settings), self._security_store, [listener.name for listener in listeners])
        broker_configs.subscribe(self._reconfigure_connections)
        if broker_configs.dynamic:
            self._reconfigure_connections()
        base = Context((), self._registry, bridge, s.segments_root, ProducerIdManager(s.segments_root), self.metrics,
                       groups, appended, max_request_bytes=s.max_request_bytes, registry_file=s.registry_file,
                       credentials=credentials, authorizer=authorizer, quotas=quotas, cluster=cluster,
                       broker_configs=broker_configs, topic_store=self._topic_store)
        base.transactions = self._transactions = await start_transactions(s, base, bridge)
        for listener in listeners:
            self._contexts[listener.name] = dataclasses.replace(base, nodes=advertised[listener.name],
                                                                listener=listener.name)
        self.bound = self.listener_addresses[listeners[0].name]
        self.context = self._contexts[listeners[0].name]
        nodes = self.context.nodes
        self.address = BrokerAddress(nodes[0].host, nodes[0].port)
        for node in nodes:  # every node's series exists from the start, at 0
            self.metrics.connections.labels(str(node.node_id))
            self.metrics.connections_accepted.labels(str(node.node_id))
        for acceptor in self._acceptors:
            acceptor.start()
        return self.bound[0]

    def _reconfigure_connections(self) -> None:
        """The connection caps after a change of the cluster's dynamic broker configs (`broker_configs.py`)."""
        assert self._broker_configs is not None
        effective = self._broker_configs.effective()
        try:
            parsed = self._broker_configs.connection_settings()
        except ConnectionLimitError as e:  # checked before it was stored; a static block it no longer fits
            log.warning("front door: the dynamic broker configs are not applied: %s", e)
            return
        self._per_ip.reconfigure(parsed.max_connections_per_ip, dict(parsed.max_connections_per_ip_overrides),
                                 self._names)
        self._slots.reconfigure(parsed.slots)
        log.info("front door: connection caps now %s", ", ".join(f"{k}={v}" for k, v in sorted(effective.items()))
                 or "none")

    async def _join_doors(self, listeners: tuple[tuple[str, tuple[Node, ...]], ...]) -> DoorCluster | None:
        """With a doors topic: this door registered among the live doors (`door_membership.py`)."""
        s = self.settings
        if s.doors_topic is None:
            return None
        self._membership = DoorMembership(s.cluster, s.doors_topic, s.door_id, s.door_session_timeout_ms,
                                          on_change=lambda c: self.metrics.doors_alive.set(len(c.doors)))
        cluster = await self._membership.join(self._loop, listeners)
        self.metrics.doors_alive.set(len(cluster.doors))
        log.info("front door %d on the doors topic %s: %d live door(s), %d node(s)", s.door_id, s.doors_topic,
                 len(cluster.doors), len(cluster.node_ids()))
        return cluster

    async def _start_security(self) -> tuple[ScramCredentials | None, AclAuthorizer | None]:
        """The users and ACLs from the security topic, followed for changes through other doors. A door with a
        SASL listener or an authorizer cannot start without them; one with neither serves on and says why the
        user and ACL APIs fail."""
        s = self.settings
        needed = s.security.sasl or s.security.authorizer
        if s.security_topic is None:
            if needed:
                raise SecurityStoreError("SASL listeners and ACLs need a security_topic")
            return None, None
        store = KafkaSecurityStore(s.cluster, s.security_topic)
        try:
            await asyncio.to_thread(store.load)
        except SecurityStoreError as e:
            if needed:
                raise
            log.warning("front door: no users or ACLs: %s", e)
            return None, None
        store.start(self._loop)
        self._security_store = store
        credentials = ScramCredentials(store)
        authorizer = None
        if s.security.authorizer:
            authorizer = AclAuthorizer(store, s.security.super_users, s.security.allow_everyone_if_no_acl_found,
                                       on_denied=self.metrics.denied)
        log.info("front door security: %d users from %s; ACLs %s; %d client quota(s)", len(credentials.users()),
                 s.security_topic, "enforced" if authorizer is not None else "off (no authorizer.class.name)",
                 len(store.snapshot(QUOTA_KIND)))
        return credentials, authorizer

    async def _start_groups(self) -> GroupCoordinator:
        """The group coordinator with what the groups topic holds: loaded before any request is served,
        so no client ever sees a group half-loaded (Kafka answers COORDINATOR_LOAD_IN_PROGRESS instead)."""
        s = self.settings
        self._group_store = store = KafkaGroupStore(s.cluster, s.groups_topic)
        groups = GroupCoordinator(store, s.groups, on_rebalance=self.metrics.rebalanced,
                                  on_commit=self.metrics.committed)
        try:
            stored = await asyncio.to_thread(store.load)
        except GroupStoreError as e:  # producers and assigned consumers are still served
            groups.unavailable = f"{e}; create it (compacted) or let the gateway create it, then restart"
            log.warning("front door: no consumer groups: %s", groups.unavailable)
            if self._membership is not None:
                self._membership.coordinate(groups, None)
            return groups
        store.start(self._loop)
        if self._membership is not None:  # only the groups this door coordinates among the live doors
            owned = self._membership.coordinate(groups, store)
            groups.load(stored, only=lambda g: partition_for(g) in owned)
        else:
            groups.load(stored)
        groups.start_expiry()
        log.info("front door groups: %d groups and %d groups' offsets loaded from %s", len(groups.groups),
                 len(groups.offsets), s.groups_topic)
        self.metrics.groups.attach(groups.snapshot, self._loop, s.segments_root)
        return groups

    def _bind(self, listener: Listener, tls: ssl.SSLContext | None, node_id: int, host: str, port: int) -> Acceptor:
        try:
            sock = bind(host, port)
        except OSError as e:
            if not self.settings.free_port_fallback or port == 0:
                raise
            log.warning("front door node %d: %s:%d unavailable (%s); using a free port (listener %s)", node_id, host,
                        port, e, listener.name)
            sock = bind(host, 0)
        throttled = self.metrics.connections_throttled.labels(listener.name)
        rejected = self.metrics.connections_rejected.labels(listener.name)

        def on_rejected(ip: str, maximum: int) -> None:
            rejected.inc()
            if (suppressed := self._rejected_connections.due(ip)) is not None:  # a flood: a line a minute
                log.info("Rejected connection from /%s, address already has the configured maximum of %d "
                         "connections.%s", ip, maximum, self._rejected_connections.more(suppressed))

        return Acceptor(self._loop, sock, functools.partial(self._serve, listener, node_id), tls,
                        lambda ip: self._quotas.throttle_ms(ip, int(time.time() * 1000)), throttled.inc,
                        self._per_ip, on_rejected, listener.name, self._slots,
                        self.metrics.accept_blocked.labels(listener.name).inc)

    def advertised_listeners(self) -> list[tuple[Listener, str]]:
        """Each listener, in the configured order, with node 1's address as Metadata gives it to its clients."""
        return [(listener, f"{nodes[0].host}:{nodes[0].port}") for listener in self.settings.listeners()
                if (nodes := self._contexts[listener.name].nodes)]

    def cluster_problem(self, timeout_s: float = 5.0) -> str | None:
        """Why the gateway's Kafka cluster is unreachable from this door now, or None (`/readyz`)."""
        return "not started" if self._bridge is None else self._bridge.unreachable(timeout_s)

    def on_stop(self, call: Callable[[], None]) -> None:
        """`call` once the door has stopped (what was opened for it: its own topic registry store)."""
        self._on_stop.append(call)

    def stop(self) -> None:
        """Close the listeners, the connections and the door's Kafka clients. Returns within
        `stop_bounds.total_s` and never raises: a step that does not finish in its time is cancelled or
        abandoned with one warning naming it (`stopping.py`), and the stop goes on."""
        try:
            self._stop_door()
        finally:
            for call in self._on_stop:
                try:
                    call()
                except Exception:  # noqa: BLE001 - the stop goes on
                    log.exception("front door: a step after stopping failed")
            self._on_stop.clear()

    def _stop_door(self) -> None:
        if not self._thread.is_alive():
            return
        bounds = self.stop_bounds
        stopping = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
        try:
            stopping.result(timeout=bounds.steps_s + bounds.margin_s)
        except TimeoutError:  # every step is bounded: only a loop held up by something else gets here
            stopping.cancel()
            log.warning("front door: stopping did not finish within %.1f s (its event loop is held up); "
                        "stopping the loop all the same", bounds.steps_s + bounds.margin_s)
        except Exception:  # noqa: BLE001 - the steps report their own failures; this is a safety net
            log.exception("front door: stopping failed; stopping the loop all the same")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=bounds.loop_s)
        if self._thread.is_alive():  # a daemon thread: it ends with the process
            log.warning("front door: its event loop did not stop within %.1f s; left to end with the process",
                        bounds.loop_s)
            return
        self._loop.close()

    async def _stop(self) -> None:
        bounds = self.stop_bounds
        await self._close_connections(bounds.connections_s)
        if self.context is not None:
            try:
                self.context.groups.close()  # waiting joins and syncs are answered NOT_COORDINATOR
            except Exception as e:  # noqa: BLE001 - the stop goes on
                log.warning("front door: closing the group coordinator failed: %s: %s", type(e).__name__, e)
        self.metrics.groups.detach()
        if self._transactions is not None:  # markers in flight stop; the next coordinator resumes them
            await self._transactions.stop()
        # The Kafka clients side by side, each bounded: none waits for another's flush.
        steps: list[Awaitable[bool]] = []
        if self._membership is not None:
            steps.append(async_step("leaving the doors topic", self._membership.leave(), bounds.kafka_s))
        for what, client in (("the groups topic's clients", self._group_store),
                             ("the security topic's clients", self._security_store),
                             ("the transaction state topic's clients",
                              None if self._transactions is None else self._transactions.store)):
            if client is not None:
                steps.append(blocking_step(f"closing {what}", client.close, bounds.kafka_s))
        if self._bridge is not None:
            steps.append(blocking_step("closing the ingress bridge (ingress producer, response reader)",
                                       self._bridge.stop, bounds.kafka_s))
        await asyncio.gather(*steps)

    async def _close_connections(self, bound_s: float) -> None:
        """Listeners and connections closed. A connection's requests still waiting for the gateway's answer
        (a produce whose response has not come) could not be answered on the closed connection: after
        `bound_s` they are cancelled."""
        for acceptor in self._acceptors:
            acceptor.close()
        for writer in list(self._writers):  # each connection's reader then ends, as on a client's close
            writer.close()
        if not self._connections:
            return
        _, waiting = await asyncio.wait(set(self._connections), timeout=bound_s)
        if not waiting:
            return
        for task in waiting:
            task.cancel()
        _, stuck = await asyncio.wait(waiting, timeout=bound_s)
        log.warning("front door: %d closed connection(s) still had requests waiting for answers after %.1f s; "
                    "cancelled%s", len(waiting), bound_s,
                    f" ({len(stuck)} did not end within {bound_s:.1f} s more; abandoned)" if stuck else "")

    # ------------------------------------------------------------------ connections

    async def _serve(self, listener: Listener, node_id: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        connections = self.metrics.connected(node_id)
        try:
            connection = self._connection(listener, node_id, peer, writer)
            # Before authentication one request is answered at a time, written as it is answered: a failed
            # login costs no response queue and no sender task (a flood of them is many short connections).
            if connection is not None and (connection.sasl is None or await self._authenticate(connection, reader,
                                                                                              writer)):
                await self._serve_authenticated(connection, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away, possibly mid-frame
        finally:
            writer.close()
            connections.dec()
            self._connections.discard(task)
            self._writers.discard(writer)

    async def _serve_authenticated(self, connection: _Connection, reader: asyncio.StreamReader,
                                   writer: asyncio.StreamWriter) -> None:
        """Requests read and started in order, several in flight; answered in order by a sender of their own."""
        responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None] = asyncio.Queue(MAX_IN_FLIGHT_PER_CONNECTION)
        sender = asyncio.create_task(self._send_in_order(responses, writer, connection.peer))
        try:
            await self._read_requests(connection, reader, responses)
        except asyncio.CancelledError:
            sender.cancel()  # and the request it awaits
            raise
        finally:
            try:
                responses.put_nowait(None)  # the sender finishes what was asked, then stops
            except asyncio.QueueFull:
                sender.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await sender
            _cancel_queued(responses)  # what a cancelled sender left: nobody would answer it

    def _connection(self, listener: Listener, node_id: int, peer: Any, writer: asyncio.StreamWriter) -> _Connection | None:
        """What a new connection knows of itself; None when it must close (a certificate no mapping rule takes)."""
        context = self._contexts[listener.name]
        principal = ANONYMOUS
        if listener.protocol is SecurityProtocol.SSL:  # SASL_SSL: the principal is SASL's, as in Kafka
            tls = writer.get_extra_info("ssl_object")
            der = tls.getpeercert(binary_form=True) if tls is not None else None
            if der:
                try:
                    principal = user(principal_name(distinguished_name(der), self.settings.security.principal_rules))
                except (PrincipalMappingError, ValueError) as e:
                    self.metrics.authenticated("SSL", ok=False)
                    self._closing(peer, listener.name, "certificate", str(e))
                    return None
                self.metrics.authenticated("SSL", ok=True)
        sasl = None
        if listener.protocol.sasl:
            assert context.credentials is not None, "a SASL listener starts only with its users"
            sasl = SaslConnection(self.settings.security.sasl_mechanisms, context.credentials)
        client_host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""
        return _Connection(listener, node_id, context, peer, client_host, principal, sasl)

    async def _read_requests(self, conn: _Connection, reader: asyncio.StreamReader,
                             responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None]) -> None:
        in_flight = InFlightBytes(self.settings.max_request_bytes)
        peer = conn.peer
        while True:
            prefix = await reader.readexactly(SIZE.size)
            try:
                size = frame_size(prefix, self.settings.max_request_bytes)
                await in_flight.acquire(size)
                frame = await reader.readexactly(size)
                if conn.session_expires is not None:  # KIP-368 (SocketServer's Processor, KafkaChannel)
                    now = time.monotonic()
                    if now > conn.session_expires:
                        log.info("closing connection from %s on %s: its SASL session (%s) expired %.1f s ago "
                                 "without re-authentication", peer, conn.listener.name, conn.principal,
                                 now - conn.session_expires)
                        return
                    if frame[:2] == REAUTHENTICATION_START and now - conn.reauthenticated >= MIN_REAUTH_INTERVAL_S:
                        in_flight.release(size)
                        self.metrics.bytes_in.inc(SIZE.size + size)
                        if not await self._reauthenticate(conn, frame, reader, responses):
                            return
                        continue
                # the frame is dropped once parsed: kio copies out what the request holds
                request = parse_request(frame, READABLE, conn.node_id, conn.client_host, conn.principal,
                                        conn.listener.name)
                del frame
                self.metrics.bytes_in.inc(SIZE.size + size)
            except UnsupportedApiError as e:
                in_flight.release(size)
                if (answer := self._unsupported(e, conn)) is None:
                    return
                await responses.put(_done(answer))
                continue
            except BadRequestError as e:
                self.metrics.request("unknown", "INVALID_REQUEST")
                self._closing(peer, conn.listener.name, "bad request", str(e))
                return
            # Started now: a produce hands its batches to the ingress topic before the next request is read.
            task = asyncio.create_task(self._handle(conn.context, request))
            in_flight.release_when_done(task, size)
            await asyncio.sleep(0)
            await responses.put(task)

    def _unsupported(self, e: UnsupportedApiError, conn: _Connection) -> bytes | None:
        """An API or version the door does not read: ApiVersions is answered in v0 (KIP-511, the answer
        returned), anything else closes the connection (None)."""
        self.metrics.request(api_name(e.api_key), "UNSUPPORTED_VERSION")
        if e.api_key == ApiKey.API_VERSIONS:
            body = api_versions.api_versions_body(0, ErrorCode.unsupported_version)
            return encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, body)
        self._closing(conn.peer, conn.listener.name, "unsupported request", str(e))
        return None

    def _closing(self, peer: Any, listener: str, why: str, message: str) -> None:
        """A connection closed for what its client sent (before login, or a request the door cannot read):
        a line a minute per client host, listener and kind of reason (`why`), with how many were left out, as
        failed logins and denials are logged (security/audit.py); a flood of hostile connections costs no line
        each."""
        host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        if (suppressed := self._closes.due((host, listener, why))) is not None:
            log.info("closing connection from %s on %s: %s%s", peer, listener, message, self._closes.more(suppressed))

    async def _authenticate(self, conn: _Connection, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> bool:
        """A SASL listener's connection until it is authenticated (`security/sasl_server.py`): True once it is,
        False when the connection closes (each answer is written before)."""

        async def write(answer: bytes) -> None:
            writer.write(answer)
            self.metrics.bytes_out.inc(len(answer))
            await writer.drain()

        return await self._sasl_exchange(conn, reader, write)

    async def _reauthenticate(self, conn: _Connection, handshake: bytes, reader: asyncio.StreamReader,
                              responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None]) -> bool:
        """KIP-368: a SaslHandshake on an authenticated connection whose session expires starts a new exchange,
        answered in order after the requests before it; the mechanism and the principal must stay the same
        (SaslServerAuthenticator's ReauthInfo). False when the connection closes."""
        sasl = conn.sasl
        assert sasl is not None and sasl.mechanism is not None and sasl.credentials is not None
        conn.reauthenticated = time.monotonic()  # at most one re-authentication a second, as Kafka
        previous = conn.principal
        conn.sasl = SaslConnection(sasl.enabled, sasl.credentials, reauthenticating=True, previous=sasl.mechanism)
        conn.principal = ANONYMOUS  # until the exchange completes; requests in flight keep theirs

        async def queue(answer: bytes) -> None:
            await responses.put(_done(answer))

        ok = await self._sasl_exchange(conn, reader, queue, handshake, previous)
        if not ok:
            conn.principal = previous  # the connection closes; what it answers is said as before
        return ok

    async def _sasl_exchange(self, conn: _Connection, reader: asyncio.StreamReader,
                             deliver: Callable[[bytes], Awaitable[None]], first: bytes | None = None,
                             previous: KafkaPrincipal | None = None) -> bool:
        """Frames of a SASL exchange until it completes (True) or the connection closes (False), each answer
        handed to `deliver`; `first`: a frame already read; `previous`: the principal a re-authentication must
        keep."""
        while conn.principal is ANONYMOUS:
            if first is not None:
                frame, first = first, None
            else:
                (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
                if not 0 <= size <= SASL_MAX_RECEIVE_BYTES:  # Kafka's sasl.server.max.receive.size
                    self._closing(conn.peer, conn.listener.name, "SASL receive size",
                                  f"SASL receive of {size} bytes (at most {SASL_MAX_RECEIVE_BYTES} before "
                                  "authentication)")
                    return False
                frame = await reader.readexactly(size)
                self.metrics.bytes_in.inc(SIZE.size + size)
            answer, keep_open = await self._authentication_frame(conn, frame, previous)
            if answer is not None:
                await deliver(answer)
            if not keep_open:
                return False
        return True

    async def _authentication_frame(self, conn: _Connection, frame: bytes,
                                    previous: KafkaPrincipal | None) -> tuple[bytes | None, bool]:
        """One frame of a SASL exchange: its answer (None: none) and whether the connection stays open."""
        sasl = conn.sasl
        assert sasl is not None
        if sasl.raw_tokens:  # after a v0 handshake: the bare token, answered bare
            token = await self._sasl_token(conn, frame, previous)
            return (None, False) if token is None else (SIZE.pack(len(token)) + token, True)
        try:
            request = parse_request(frame, READABLE, conn.node_id, conn.client_host, ANONYMOUS, conn.listener.name)
        except UnsupportedApiError as e:
            answer = self._unsupported(e, conn)
            return answer, answer is not None
        except BadRequestError as e:
            self.metrics.request("unknown", "INVALID_REQUEST")
            self._closing(conn.peer, conn.listener.name, "bad request", str(e))
            return None, False
        name = api_name(request.api_key)
        if request.api_key not in BEFORE_AUTHENTICATION or (
                request.api_key == ApiKey.SASL_AUTHENTICATE and sasl.state is not SaslState.AUTHENTICATE):
            self._closing(conn.peer, conn.listener.name, "request before login",
                          f"Unexpected Kafka request of type {name} during SASL handshake")
            self.metrics.request(name, "ILLEGAL_SASL_STATE")
            return None, False

        def answer(body: Any) -> bytes:
            code = getattr(body, "error_code", 0)
            self.metrics.request(name, _error_name(int(code)))
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)

        if request.api_key == ApiKey.API_VERSIONS:
            return answer(await api_versions.handle(conn.context, request)), True
        enabled = [m.value for m in sasl.enabled]
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            try:
                chosen = sasl.handshake(request.body.mechanism, request.api_version)
            except IllegalSaslState as e:
                self._closing(conn.peer, conn.listener.name, "SASL state", str(e))
                return None, False
            if chosen is not None and sasl.previous is not None and chosen is not sasl.previous:
                log.info("closing connection from %s on %s: SASL mechanism '%s' requested by client is not "
                         "supported for re-authentication of mechanism '%s'", conn.peer, conn.listener.name,
                         chosen.value, sasl.previous.value)  # the handshake is answered, then the channel closed
                return answer(sasl_handshake.handshake_body(request.api_version, ErrorCode.none, enabled)), False
            if chosen is None:  # UnsupportedSaslMechanismException: answered, then closed
                self.metrics.authenticated("unsupported", ok=False)  # a label per client-chosen name would grow
                self._closing(conn.peer, conn.listener.name, "SASL mechanism",
                              f"unsupported SASL mechanism {request.body.mechanism!r} (enabled: {', '.join(enabled)})")
                return answer(sasl_handshake.handshake_body(
                    request.api_version, ErrorCode.unsupported_sasl_mechanism, enabled)), False
            return answer(sasl_handshake.handshake_body(request.api_version, ErrorCode.none, enabled)), True
        token = await self._sasl_token(conn, request.body.auth_bytes, previous)
        if token is None:  # answered, then closed (Kafka's failed authentication)
            return answer(sasl_authenticate.authenticate_body(
                request.api_version, ErrorCode.sasl_authentication_failed, sasl.failure)), False
        lifetime_ms = self.settings.security.connections_max_reauth_ms if conn.principal is not ANONYMOUS else 0
        return answer(sasl_authenticate.authenticate_body(request.api_version, ErrorCode.none, None, token,
                                                          lifetime_ms)), True

    async def _sasl_token(self, conn: _Connection, token: bytes, previous: KafkaPrincipal | None) -> bytes | None:
        """The server's answer to one client token; None after a failed login, once Kafka's
        connection.failed.authentication.delay.ms has passed (a flood of bad logins is slowed, not answered
        at once). `previous`: the principal a re-authentication must keep."""
        sasl = conn.sasl
        assert sasl is not None and sasl.mechanism is not None
        mechanism = sasl.mechanism.value
        try:
            answer = sasl.authenticate(token)
            if previous is not None and sasl.principal is not None and sasl.principal != previous:
                raise SaslAuthenticationFailed(  # ReauthInfo.ensurePrincipalUnchanged
                    f"Cannot change principals during re-authentication from {previous.principal_type}."
                    f"{previous.name}: {sasl.principal.principal_type}.{sasl.principal.name}")
        except (SaslAuthenticationFailed, IllegalSaslState) as e:
            sasl.failure = str(e)
            self.metrics.authenticated(mechanism, ok=False)
            suppressed = self._failed_logins.due((conn.client_host, mechanism))
            if suppressed is not None:  # a flood of bad logins from one host: a line a minute, not one each
                cause = f" ({e.__cause__})" if e.__cause__ is not None else ""
                log.info("Failed %s with %s on %s (%s): %s%s%s",
                         "re-authentication" if sasl.reauthenticating else "authentication", conn.client_host,
                         conn.listener.name, mechanism, e, cause, self._failed_logins.more(suppressed))
            await asyncio.sleep(self.settings.security.failed_authentication_delay_ms / 1000)
            return None
        if sasl.principal is not None:
            conn.principal = sasl.principal
            reauth_ms = self.settings.security.connections_max_reauth_ms
            conn.session_expires = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else None
            self.metrics.authenticated(mechanism, ok=True)
            log.debug("%s %s as %s with %s", conn.peer, "re-authenticated" if sasl.reauthenticating else
                      "authenticated", conn.principal, mechanism)
        return answer

    async def _handle(self, context: Context, request: Request) -> bytes | CloseConnection | None:
        name = api_name(request.api_key)
        body = await HANDLERS[request.api_key](context, request)
        if body is None or isinstance(body, CloseConnection):  # acks=0 produce: Kafka sends nothing
            self.metrics.request(name)
            return body
        code = getattr(body, "error_code", 0)
        self.metrics.request(name, _error_name(int(code)))
        if request.api_key == ApiKey.METADATA and metadata.partitions_in(body) > metadata.OFF_LOOP_PARTITIONS:
            # ~5 µs a partition to encode: off the loop, like the answer's building
            return await asyncio.to_thread(encode_response, request.api_key, request.api_version,
                                           request.correlation_id, body)
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    async def _send_in_order(self, responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None],
                             writer: asyncio.StreamWriter, peer: Any) -> None:
        while (task := await responses.get()) is not None:
            try:
                data = await task
            except Exception:
                log.exception("request from %s failed; closing the connection", peer)
                data = CloseConnection("the request failed")
            if isinstance(data, CloseConnection):
                log.info("closing connection from %s: %s", peer, data.reason)
                writer.close()
                _cancel_queued(responses)  # what was still queued is not answered on a closed connection
                return
            if data is not None:
                writer.write(data)
                self.metrics.bytes_out.inc(len(data))
                await writer.drain()


@dataclass
class _Connection:
    """One client connection: where it came in, and who it is once authenticated (a SASL listener's
    connection is ANONYMOUS until `sasl` completes)."""

    listener: Listener
    node_id: int
    context: Context  # its listener's (Metadata gives that listener's addresses)
    peer: Any
    client_host: str  # as Kafka shows it: "/127.0.0.1"
    principal: KafkaPrincipal
    sasl: SaslConnection | None
    # KIP-368: when the SASL session ends unless re-authenticated (monotonic s; None: it lasts), and when the
    # last re-authentication began
    session_expires: float | None = None
    reauthenticated: float = 0.0


def _cancel_queued(responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None]) -> None:
    while not responses.empty():
        if (queued := responses.get_nowait()) is not None:
            queued.cancel()


def _done(data: bytes | CloseConnection) -> asyncio.Task[bytes | CloseConnection | None]:
    async def ready() -> bytes | CloseConnection | None:  # noqa: RUF029 - a finished task, for the queue
        return data

    return asyncio.ensure_future(ready())


def _error_name(code: int) -> str:
    try:
        return "NONE" if code == 0 else ErrorCode(code).name.upper()
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"
