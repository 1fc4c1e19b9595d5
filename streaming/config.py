"""Gateway-wide settings (conf/gateway.json); the topic registry lives in conf/topics.json."""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.limits import KAFKA_SOCKET_REQUEST_MAX_BYTES, IngressLimits
from contract.repository import REPO_ROOT
from contract.topics import (
    DEFAULT_DLQ_TOPIC,
    DEFAULT_GROUPS_TOPIC,
    DEFAULT_INGRESS_TOPIC,
    DEFAULT_RESPONSE_TOPIC,
    DEFAULT_SECURITY_TOPIC,
)
from contract.topics import (
    registry_topic as default_registry_topic,
)
from contract.topics import (
    transaction_state_topic as default_transaction_state_topic,
)
from front_door.cluster.door_cluster import DEFAULT_SESSION_TIMEOUT_MS
from front_door.cluster.leadership import DEFAULT_NODES
from kafka_cluster.access import RequiredAcl, gateway_acls
from kafka_cluster.publisher import DEFAULT_PUBLISH_TIMEOUT_MS
from kafka_cluster.security import (
    DEFAULT_GROUP_PREFIX,
    KafkaCluster,
    KafkaSecurity,
    load_kafka_security,
)
from sinks.metrics.log_summary import DEFAULT_INTERVAL_MS as DEFAULT_LOG_SUMMARY_INTERVAL_MS
from validators.topic_config import TopicRegistry
from validators.transaction_state import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

if TYPE_CHECKING:  # the driver's front door; executors import this module without it
    from front_door.security.config import FrontDoorSecurity
    from front_door.security.listeners import Listener
    from front_door.settings import FrontDoorSettings


DEFAULT_STARTUP_TIMEOUT_MS = 120000
DEFAULT_CONFIG = REPO_ROOT / "conf" / "gateway.json"
# Settings of earlier versions, ignored with a warning saying what replaced them.
REMOVED_SETTINGS = {
    "ingress_max_message_bytes": "the ingress hop's limits follow front_door_max_request_bytes and the "
                                 "topics' max.message.bytes (contract/limits.py; docs/clients.md: sizes and limits)",
}


@dataclass(frozen=True)
class GatewayConfig:
    bootstrap_servers: str | None = None  # None: start a local broker
    # How every client of the gateway authenticates to that cluster, in Kafka's client property names
    # (kafka_cluster/security.py; docs/security.md): security.protocol, sasl.*, ssl.*; secrets as ${file:…}
    # or ${env:…}. Empty: PLAINTEXT.
    kafka: dict[str, str] = field(default_factory=dict)
    # Every consumer group id of the gateway and its commands begins with it: one prefixed READ ACL on groups.
    consumer_group_prefix: str = DEFAULT_GROUP_PREFIX
    local_broker_port: int = 9092
    local_broker_dir: str = "var/kafka"
    ingress_topic: str = DEFAULT_INGRESS_TOPIC
    ingress_partitions: int = 3
    response_topic: str = DEFAULT_RESPONSE_TOPIC
    dlq_topic: str = DEFAULT_DLQ_TOPIC
    # the front door's consumer groups and committed offsets (a compacted topic, as Kafka's __consumer_offsets)
    groups_topic: str = DEFAULT_GROUPS_TOPIC
    # the front door's users (SCRAM credentials) and ACLs, shared by every door (a compacted topic)
    security_topic: str = DEFAULT_SECURITY_TOPIC
    # Where several front doors register and find each other (a compacted topic; docs/deployment.md); null:
    # each door is a cluster of its own, as one door needs
    doors_topic: str | None = None
    # The topic registry's compacted topic on that cluster (null: `<ingress_topic>.topics`), seeded from
    # `topics_file` at first start; a later change of the file is applied to it as the same change through
    # the admin APIs would be (docs/configuration.md: the topic registry)
    registry_topic: str | None = None
    # the front doors' transaction coordinator state (`front_door/transactions/store.py`); None: named after the
    # ingress topic (`contract.topics.transaction_state_topic`)
    transaction_state_topic: str | None = None
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS  # Kafka's transaction.max.timeout.ms
    topics_file: str = "conf/topics.json"
    segments_root: str = "var/segments"
    checkpoint_root: str = "checkpoints"
    query_name: str = "gateway"
    # local[N,F]: like a cluster, retry a failed task up to F times (plain local[N] never retries)
    spark_master: str = "local[*,4]"
    # Any Spark setting (spark.executor.memory, spark.executor.cores, spark.cores.max, ...); `gateway run
    # --conf key=value` adds to it. Settings given to spark-submit take precedence over both.
    spark_conf: dict[str, str] = field(default_factory=dict)
    # The packed Python environment for executors (`make pack`: venv-pack of .venv), shipped with the job
    # (spark.archives) and unpacked on each executor as ./environment; None: executors run the driver's
    # interpreter path, which must then exist on every host. Used only with a cluster master.
    python_archive: str | None = None
    # Tasks of the stateful stage (and of the sink: the same tasks). Each task has a fixed cost per
    # micro-batch (a state store, two Python workers), paid even when it holds no partition: one task
    # answers a lone produce fastest (~20 % shorter micro-batches than two on 2 cores), one per executor
    # core drains a backlog fastest (~10 % more at 10 000-batch micro-batches on 2 cores; on a cluster, set
    # it to the executors' cores). Fixed by the checkpoint once a query has run (Spark keeps its state
    # partitioning).
    shuffle_partitions: int = 1
    # Spark's processing-time trigger. "0 seconds": each micro-batch starts as soon as the last one ends,
    # so a produce waits one micro-batch, not a trigger interval (a producer's throughput is its bytes in
    # flight / this round trip). An idle query then asks the ingress topic for new data every
    # `idle_poll_ms` (Spark's spark.sql.streaming.pollingDelay; each ask is a ListOffsets to the broker).
    trigger_interval: str = "0 seconds"
    idle_poll_ms: int = 20
    max_offsets_per_trigger: int = 20000
    metrics_address: str = "127.0.0.1:9108"
    # The INFO summary of the micro-batches (sinks/metrics/log_summary.py): at most one line per this interval.
    log_summary_interval_ms: int = DEFAULT_LOG_SUMMARY_INTERVAL_MS
    # Each micro-batch's JSON line (the DEBUG line of `gateway.metrics`) appended to this file too; null: none.
    metrics_log_file: str | None = None
    # Kafka's log.retention.check.interval.ms: how often retention runs over the segment storage (`UnifiedLog.deleteRetentionMsBreachedSegments`)
    retention_check_interval_ms: int = 300000
    ui_enabled: bool = True
    # The supervisor (streaming/supervisor.py): restart a failed query after this delay, doubling per
    # failed restart up to the maximum; reset once a restarted query completes a micro-batch.
    # How long the sink waits for the broker to acknowledge a micro-batch's responses and dead letters
    # before the task fails (Spark retries it; then the supervisor restarts the query).
    publish_timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS
    restart_backoff_initial_s: float = 1.0
    restart_backoff_max_s: float = 60.0
    # How long `gateway run` (and a standby's start) keeps asking a Kafka cluster that does not answer yet
    # (starting, or busy creating partitions) at its start-up check before giving up (kafka_cluster/access.py).
    startup_timeout_ms: int = DEFAULT_STARTUP_TIMEOUT_MS
    # A cluster master: check at start that segments_root is one filesystem seen by every executor.
    check_shared_storage: bool = True
    # The Kafka front door (docs/kafka-compatibility.md; port 0 picks free ports; null: none). Clients are told the
    # advertised address in Metadata (default: the bound one); larger requests close the connection
    # (Kafka's socket.request.max.bytes). The ingress hop's limits follow it (`ingress_limits`).
    front_door_address: str | None = "127.0.0.1:9093"
    front_door_advertised_address: str | None = None
    front_door_max_request_bytes: int = KAFKA_SOCKET_REQUEST_MAX_BYTES
    # Front-door nodes (brokers) 1..N, each with its own listener on front_door_address's port + i - 1 and
    # advertised on front_door_advertised_address's port + i - 1; a topic's partitions spread over them
    # (front_door/cluster/leadership.py), so a client pipelines on N connections. 1: one broker leads everything.
    front_door_nodes: int = DEFAULT_NODES
    # This door's id among the doors on doors_topic (Kafka's node.id): door d's nodes have ids
    # (d - 1) * 100 + 1 onwards; each door needs its own. A door silent for front_door_session_timeout_ms
    # (Kafka's broker.session.timeout.ms) is fenced: its partitions and groups move to the others.
    front_door_id: int = 1
    front_door_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    # Kafka's group.initial.rebalance.delay.ms: a group that was empty waits this long (more while members
    # keep arriving, up to their rebalance timeout) before its first generation, so consumers that start
    # together get one rebalance, not one each.
    group_initial_rebalance_delay_ms: int = 3000
    # The front door's listeners, TLS, SASL and ACLs in Kafka's broker property names (`listeners`,
    # `ssl.keystore.location`, `sasl.enabled.mechanisms`, `authorizer.class.name`, `super.users`, ...;
    # docs/security.md). Empty: one PLAINTEXT listener on front_door_address.
    front_door_security: dict[str, Any] = field(default_factory=dict)
    # A listener beyond loopback with neither TLS nor SASL lets anyone in: refused at start unless true.
    front_door_allow_unauthenticated: bool = False

    @property
    def registry_topic_name(self) -> str:
        return self.registry_topic or default_registry_topic(self.ingress_topic)

    @property
    def transaction_state_topic_name(self) -> str:
        return self.transaction_state_topic or default_transaction_state_topic(self.ingress_topic)

    def ingress_limits(self, registry: TopicRegistry | None = None) -> IngressLimits:
        """The sizes of the gateway's own hops (`contract.limits`): from front_door_max_request_bytes and
        the largest max.message.bytes of the registry (read from `topics_file` when not given)."""
        if registry is None:
            registry = TopicRegistry.load(self.path(self.topics_file))
        return IngressLimits(self.front_door_max_request_bytes, registry.largest_max_message_bytes)

    def front_door_settings(self, listen: str | None = None) -> FrontDoorSettings:
        """The front door's settings for this gateway (`listen` overrides `front_door_address`)."""
        from front_door.groups.coordinator_api import GroupSettings
        from front_door.settings import FrontDoorSettings
        from front_door.transactions.coordinator import TransactionSettings

        return FrontDoorSettings(
            listen=listen or self.front_door_address or "127.0.0.1:0", advertised=self.front_door_advertised_address,
            cluster=self.cluster, ingress_topic=self.ingress_topic,
            response_topic=self.response_topic, segments_root=self.path(self.segments_root),
            publish_timeout_ms=self.publish_timeout_ms,
            ingress_max_message_bytes=self.ingress_limits().ingress_message_bytes,
            max_request_bytes=self.front_door_max_request_bytes, nodes=self.front_door_nodes,
            free_port_fallback=True, groups_topic=self.groups_topic, registry_file=str(self.path(self.topics_file)),
            groups=GroupSettings(initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms),
            security=self.door_security, security_topic=self.security_topic,
            door_id=self.front_door_id, doors_topic=self.doors_topic,
            door_session_timeout_ms=self.front_door_session_timeout_ms,
            transaction_state_topic=self.transaction_state_topic_name,
            transactions=TransactionSettings(max_timeout_ms=self.transaction_max_timeout_ms),
        )

    @functools.cached_property
    def door_security(self) -> FrontDoorSecurity:
        """The resolved `front_door_security` block; KafkaSecurityError (a ValueError) naming a wrong setting."""
        from front_door.security.config import load_front_door_security

        return load_front_door_security(self.front_door_security, REPO_ROOT)

    def door_listeners(self) -> tuple[Listener, ...]:
        """The door's listeners: front_door_security's, else one PLAINTEXT listener on front_door_address; none
        without a front_door_address."""
        from front_door.security.listeners import plaintext_listener

        if not self.front_door_address:
            return ()
        return self.door_security.listeners or (
            plaintext_listener(self.front_door_address, self.front_door_advertised_address),)

    def exposed_listeners(self) -> list[str]:
        """The door's listeners that let anyone beyond this host in (no TLS, no SASL, not on loopback)."""
        from front_door.security.config import exposed_unauthenticated

        return [str(li) for li in exposed_unauthenticated(self.door_listeners())]

    def exposure_refusal(self) -> str | None:
        """Why the door may not start as configured (a listener beyond loopback with neither TLS nor SASL, and
        `front_door_allow_unauthenticated` not set), or None."""
        exposed = self.exposed_listeners()
        if not exposed or self.front_door_allow_unauthenticated:
            return None
        return (f"the front door would let anyone in: {', '.join(exposed)} listens beyond loopback with neither TLS "
                "nor SASL. Give it SASL_SSL/SSL/SASL_PLAINTEXT listeners in front_door_security (docs/security.md), "
                "bind it to 127.0.0.1, or set front_door_allow_unauthenticated to true")

    @functools.cached_property
    def kafka_security(self) -> KafkaSecurity:
        """The resolved `kafka` block (secrets read from their files or variables once, here). Raises
        KafkaSecurityError (a ValueError) naming a wrong setting."""
        return load_kafka_security(self.kafka, REPO_ROOT)

    @property
    def cluster(self) -> KafkaCluster:
        """The gateway's Kafka cluster: `bootstrap_servers` with the `kafka` block's security."""
        if not self.bootstrap_servers:
            raise ValueError("bootstrap_servers is not set")
        return KafkaCluster(self.bootstrap_servers, self.kafka_security, self.consumer_group_prefix)

    def required_acls(self) -> list[RequiredAcl]:
        """The ACLs the gateway's principal needs on its cluster (docs/security.md; `gateway acls`)."""
        return gateway_acls(self.ingress_topic, self.response_topic, self.dlq_topic,
                            self.groups_topic if self.front_door_address else None, self.consumer_group_prefix,
                            self.security_topic if self.front_door_address else None,
                            self.doors_topic if self.front_door_address else None, self.registry_topic_name,
                            self.transaction_state_topic_name if self.front_door_address else None)

    def path(self, value: str) -> Path:
        """Relative paths in the config are relative to the repository root."""
        p = Path(value)
        return p if p.is_absolute() else REPO_ROOT / p

    @property
    def checkpoint_location(self) -> Path:
        return self.path(self.checkpoint_root) / self.query_name

    def with_overrides(self, **overrides: Any) -> GatewayConfig:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """Every `gateway` command's `--config`, one definition."""
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, metavar="FILE",
                        help="the gateway config, JSON (docs/configuration.md; default %(default)s)")
