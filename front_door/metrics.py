"""The front door's metrics, on the gateway's exporter (its `CollectorRegistry`), DESIGN §4.6 style:
`api` is an API name of kio's index or "unknown", `error` a Kafka error name — both closed sets — and
`node` a front-door node id (at most `front_door_nodes` of them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sinks.batch_metrics import PREFIX

P = f"{PREFIX}front_door_"
# produce request received -> ProduceResponse sent: a micro-batch or two of the gateway
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0)


class FrontDoorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry(auto_describe=True)
        # `node`: the front-door node id whose listener took the connection, 1..front_door_nodes
        self.connections = Gauge(f"{P}connections", "Open client connections, by front-door node.", ["node"],
                                 registry=r)
        self.connections_accepted = Counter(f"{P}connections_accepted_total", "Client connections accepted, by "
                                            "front-door node.", ["node"], registry=r)
        self.requests = Counter(f"{P}requests_total", "Requests answered (or refused), by API and the Kafka "
                                "error of the whole request (NONE when served; per-partition errors are in the "
                                "gateway's batch metrics).", ["api", "error"], registry=r)
        self.produce_waiting = Gauge(f"{P}produce_in_flight", "Produce requests waiting for the gateway's "
                                     "responses.", registry=r)
        self.produce_seconds = Histogram(f"{P}produce_latency_seconds", "Produce request received to "
                                         "ProduceResponse sent (acks 1/-1).", buckets=LATENCY_BUCKETS, registry=r)

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        self.produce_waiting.inc()
        try:
            yield
        finally:
            self.produce_waiting.dec()

    def produce_latency(self, seconds: float) -> None:
        self.produce_seconds.observe(seconds)

    def request(self, api: str, error: str = "NONE") -> None:
        self.requests.labels(api, error).inc()
