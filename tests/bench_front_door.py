"""`make bench`, a running gateway with its Kafka front door for any client to produce through, and the
rows of librdkafka's runs (`tests.librdkafka_client`).

- `gateway_with_front_door`: a gateway query on a fresh config of the bench's stack with a front door on
  a free loopback port.
- `deliveries_row`: a librdkafka run's records/s and latencies as a table row.
- `collected_warnings`: the front door's log warnings while a row runs.

Delivery errors, client errors (error_cb), records never produced or never delivered, and the front
door's log warnings are counted and printed, never asserted. The rows and their settings are
`tests.bench_clients`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from kafka_cluster.admin import create_topics
from streaming.config import GatewayConfig
from streaming.query import start_gateway, stop_gracefully, topic_specs
from streaming.registry_sync import open_registry_store
from tests.bench_round_trip import RoundTripProbe
from tests.bench_stack import Row, Stack
from tests.librdkafka_client import Deliveries

# the front door, its ingress/response clients, and its asyncio loop (a handler's unretrieved exception)
WATCHED_LOGS = ("gateway.front_door", "gateway.kafka_client", "asyncio")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname}: {record.getMessage()}")


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """WARNING and above of the front door's loggers while the block runs."""
    handler = _Collect()
    loggers = [logging.getLogger(name) for name in WATCHED_LOGS]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.lines
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


@contextmanager
def gateway_with_front_door(stack: Stack, probe: RoundTripProbe | None = None,
                            on_start: Callable[[FrontDoor], None] | None = None,
                            on_config: Callable[[GatewayConfig], None] | None = None,
                            **overrides: Any) -> Iterator[tuple[str, Any]]:
    """A gateway query on a fresh config of the stack (its defaults, `overrides` applied), with a front door
    on a free port of loopback: (bootstrap address, query). `probe` records the front door's hops and the
    sink's micro-batches."""
    assert stack.spark is not None
    config = stack.config("front-door", **overrides)
    if on_config is not None:  # a section that starts more of the gateway on the same topics (door processes)
        on_config(config)
    create_topics(config.cluster, topic_specs(config))
    with ExitStack() as stopping:  # stopped in reverse: the door, the query, the registry store
        # the topic registry as `gateway run` serves it: one store on the cluster for the query and the door
        store = open_registry_store(config)
        stopping.callback(store.close)
        query, _ = start_gateway(stack.spark, config, observers=[probe.observe] if probe else (), registry_store=store)
        stopping.callback(stop_gracefully, query)
        door = FrontDoor(config.front_door_settings(listen="127.0.0.1:0"), store.current,
                         probe.door if probe else FrontDoorMetrics(), topic_store=store)
        stopping.callback(door.stop)
        door.start()
        assert door.address is not None
        if on_start is not None:  # what a section needs of the door itself (its listeners' addresses)
            on_start(door)
        yield f"{door.address.host}:{door.address.port}", query


def deliveries_row(name: str, d: Deliveries, value_size: int, note: str = "",
                   micro_batch_s: list[float] | None = None) -> Row:
    """records/s over first produce() -> last delivery report; MB/s of record values (10^6 B)."""
    ok = d.ok()
    problems = "; " + d.problems()[0] if d.problems() else ""
    if not ok:
        return Row(name, note=f"nothing delivered{problems}")
    seconds = max(d.delivered[i] for i in ok) - d.sent[0]
    return Row(name, len(ok) / seconds, len(ok) * value_size / seconds / 1e6,
               [(d.delivered[i] - d.sent[i]) * 1000 for i in ok], micro_batch_s or [],
               note=f"{len(ok)}/{len(d.sent)} records{', ' + note if note else ''}{problems}")
