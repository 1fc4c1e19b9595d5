"""`gateway door`: a front door as a process of its own — Kafka's protocol for clients, the gateway's Kafka
cluster behind it, no Spark. A produce becomes an ingress message; its answer comes from the response
topic, whichever driver's query wrote it. So a door outlives a driver: when the active driver is killed
and a standby takes over, the door's clients keep their connections and their requests in flight are
answered once the standby's query runs (or time out after `publish_timeout_ms` with a retriable error).

What a door needs: the gateway's Kafka cluster (`bootstrap_servers` and the `kafka` block: an embedded
broker belongs to `gateway run`), the topic registry, and the segments root mounted (Fetch, ListOffsets and
OffsetForLeaderEpoch read the segments; producer ids are allocated in a file beside them). It creates the
gateway's topics when they are missing, as `gateway run` does. `gateway run` with `front_door_address: null`
runs no door of its own. `/readyz` fails while the gateway's Kafka cluster does not answer (checked every
5 s); produce requests meanwhile wait up to `publish_timeout_ms` and are answered with a retriable error,
never acknowledged unwritten.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from kafka_cluster.access import KafkaAccessError
from kafka_cluster.admin import create_topics
from kafka_cluster.registry_store import RegistryStore
from sinks.metrics.health import Health
from sinks.metrics.server import parse_address, serve_metrics
from streaming.config import GatewayConfig, add_config_argument
from streaming.config_file import GatewayConfigError, load_gateway_config
from streaming.config_rules import setting_argument
from streaming.python_heap import settle_heap
from streaming.query import topic_specs
from streaming.registry_sync import open_registry_store

log = logging.getLogger("gateway.door")
READINESS_CHECK_S = 5.0  # how often /readyz asks whether the gateway's Kafka cluster answers


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    door = sub.add_parser("door", help="run a front door on its own, no Spark (clients' Kafka protocol in front of "
                          "the gateway's ingress and response topics)")
    add_config_argument(door)
    door.add_argument("--listen", metavar="HOST:PORT", type=setting_argument("front_door_address"),
                      help="node 1's address (node i on port + i - 1); default: front_door_address of the config")
    door.add_argument("--advertised", metavar="HOST:PORT", type=setting_argument("front_door_advertised_address"),
                      help="what Metadata tells clients for node 1; default: front_door_advertised_address, else "
                      "the bound address")
    door.add_argument("--id", type=setting_argument("front_door_id"), metavar="N", dest="door_id",
                      help="this door's id among several doors (front_door_id; each door its own); default: the "
                      "config's")
    door.add_argument("--metrics-address", metavar="HOST:PORT", type=setting_argument("metrics_address"),
                      help="the door's Prometheus exporter and /healthz, /readyz; default: metrics_address")


def start_front_door(config: GatewayConfig, metrics: FrontDoorMetrics,
                     registry: RegistryStore | None = None) -> FrontDoor | None:
    """The front door of `config` started (None when `front_door_address` is null), serving the topic registry
    `registry` (a store of its own when not given, seeded from topics_file if it never was, closed with it)."""
    if not config.front_door_address:
        return None
    store = registry if registry is not None else open_registry_store(config, seed_if_new=True)
    door = FrontDoor(config.front_door_settings(), store.current, metrics, topic_store=store)
    if registry is None:
        door.on_stop(store.close)
    try:
        door.start()
    except BaseException:
        if registry is None:
            store.close()
        raise
    return door


def run(args: argparse.Namespace) -> int:
    # the options checked with the settings they stand for (GatewayConfigError: a line per problem, exit 2)
    config = load_gateway_config(args.config, front_door_address=args.listen,
                                 front_door_advertised_address=args.advertised, metrics_address=args.metrics_address,
                                 front_door_id=args.door_id)
    if not config.bootstrap_servers:
        raise GatewayConfigError(args.config, ["bootstrap_servers is not set: gateway door needs the gateway's Kafka "
                                               "cluster (an embedded broker belongs to the `gateway run` that started "
                                               "it)"])
    if not config.front_door_address:
        raise GatewayConfigError(args.config, ["front_door_address is null: gateway door needs an address to listen on "
                                               "(or --listen)"])
    health = Health()
    metrics = FrontDoorMetrics()
    try:
        parse_address(config.metrics_address)
        server = serve_metrics(metrics, config.metrics_address, health)
    except (OSError, ValueError) as e:
        log.error("metrics address %s: %s", config.metrics_address, e)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    door: FrontDoor | None = None
    try:
        create_topics(config.cluster, topic_specs(config))
        door = start_front_door(config, metrics)
        assert door is not None and door.context is not None
        nodes = ", ".join(f"{n.node_id}={n.host}:{n.port}" for n in door.context.nodes)
        health.set(ready=True, detail=f"front door: nodes {nodes}")
        log.info("front door nodes %s in front of %s (ingress '%s', responses '%s'); metrics on %s. Ctrl-C stops.",
                 nodes, config.bootstrap_servers, config.ingress_topic, config.response_topic, server.url)
        settle_heap()  # what the start made lives as long as the door (streaming/python_heap.py)
        while not stop.wait(READINESS_CHECK_S):
            problem = door.cluster_problem(READINESS_CHECK_S)
            serving = f"front door: nodes {nodes}"
            if problem is not None and health.state.ready:
                log.warning("not ready: %s (produce requests are answered with retriable errors)", problem)
            elif problem is None and not health.state.ready:
                log.info("ready again: the gateway's Kafka cluster answers")
            health.set(ready=problem is None, detail=serving if problem is None else f"front door: {problem}")
        return 0
    except (KafkaAccessError, OSError, ValueError, RuntimeError) as e:
        log.error("the front door cannot start: %s", e)
        return 2
    finally:
        log.info("stopping ...")
        health.set(ready=False, detail="stopping")
        if door is not None:
            door.stop()
        server.stop()
        log.info("stopped.")
