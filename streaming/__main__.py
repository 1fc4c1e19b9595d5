"""The `gateway` command (also `python -m streaming`), one shape for every command group:

    gateway run [--demo]          the gateway as a long-running Spark job
    gateway run --standby         a second driver, ready to take over when the running one stops
    gateway status                what it is doing (metrics endpoint and response topic)
    gateway submit                the same job through spark-submit on the configured cluster
    gateway segments ...          segment storage (sinks/segments_cli.py; also `python -m sinks segments`)
    gateway dlq ...               the dead-letter topic (sinks/dlq/cli.py; also `python -m sinks dlq`)
    gateway acls                  the ACLs the gateway's principal needs on its Kafka cluster (kafka-acls.sh lines)
    gateway client-properties     the `kafka` block as a Java client properties file (Kafka's tools' --command-config)
    gateway users ...             the front door's users on the security topic (streaming/users_command.py)
    gateway door                  a front door on its own, no Spark (streaming/door_command.py)
    gateway --version             the gateway's version

Without bootstrap servers (conf/gateway.json or --bootstrap-servers) it starts a local Apache
Kafka broker first (the embedded default of `make run`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from embedded.demo import HELLO_TOPIC, DemoTraffic, LiveSummary
from embedded.local_kafka import QUICK_START_JVM, LocalKafka, free_port
from front_door.cluster.door_cluster import DuplicateDoorError
from front_door.cluster.security_store import SecurityStoreError
from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from kafka_cluster.access import KafkaAccessError, check_access
from kafka_cluster.admin import create_topics
from kafka_cluster.registry_store import RegistryError, RegistryStore, seed_from_file
from kafka_cluster.security import KafkaSecurityError
from sinks import segments_cli
from sinks.command_line import CommandParser, principal
from sinks.dlq.cli import DlqConfig
from sinks.dlq.cli import main as dlq_main
from sinks.metrics.gateway_metrics import GatewayMetrics
from sinks.metrics.health import Health
from sinks.metrics.metrics_log_file import MetricsLogFile
from sinks.metrics.observer import MetricsObserver
from sinks.metrics.server import MetricsServer, parse_address, serve_metrics
from sinks.time_arguments import protect_relative_times
from storage.log_manager import close_logs
from streaming import door_command, users_command
from streaming.config import REPO_ROOT, GatewayConfig, add_config_argument
from streaming.config_file import GatewayConfigError, load_gateway_config
from streaming.config_rules import setting_argument
from streaming.door_command import start_front_door
from streaming.door_hint import kcat_hint, listeners_line
from streaming.driver_lock import DriverLock
from streaming.listener import GatewayListener
from streaming.logs import configure_logging
from streaming.python_heap import settle_heap
from streaming.query import sink_config, start_gateway, stop_gracefully, topic_specs
from streaming.registry_sync import open_registry_store
from streaming.session import QUICK_START_DRIVER_JVM, build_spark_session, is_local, stop_session
from streaming.shared_storage import SharedStorageError, check_shared_storage
from streaming.standby import KeepWarm, rehearse
from streaming.status import add_arguments as add_status_arguments
from streaming.status import cluster_for, run_status
from streaming.submit import add_arguments as add_submit_arguments
from streaming.submit import run_submit
from streaming.supervisor import Backoff, QuerySupervisor
from streaming.version import gateway_version
from streaming.worker_warm_up import WarmUpBeside, warm_up
from validators.topic_config import ConfigError, TopicRegistry

log = logging.getLogger("gateway")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


GRAFANA_DASHBOARD = REPO_ROOT / "conf" / "grafana" / "dashboards" / "gateway.json"
GRAFANA_PROVISIONING = REPO_ROOT / "conf" / "grafana" / "provisioning"


def _start_observability(
    spark: SparkSession, config: GatewayConfig, registry: TopicRegistry, health: Health
) -> tuple[GatewayMetrics, MetricsServer, GatewayListener]:
    """Metrics exporter and health probes on config.metrics_address (a free port if that one is taken)
    and the query listener, registered before the query starts so it sees the start event."""
    metrics = GatewayMetrics.for_registry(registry, config.path(config.segments_root))
    metrics.describe_query(config.query_name, gateway_version())
    try:
        server = serve_metrics(metrics, config.metrics_address, health)
    except OSError as e:
        host, _ = parse_address(config.metrics_address)
        server = serve_metrics(metrics, f"{host}:0", health)
        log.warning("metrics address %s unavailable (%s); using %s", config.metrics_address, e, server.url)
    listener = GatewayListener(metrics, config.query_name, config.ingress_topic)
    spark.streams.addListener(listener)
    return metrics, server, listener


def _start_spark_and_broker(config: GatewayConfig, on_session: Callable[[SparkSession], None] | None = None,
                            ) -> tuple[SparkSession, LocalKafka | None, GatewayConfig]:
    """Spark's JVM and (without bootstrap servers) the local broker's JVM start side by side (each takes
    seconds; the session needs nothing from the broker); then the gateway's topics are created. `on_session`:
    called with the session as soon as it is up."""
    begun = time.monotonic()
    with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        spark_start = pool.submit(build_spark_session, config,
                                  driver_jvm=() if config.bootstrap_servers else QUICK_START_DRIVER_JVM)
        # the start's other floor beside the broker's line (docs/performance.md, make run's first response)
        spark_start.add_done_callback(lambda done: not done.cancelled() and done.exception() is None and log.info(
            "Spark %s session up (%s) in %.1fs", done.result().version, config.spark_master,
            time.monotonic() - begun))
        if on_session is not None:
            spark_start.add_done_callback(lambda done: not done.cancelled() and done.exception() is None
                                          and on_session(done.result()))
        broker = None
        absent: set[str] = set()
        try:
            if not config.bootstrap_servers:
                port = config.local_broker_port if _port_free(config.local_broker_port) else free_port()
                broker = LocalKafka(config.path(config.local_broker_dir), port=port, limits=config.ingress_limits(),
                                    jvm=QUICK_START_JVM)
                broker.start()
                config = config.with_overrides(bootstrap_servers=broker.bootstrap_servers)
                log.info("local Apache Kafka broker on %s (log: %s)", broker.bootstrap_servers, broker.log_path)
            else:  # a cluster of the operator's: a refused login or a missing ACL stops here, saying what to fix;
                # one that does not answer yet (starting, busy) is asked again for up to startup_timeout_ms
                log.info("Kafka cluster %s (%s)", config.bootstrap_servers, config.cluster.security.describe())
                absent = check_access(config.cluster, config.required_acls(), config.startup_timeout_ms / 1000)
            create_topics(config.cluster, topic_specs(config))
            if absent:  # the ACLs of the topics just created
                check_access(config.cluster, config.required_acls(), config.startup_timeout_ms / 1000)
        except BaseException:
            if not spark_start.cancel():
                spark_start.result().stop()
            if broker is not None:
                broker.stop()
            raise
        return spark_start.result(), broker, config


def _start_front_door(config: GatewayConfig, metrics: GatewayMetrics,
                      registry: RegistryStore | None = None) -> FrontDoor | None:
    """The Kafka front door beside the query (a node whose port is taken gets a free one, with a warning)."""
    door = start_front_door(config, FrontDoorMetrics(metrics.registry), registry)
    if door is None:
        return None
    assert door.address is not None and door.context is not None
    topics = door.context.registry().topics
    topic = HELLO_TOPIC if HELLO_TOPIC in topics else next(iter(sorted(topics)), "<topic>")
    log.info("front door on %s:%d", door.address.host, door.address.port)
    log.info("front door nodes (each leads a share of every topic's partitions): %s",
             ", ".join(f"{n.node_id}={n.host}:{n.port}" for n in door.context.nodes))
    listeners = door.advertised_listeners()
    if len(listeners) > 1:
        log.info("front door listeners (node i on port + i - 1): %s", listeners_line(listeners))
    log.info("%s", kcat_hint(listeners, door.settings.security, topic))
    return door


def _open_front_door(config: GatewayConfig, metrics: GatewayMetrics, lock: DriverLock,
                     registry: RegistryStore) -> FrontDoor | None:
    """`_start_front_door`, then its address recorded beside the driver lock (`gateway status` shows it)."""
    door = _start_front_door(config, metrics, registry)
    address = door.address if door is not None else None
    try:
        lock.record(f"{address.host}:{address.port}" if address is not None else "")
    except OSError as e:  # only who holds the lock goes unrecorded; the lock itself is held
        log.warning("cannot record this driver in %s: %s", lock.holder_path, e)
    return door


def _in_jvm(what: str, call: Callable[[], object]) -> None:
    """A shutdown step that talks to Spark's JVM. A SIGTERM sent to the whole process group (timeout,
    systemd, a container stop) reaches the JVM too, which may be gone already: say so, go on stopping."""
    try:
        call()
    except Py4JError as e:
        log.warning("%s: Spark's JVM is gone (%s)", what, type(e).__name__)


def _close_logs(config: GatewayConfig, registry: RegistryStore) -> None:
    """Close the partition logs as a cleanly stopped Kafka broker does (final time-index entries)."""
    try:
        closed = close_logs(config.path(config.segments_root), registry.current())
    except (OSError, ValueError) as e:  # the next append recovers; the stop must go on
        log.error("closing the partition logs failed: %s", e)
        return
    log.info("closed %d partition log(s) cleanly", closed)


def _start_demo(config: GatewayConfig, started: float) -> list[Any]:
    summary = LiveSummary(config.cluster, config.response_topic, config.path(config.segments_root),
                          on_first_response=lambda: log.info("first response %.1f s after start",
                                                             time.monotonic() - started))
    summary.start()
    demo = DemoTraffic(config.cluster, config.ingress_topic)
    demo.start()
    return [demo, summary]


def _stand_by(spark: SparkSession, config: GatewayConfig, lock: DriverLock, stop: threading.Event, health: Health,
              started: float) -> bool:
    """A standby's wait: Python workers warmed, the query's plan rehearsed, then the driver lock; False when
    stopped first."""
    sink = sink_config(config)
    try:
        warmed = warm_up(spark, sink).seconds
        rehearsed = rehearse(spark, config)
    except Exception as e:  # a cold start at takeover is slower, not wrong
        log.warning("standby: warming up failed (%s); the query starts cold at takeover", e)
        warmed, rehearsed = 0.0, None
    holder = lock.holder()
    who = holder.describe() if holder else "unknown"
    health.set(ready=False, detail=f"standby: waiting for the active driver ({who})")
    log.info("standby: ready %.1f s after start (Python workers warmed in %.1f s, the query's plan rehearsed in %s); "
             "waiting for the active driver (%s) to stop", time.monotonic() - started, warmed,
             f"{rehearsed:.1f} s" if rehearsed is not None else "- (no topics in the registry)", who)
    waiting = time.monotonic()
    keep_warm = KeepWarm(spark, sink)
    keep_warm.start()
    try:
        if not lock.wait(stop):
            return False
    finally:
        keep_warm.stop()  # a warm-up under way finishes beside the query's start
    log.warning("standby: the active driver is gone after %.1f s of waiting (kept warm %d time(s)); taking over "
                "(front door, query from the checkpoint)", time.monotonic() - waiting, keep_warm.runs)
    return True


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    # every setting checked before a JVM starts (GatewayConfigError: one line each, exit 2, from `main`)
    config = load_gateway_config(args.config, bootstrap_servers=args.bootstrap_servers, spark_master=args.master)
    config = config.with_overrides(spark_conf={**config.spark_conf, **dict(args.conf)})
    try:
        metrics_log = MetricsLogFile.open(config.path(config.metrics_log_file)) if config.metrics_log_file else None
    except OSError as e:  # the file, or the folder it would be made in
        raise GatewayConfigError(args.config, [f"metrics_log_file = {json.dumps(config.metrics_log_file)}: cannot "
                                               f"write it ({f'{e.filename}: {e.strerror}' if e.filename else e})"]) from None
    lock = DriverLock(config.checkpoint_location)
    if args.standby and not config.bootstrap_servers:
        raise GatewayConfigError(args.config, ["bootstrap_servers is not set: --standby needs the active driver's "
                                               "Kafka cluster (or --bootstrap-servers; an embedded broker belongs to "
                                               "the driver that started it)"])
    if not args.standby and not lock.try_acquire():
        holder = lock.holder()
        log.error("another driver runs query '%s' on checkpoint %s (%s): stop it first, or start this one with "
                  "--standby to take over when it stops", config.query_name, config.checkpoint_location,
                  holder.describe() if holder else "who is not recorded")
        return 2
    warming = None if args.standby else WarmUpBeside()  # a standby warms up, and keeps warm, while it waits
    try:
        spark, broker, config = _start_spark_and_broker(config, warming.begin if warming else None)
    except KafkaAccessError as e:
        log.error("%s", e)
        return 2
    if warming is not None:
        warming.connect(sink_config(config))
    health = Health()
    # The topic registry on the cluster, seeded from topics_file (new topics get their own metric labels)
    try:
        registry = open_registry_store(config)
        seed_from_file(registry, str(config.path(config.topics_file)))
    except (RegistryError, ConfigError) as e:
        log.error("%s", e)
        with contextlib.suppress(NameError):
            registry.close()
        _in_jvm("stopping Spark", lambda: stop_session(spark))
        if broker is not None:
            broker.stop()
        return 2
    metrics, metrics_server, listener = _start_observability(spark, config, registry.current(), health)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # Kubernetes: stop between micro-batches
    # one observer for the driver's life: its summary's interval runs on across the query's restarts
    observer = MetricsObserver(metrics, registry.current, config.log_summary_interval_ms / 1000, metrics_log)
    supervisor = QuerySupervisor(
        lambda: start_gateway(spark, config, observers=[observer], metrics=metrics, registry_store=registry)[0],
        stop, health, metrics, Backoff(config.restart_backoff_initial_s, config.restart_backoff_max_s),
    )
    background: list[Any] = []
    front_door: FrontDoor | None = None
    opening: Future[FrontDoor | None] | None = None
    try:
        if config.check_shared_storage and not is_local(spark.sparkContext.master):
            hosts = check_shared_storage(spark, config.path(config.segments_root))
            log.info("segments root %s is shared with the executors on %s", config.segments_root, ", ".join(hosts))
        if args.standby and not _stand_by(spark, config, lock, stop, health, started):
            return 0
        # The door and the query start side by side: neither needs the other, and each takes seconds.
        door_start = ThreadPoolExecutor(1, thread_name_prefix="front-door-start")
        opening = door_start.submit(_open_front_door, config, metrics, lock, registry)
        opening.add_done_callback(lambda done: done.exception() is not None and stop.set())
        door_start.shutdown(wait=False)
        log.info("query '%s'; checkpoint %s; segments %s; responses on '%s', dead letters on '%s'. Ctrl-C stops.",
                 config.query_name, config.checkpoint_location, config.path(config.segments_root),
                 config.response_topic, config.dlq_topic)
        log.info("metrics on %s, health on %s/healthz and /readyz; Grafana dashboard %s (provisioning %s); "
                 "`gateway status` for a terminal view", metrics_server.url, metrics_server.base_url,
                 GRAFANA_DASHBOARD, GRAFANA_PROVISIONING)
        if args.demo:
            background = _start_demo(config, started)
        settle_heap()  # what the start made lives as long as the driver (streaming/python_heap.py)
        code = supervisor.run()
        front_door = opening.result()  # a door that could not open: its error, below
        return code
    except (SharedStorageError, SecurityStoreError, KafkaSecurityError, DuplicateDoorError) as e:
        log.error("%s", e)
        return 2
    except Py4JError as e:
        log.error("Spark's JVM is gone (%s): a signal to the whole process group stops it with the driver",
                  type(e).__name__)
        return 1
    finally:
        log.info("stopping ...")
        for t in background:
            t.stop()
        if opening is not None and front_door is None:
            with contextlib.suppress(Exception):  # its error is reported above
                front_door = opening.result()
        if front_door is not None:
            front_door.stop()
        if supervisor.query is not None:
            _in_jvm("stopping the query", lambda: stop_gracefully(supervisor.query))
        if lock.held:  # a standby that never took over leaves the active driver's logs alone
            _close_logs(config, registry)
            lock.release()  # a standby may start the query now: this one has stopped and closed its logs
        registry.close()
        _in_jvm("removing the listener", lambda: spark.streams.removeListener(listener))
        metrics_server.stop()
        _in_jvm("stopping Spark", lambda: stop_session(spark))
        if broker is not None:
            broker.stop()
        log.info("stopped.")


def print_acls(args: argparse.Namespace) -> int:
    """`gateway acls`: the kafka-acls.sh lines that give the gateway's principal what it needs."""
    config = load_gateway_config(args.config)
    principal = args.principal or (f"User:{config.kafka['sasl.username']}" if config.kafka.get("sasl.username")
                                   else "User:gateway")
    bootstrap = config.bootstrap_servers or "<bootstrap>"
    for acl in config.required_acls():
        print(acl.command(bootstrap, principal))
    return 0


def write_client_properties(args: argparse.Namespace) -> int:
    """`gateway client-properties`: Kafka's tools connect as the gateway does (kafka_cluster/security.py)."""
    text = load_gateway_config(args.config).kafka_security.command_config()
    try:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError as e:
        log.error("cannot write %s: %s", args.output, e.strerror or e)
        return 2
    log.info("wrote %s: pass it to Kafka's tools as --command-config", args.output)
    return 0


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


EPILOG = "exit status: 0 done; 1 Spark's JVM died; 2 bad arguments or configuration, or a failure a restart cannot fix"


def build_parser() -> argparse.ArgumentParser:
    """The `gateway` command's parser (`dlq` is listed here; its options are parsed by `sinks.dlq.cli`)."""
    parser = CommandParser(prog="gateway", description=__doc__.split("\n\n")[0], epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {gateway_version()}")
    sub = parser.add_subparsers(dest="group", required=True)
    sub.add_parser("dlq", help="dead letters: stats, list, show, replay (gateway dlq --help)")
    segments_cli.register(sub)
    r = sub.add_parser("run", help="run the gateway query", epilog=EPILOG)
    add_config_argument(r)
    r.add_argument("--bootstrap-servers", type=setting_argument("bootstrap_servers"),
                   help="use this Kafka cluster instead of starting a local broker")
    r.add_argument("--master", type=setting_argument("spark_master"),
                   help="Spark master (default from config: local[*,4])")
    r.add_argument("--conf", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting (repeatable), added to the config's spark_conf")
    r.add_argument("--demo", action="store_true", help="feed demo batches and print a live summary")
    r.add_argument("--standby", action="store_true",
                   help="get ready, wait until the driver running this query stops, then take over")
    sm = sub.add_parser("submit", help="print and run the spark-submit command for the configured cluster")
    add_submit_arguments(sm)
    st = sub.add_parser("status", help="query state, last progress, ingress lag, outcomes and recent errors")
    add_status_arguments(st)
    ac = sub.add_parser("acls", help="the kafka-acls.sh lines granting the ACLs the gateway needs on its cluster")
    add_config_argument(ac)
    ac.add_argument("--principal", type=principal,
                    help="the gateway's principal (default: User:<kafka.sasl.username>, else User:gateway; a client "
                    "certificate's is the broker's mapping of its subject, e.g. User:CN=gw)")
    cp = sub.add_parser("client-properties", help="write the config's kafka block as a Java client properties "
                        "file, for Kafka's tools (--command-config) as the gateway's principal")
    add_config_argument(cp)
    cp.add_argument("--output", type=Path, required=True, help="the file to write (mode 0600: it holds secrets)")
    users_command.register(sub)
    door_command.register(sub)
    return parser


def _dlq_config(path: Path, bootstrap_servers: str | None) -> DlqConfig:
    """What `gateway dlq --config` takes from a gateway config, every setting of it checked."""
    config = load_gateway_config(path)
    cluster = cluster_for(config.with_overrides(bootstrap_servers=bootstrap_servers))
    return DlqConfig(cluster, config.dlq_topic, config.ingress_topic)


def main(argv: list[str] | None = None) -> int:
    """The command's exit status; a gateway config that cannot be used is one `error:` line per problem, 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["dlq"]:  # the dead-letter command parses its own options
            return dlq_main(argv[1:], prog="gateway dlq", read_config=_dlq_config)
        configure_logging()
        return _run_command(build_parser().parse_args(protect_relative_times(argv)))
    except GatewayConfigError as e:
        for line in e.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2


def _run_command(args: argparse.Namespace) -> int:
    if args.group == "acls":
        return print_acls(args)
    if args.group == "client-properties":
        return write_client_properties(args)
    if args.group == "status":
        return run_status(args)
    if args.group == "submit":
        return run_submit(args)
    if args.group == "segments":
        return segments_cli.run(args)
    if args.group == "users":
        return users_command.run(args)
    if args.group == "door":
        return door_command.run(args)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
