"""Creating the gateway's topics on any Kafka cluster (Admin API) and waiting until every partition has a
serving leader, so the query's first fetch and the first publish never race the topics' creation.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.kafka_admin")

# (topic name, partition count, topic configs)
TopicSpec = tuple[str, int, Mapping[str, str]]
# Topic configs a spec gives as a lower bound: a topic that already exists with a smaller value is raised
# to it (never lowered). max.message.bytes: the gateway's topics must carry its largest batch
# (contract.limits); an ingress topic made for a smaller front door would refuse what the door accepts.
RAISED_CONFIGS = ("max.message.bytes",)


_RETRIABLE_METADATA_ERRORS = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,  # a just-created partition's leader epoch not yet known
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._UNKNOWN_PARTITION,  # the client's metadata does not hold a just-created partition yet
    }
)


def transient(error: object) -> bool:
    """Whether a KafkaException's error passes by itself: a leader moving or briefly fenced, a partition just
    created, a request timed out (Kafka's clients retry these, `RetriableException`)."""
    return isinstance(error, KafkaError) and (error.code() in _RETRIABLE_METADATA_ERRORS or error.retriable())


class MissingTopicError(ValueError):
    """A topic the cluster's metadata does not show (or shows with an error), named with what it is for."""


def end_offsets(consumer: Consumer, topic: str, timeout_s: float, what: str = "topic") -> dict[int, int]:
    """Every partition of `topic` with its high watermark (`watermarks`): where a reader of only what comes next
    starts. MissingTopicError ("<what> <topic> does not exist") when the metadata does not show it."""
    meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise MissingTopicError(f"{what} {topic} does not exist"
                                + (f" ({meta.error})" if meta is not None and meta.error else ""))
    return {p: watermarks(consumer, topic, p, timeout_s)[1] for p in sorted(meta.partitions)}


def watermarks(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
    """A partition's (low, high) watermarks, a transient error retried until `timeout_s` has passed: a
    one-node cluster starved of CPU fences its own broker for a few seconds, and a start-up must ride that out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                       timeout=max(0.5, remaining_s(deadline)))
            return low, high
        except KafkaException as e:
            if not transient(e.args[0]) or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)  # a retry's backoff (Kafka's retry.backoff.ms), bounded by the deadline


@contextlib.contextmanager
def admin_client(cluster: KafkaCluster) -> Iterator[AdminClient]:
    """An Admin client whose librdkafka lines go through `KAFKA_CLIENT_LOG` (not bare on stderr): an admin
    client's lines are served by `poll`, called as it is let go. What it logs as it is destroyed, when nothing
    serves its queue any more (`Purging N unserved events`), is dropped."""
    admin = AdminClient(cluster.client({"logger": KAFKA_CLIENT_LOG}))
    try:
        yield admin
    finally:
        admin.poll(0)


def create_topics(cluster: KafkaCluster, specs: Iterable[TopicSpec], timeout: float = 60.0) -> None:
    """Create topics (name, partitions, configs) and wait until every partition has a serving leader.

    Idempotent: a topic that already exists keeps its partitions and configs, except that a
    `RAISED_CONFIGS` value below the spec's is raised to it (Admin API IncrementalAlterConfigs); where the
    cluster refuses that, an error says what to run. Replication factor is the cluster's
    `default.replication.factor`.
    """
    specs = list(specs)
    if not specs:
        return
    deadline = time.monotonic() + timeout
    with admin_client(cluster) as admin:
        new_topics = [
            NewTopic(name, num_partitions=partitions, config={k: str(v) for k, v in configs.items()})
            for name, partitions, configs in specs
        ]
        futures = admin.create_topics(new_topics, operation_timeout=timeout, request_timeout=timeout)
        existing = set()
        for name, future in futures.items():
            try:
                future.result(timeout=remaining_s(deadline))
            except KafkaException as exc:
                code = exc.args[0].code()
                # A principal without CREATE may still use topics an administrator made (docs/security.md).
                if code in _NOT_ALLOWED_TO_CREATE and _exists(admin, name, deadline):
                    log.info("topic %s exists (this principal may not create topics; it need not)", name)
                elif code in _NOT_ALLOWED_TO_CREATE:
                    raise KafkaException(KafkaError(code, f"topic {name} does not exist and the cluster refuses to "
                                                          f"create it ({exc.args[0].str()}): create it, or grant the "
                                                          "gateway's principal CREATE on the cluster (`gateway acls`)")) from None
                elif code != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
                log.debug("topic %s already exists", name)
                existing.add(name)
        raise_lower_bounds(cluster, admin, [s for s in specs if s[0] in existing], deadline)
        wait_for_partition_leaders(admin, [name for name, _, _ in specs], deadline)


_NOT_ALLOWED_TO_CREATE = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def _exists(admin: AdminClient, topic: str, deadline: float) -> bool:
    described = admin.list_topics(topic=topic, timeout=max(1.0, remaining_s(deadline))).topics.get(topic)
    return described is not None and described.error is None and bool(described.partitions)


def raise_lower_bounds(cluster: KafkaCluster, admin: AdminClient, specs: Sequence[TopicSpec], deadline: float) -> None:
    """Raise the `RAISED_CONFIGS` of existing topics that are below their spec's value. Nothing here fails
    the start: a cluster that refuses (no ALTER_CONFIGS permission, say) gets an error line with the
    kafka-configs command that does it."""
    wanted = {name: {k: int(v) for k, v in configs.items() if k in RAISED_CONFIGS} for name, _, configs in specs}
    wanted = {name: bounds for name, bounds in wanted.items() if bounds}
    if not wanted:
        return
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name) for name in wanted],
                                       request_timeout=max(1.0, remaining_s(deadline)))
    for resource, future in described.items():
        name = resource.name
        try:
            entries = future.result(timeout=max(1.0, remaining_s(deadline)))
            low = {k: v for k, v in wanted[name].items() if k in entries and int(entries[k].value) < v}
        except KafkaException as exc:
            log.error("cannot read the configs of topic %s to check %s: %s", name, ", ".join(wanted[name]), exc)
            continue
        if not low:
            continue
        alter = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in low.items()])
        settings = ",".join(f"{k}={v}" for k, v in low.items())
        try:
            admin.incremental_alter_configs([alter], request_timeout=max(1.0, remaining_s(deadline)))[alter].result(
                timeout=max(1.0, remaining_s(deadline)))
        except KafkaException as exc:
            log.error(
                "topic %s exists with %s, below what the gateway needs (%s), and the cluster refused to raise it "
                "(%s). Until it is raised, batches larger than the topic takes get MESSAGE_TOO_LARGE at the front "
                "door, or fail the sink's dead-letter publish. Run: kafka-configs.sh --bootstrap-server %s --alter "
                "--entity-type topics --entity-name %s --add-config %s",
                name, ", ".join(f"{k}={entries[k].value}" for k in low), settings, exc, cluster, name,
                settings)
            continue
        log.warning("topic %s existed with %s; raised to %s (what the gateway's largest batch needs)",
                    name, ", ".join(f"{k}={entries[k].value}" for k in low), settings)


@dataclass(frozen=True)
class HopLimits:
    """What a cluster lets through to one topic, as its configs say (None: could not be read)."""

    topic_max_message_bytes: int | None  # the topic's max.message.bytes
    broker_request_bytes: int | None  # the smallest socket.request.max.bytes among the cluster's brokers


def describe_hop_limits(cluster: KafkaCluster, topic: str, timeout: float = 30.0) -> HopLimits:
    """The topic's max.message.bytes and the brokers' socket.request.max.bytes (Admin API
    DescribeConfigs). A config the cluster does not show (no DESCRIBE_CONFIGS permission) is None."""
    with admin_client(cluster) as admin:
        brokers = sorted(admin.list_topics(timeout=timeout).brokers)
        resources = [ConfigResource(ResourceType.TOPIC, topic),
                     *(ConfigResource(ResourceType.BROKER, str(b)) for b in brokers)]
        values: dict[tuple[ResourceType, str], int | None] = {}
        for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
            key = "max.message.bytes" if resource.restype == ResourceType.TOPIC else "socket.request.max.bytes"
            try:
                entry = future.result(timeout=timeout).get(key)
                values[(resource.restype, resource.name)] = None if entry is None or entry.value is None else int(entry.value)
            except KafkaException as exc:
                log.info("cannot read %s of %s %s: %s", key, resource.restype.name.lower(), resource.name, exc)
                values[(resource.restype, resource.name)] = None
    request_bytes = [values.get((ResourceType.BROKER, str(b))) for b in brokers]
    known = [v for v in request_bytes if v is not None]
    return HopLimits(values.get((ResourceType.TOPIC, topic)), min(known) if known else None)


def wait_for_partition_leaders(admin: AdminClient, topics: Sequence[str], deadline: float) -> None:
    """Block until ListOffsets answers for every partition of `topics`.

    Creation is acknowledged by the controller before the broker has loaded the new partitions; a
    produce in that window gets UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER. ListOffsets is
    served by the partition leader's replica manager, so its success means produces will land.
    """
    pending = set(topics)
    while pending:
        partitions = _partitions_of(admin, pending, deadline)
        if partitions is not None:
            ready = _topics_with_all_offsets(admin, partitions, deadline)
            pending -= ready
        if pending:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"partitions of {sorted(pending)} have no serving leader yet")
            time.sleep(0.05)  # a metadata propagation poll, bounded by the deadline


def _partitions_of(admin: AdminClient, topics: Iterable[str], deadline: float) -> list[TopicPartition] | None:
    """All partitions of `topics` with a leader, or None when some topic is not fully visible yet."""
    result: list[TopicPartition] = []
    for topic in topics:
        metadata = admin.list_topics(topic=topic, timeout=max(0.5, remaining_s(deadline)))
        topic_md = metadata.topics.get(topic)
        if topic_md is None or topic_md.error is not None or not topic_md.partitions:
            return None
        if any(p.leader < 0 or p.error is not None for p in topic_md.partitions.values()):
            return None
        result.extend(TopicPartition(topic, p) for p in topic_md.partitions)
    return result


def _topics_with_all_offsets(
    admin: AdminClient, partitions: list[TopicPartition], deadline: float
) -> set[str]:
    """Topics for which ListOffsets(latest) succeeded on every partition."""
    futures = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in partitions}, request_timeout=max(0.5, remaining_s(deadline))
    )
    failed: set[str] = set()
    for tp, future in futures.items():
        try:
            future.result(timeout=max(0.5, remaining_s(deadline)))
        except KafkaException as exc:
            if not transient(exc.args[0]):
                raise
            failed.add(tp.topic)
    return {tp.topic for tp in partitions} - failed


def remaining_s(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
