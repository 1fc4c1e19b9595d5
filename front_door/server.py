"""The front door: an asyncio server on its own thread in the gateway's driver, as Kafka's `BrokerServer`
starts a broker's parts and stops them.

The front door is a cluster of `nodes` brokers (`cluster/leadership.py` says why): node i has a listener of
its own — node 1 on `listen` (the bootstrap address), node i on its port + i - 1, or each on a free port when
that port is 0 — and every connection knows the node it was accepted on. All listeners share the loop,
the ingress bridge and the context: a node is an address and a set of partitions it leads, not a process.
Several doors with one `doors_topic` are one cluster (`cluster/door_cluster.py`, `door_membership.py`): each
has its own node ids, and leadership and group coordination spread over every live door's nodes.

Every node has a port on every listener (`security/listeners.py`, Kafka's `listeners`): PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL. Each port has an acceptor (`network/acceptor.py`), which applies the connection
quotas before a TLS handshake or a read; TLS is asyncio's (`security/tls.py`). What a connection then reads
and answers is `processor.py`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable

import uvloop

from front_door.cluster.door_cluster import DoorCluster
from front_door.cluster.kafka_security_store import KafkaSecurityStore
from front_door.cluster.node import BrokerAddress, Node
from front_door.cluster.security_store import QUOTA_KIND, SecurityStoreError
from front_door.context import AppendSignal, Context
from front_door.door_membership import DoorMembership
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.placement import partition_for
from front_door.groups.store import GroupStoreError, KafkaGroupStore
from front_door.ingress_bridge import IngressBridge
from front_door.metrics import FrontDoorMetrics
from front_door.network.acceptor import Acceptor, bind
from front_door.network.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from front_door.network.broker_configs import BrokerConfigs
from front_door.network.connection_limits import ConnectionLimitError, ConnectionsPerIp, NameLookups
from front_door.network.connection_quotas import ConnectionQuotas
from front_door.network.connection_slots import ConnectionSlots
from front_door.processor import Processor
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.authorizer import AclAuthorizer
from front_door.security.listeners import Listener
from front_door.security.scram_credentials import ScramCredentials
from front_door.settings import FrontDoorSettings
from front_door.stopping import StopBounds, async_step, blocking_step
from front_door.transaction_startup import add_partitions_manager, start_transactions
from front_door.transactions.coordinator import TransactionCoordinator
from kafka_cluster.once_per_window import OncePerWindow
from kafka_cluster.registry_store import RegistryStore
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.front_door")


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
        self._add_partitions: AddPartitionsToTxnManager | None = None
        self._security_store: KafkaSecurityStore | None = None
        self._membership: DoorMembership | None = None
        self._rejected_connections = OncePerWindow()  # by client address
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
        self._processor = Processor(settings, metrics, self._contexts, self._connections, self._writers)
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
        base.add_partitions_to_txn = self._add_partitions = add_partitions_manager(s, base)
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

        return Acceptor(self._loop, sock, functools.partial(self._processor.serve, listener, node_id), tls,
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
        if self._add_partitions is not None:
            self._add_partitions.close()
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
        await _cancel_the_rest(bounds.margin_s / 2)  # ends at once unless a task swallows its cancellation

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


async def _cancel_the_rest(bound_s: float) -> None:
    """What still runs on the door's loop once its steps are done (a handler whose connection has gone)
    cancelled and given `bound_s` to end: a task left pending when the loop closes is reported by asyncio as
    destroyed."""
    rest = asyncio.all_tasks() - {asyncio.current_task()}
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=bound_s)
