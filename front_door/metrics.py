"""The front door's metrics, on the gateway's exporter (its `CollectorRegistry`), docs/operations.md: metrics style:
`api` is an API name of kio's index or "unknown", `error` a Kafka error name — both closed sets — and
`node` a front-door node id (at most `front_door_nodes` of them)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from front_door.groups.group_metrics import GroupsCollector
from sinks.batch_metrics import PREFIX

P = f"{PREFIX}front_door_"
# produce request received -> ProduceResponse sent: a micro-batch or two of the gateway
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0)
# the hops of one batch's round trip, from milliseconds (a broker ack, a response read) to a micro-batch or two
PHASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class ProducePhases:
    """Where one partition batch's produce round trip went (seconds), hop by hop:
    - `ingress_append`: handed to the ingress producer -> the ingress topic acknowledged it (acks=all);
    - `gateway`: acknowledged -> the gateway published its response (the response message's timestamp):
      waiting for the next micro-batch, then the micro-batch up to the sink's publish (its Spark phases are
      `gateway_micro_batch_phase_duration_seconds`, its wait `gateway_append_latency_seconds`);
    - `response_delivery`: published -> read by the front door.
    `gateway` and `response_delivery` compare wall clocks of two processes (the sink's task and the driver):
    on a cluster they carry the hosts' clock offset."""

    ingress_append: float
    gateway: float
    response_delivery: float


class FrontDoorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry(auto_describe=True)
        # `node`: the front-door node id whose listener took the connection, 1..front_door_nodes
        self.connections = Gauge(f"{P}connections", "Open client connections, by front-door node.", ["node"],
                                 registry=r)
        self.connections_accepted = Counter(f"{P}connections_accepted_total", "Client connections accepted, by "
                                            "front-door node.", ["node"], registry=r)
        self.doors_alive = Gauge(f"{P}doors_alive", "Front doors this door sees alive on the doors topic (itself "
                                 "included; 1 without a doors topic).", registry=r)
        self.doors_alive.set(1)
        self.bytes = Counter(f"{P}bytes_total", "Bytes of Kafka requests read and of responses written, by "
                             "direction (in, out).", ["direction"], registry=r)
        self.bytes_in, self.bytes_out = self.bytes.labels("in"), self.bytes.labels("out")
        self.connections_throttled = Counter(f"{P}connections_throttled_total", "Client connections closed unread "
                                             "for going over their IP's connection_creation_rate quota (KIP-612), by "
                                             "listener.", ["listener"], registry=r)
        self.connections_rejected = Counter(f"{P}connections_rejected_total", "Client connections closed at once "
                                            "for going over their IP's max.connections.per.ip, by listener.",
                                            ["listener"], registry=r)
        self.accept_blocked = Counter(f"{P}accept_blocked_seconds_total", "Time the listener's acceptors stopped "
                                      "accepting, waiting for a connection slot (max.connections, "
                                      "max.connection.creation.rate; Kafka's AcceptorBlockedPercent), by listener.",
                                      ["listener"], registry=r)
        self.authentications = Counter(f"{P}authentications_total", "Client authentications, by mechanism (a "
                                       "SASL mechanism, SSL for a client certificate) and result (success, failure).",
                                       ["mechanism", "result"], registry=r)
        self.authorization_denials = Counter(f"{P}authorization_denials_total", "Requests (or parts of them) the "
                                             "ACLs refused, by API.", ["api"], registry=r)
        self.requests = Counter(f"{P}requests_total", "Requests answered (or refused), by API and the Kafka "
                                "error of the whole request (NONE when served; per-partition errors are in the "
                                "gateway's batch metrics).", ["api", "error"], registry=r)
        self.produce_waiting = Gauge(f"{P}produce_in_flight", "Produce requests waiting for the gateway's "
                                     "responses.", registry=r)
        self.produce_seconds = Histogram(f"{P}produce_latency_seconds", "Produce request received to "
                                         "ProduceResponse sent (acks 1/-1).", buckets=LATENCY_BUCKETS, registry=r)
        self.produce_phase_seconds = Histogram(f"{P}produce_phase_seconds", "One partition batch's produce round "
                                               "trip by hop: ingress_append, gateway (wait for the micro-batch and "
                                               "the micro-batch up to its publish), response_delivery.", ["phase"],
                                               buckets=PHASE_BUCKETS, registry=r)
        # each phase's child looked up once: observed three times per partition batch, on the door's loop
        self._phases = tuple((f.name, self.produce_phase_seconds.labels(f.name)) for f in fields(ProducePhases))
        # `group`: a consumer group's id (as many as applications consume in groups, as Kafka's exporters label)
        self.group_rebalances = Counter(f"{P}group_rebalances_total", "Rebalances started, by consumer group.",
                                        ["group"], registry=r)
        self.groups = GroupsCollector()
        r.register(self.groups)
        self.group_commits = Counter(f"{P}group_offset_commits_total", "Partition offsets committed, by consumer "
                                     "group.", ["group"], registry=r)
        # the children of the closed label sets, looked up once: `labels()` costs a lock and a tuple per call
        self._children: dict[tuple[str, tuple[str, ...]], Any] = {}

    def _child(self, metric: Counter | Gauge, *values: str) -> Any:
        key = (metric._name, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def connected(self, node_id: int) -> Any:
        """A connection accepted by `node_id`: counted, and its open-connections gauge (dec it at the close)."""
        self._child(self.connections_accepted, str(node_id)).inc()
        gauge = self._child(self.connections, str(node_id))
        gauge.inc()
        return gauge

    def authenticated(self, mechanism: str, ok: bool) -> None:
        """A client authentication: `mechanism` a SASL mechanism, "SSL" (a client certificate) or "unsupported"."""
        self._child(self.authentications, mechanism, "success" if ok else "failure").inc()

    def denied(self, api: str) -> None:
        self.authorization_denials.labels(api).inc()

    def rebalanced(self, group: str) -> None:
        self.group_rebalances.labels(group).inc()

    def committed(self, group: str, partitions: int) -> None:
        self.group_commits.labels(group).inc(partitions)

    def produce_latency(self, seconds: float) -> None:
        self.produce_seconds.observe(seconds)

    def produce_phases(self, phases: ProducePhases) -> None:
        for name, child in self._phases:
            child.observe(max(0.0, getattr(phases, name)))

    def request(self, api: str, error: str = "NONE") -> None:
        self._child(self.requests, api, error).inc()
