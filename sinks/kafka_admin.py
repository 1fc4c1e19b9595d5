"""Creating the gateway's topics on any Kafka cluster (Admin API) and waiting until every partition has a
serving leader, so the query's first fetch and the first publish never race the topics' creation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

log = logging.getLogger("gateway.kafka_admin")

# (topic name, partition count, topic configs)
TopicSpec = tuple[str, int, Mapping[str, str]]


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
    }
)


def create_topics(bootstrap_servers: str, specs: Iterable[TopicSpec], timeout: float = 60.0) -> None:
    """Create topics (name, partitions, configs) and wait until every partition has a serving leader.

    Idempotent: a topic that already exists is left as it is (its partitions and configs are not
    compared). Replication factor is the cluster's `default.replication.factor`.
    """
    specs = list(specs)
    if not specs:
        return
    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    new_topics = [
        NewTopic(name, num_partitions=partitions, config={k: str(v) for k, v in configs.items()})
        for name, partitions, configs in specs
    ]
    futures = admin.create_topics(new_topics, operation_timeout=timeout, request_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout=remaining_s(deadline))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            log.debug("topic %s already exists", name)
    wait_for_partition_leaders(admin, [name for name, _, _ in specs], deadline)


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
            error = exc.args[0]
            if error.code() not in _RETRIABLE_METADATA_ERRORS and not error.retriable():
                raise
            failed.add(tp.topic)
    return {tp.topic for tp in partitions} - failed


def remaining_s(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
