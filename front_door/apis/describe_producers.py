"""DescribeProducers (key 61, v0, KIP-664): the active producers of partitions this node leads, as
`kafka-transactions.sh describe-producers` and `find-hanging` ask them (`KafkaApis.handleDescribeProducersRequest`,
`ReplicaManager.activeProducerState`, `UnifiedLog.activeProducers`): each producer's id, epoch, last sequence,
last timestamp, coordinator epoch and its open transaction's first offset here (-1: none).

Errors, in Kafka's order: a topic name Kafka's `Topic.validate` refuses INVALID_TOPIC_EXCEPTION with its text; no
READ on the topic TOPIC_AUTHORIZATION_FAILED; a topic not in the registry UNKNOWN_TOPIC_OR_PARTITION (these three
with Kafka's message, for every partition asked); then per partition, without a message, UNKNOWN_TOPIC_OR_PARTITION
for one out of range and NOT_LEADER_OR_FOLLOWER where another node leads it (`leadership.py`); a partition whose
storage cannot be read KAFKA_STORAGE_ERROR, with a message naming the file (also logged).

The door holds no producer state (the stage does, in Spark's state store): each partition's is rebuilt from its
stored batches as Kafka rebuilds it when it loads a log (`storage/producer_batches.py` reads them, from the
first segment that can hold a producer `producer.id.expiration.ms` has not expired;
`validators/producer_state_rebuild.py` replays them), then expired against the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from storage.errors import KafkaStorageError
from storage.log_reader import PartitionReader
from storage.producer_batches import producer_batches
from validators.errors import Errors
from validators.producer_state import ProducerStateEntry
from validators.producer_state_rebuild import active_producers, rebuild_producer_state
from validators.topic_config import topic_name_error

log = logging.getLogger("gateway.front_door")


@dataclass(frozen=True)
class Described:
    error: ErrorCode
    message: str | None = None
    producers: tuple[ProducerStateEntry, ...] = ()


def describe(root: Path, topic: str, partition: int, now_ms: int, expiration_ms: int) -> Described:
    """One partition's active producers, rebuilt from storage; runs on a worker thread (file I/O)."""
    try:
        reader = PartitionReader(root, topic, partition, append_times=False)
    except FileNotFoundError:  # nothing appended yet
        return Described(ErrorCode.none)
    with reader:
        try:
            table = rebuild_producer_state(producer_batches(reader, now_ms - expiration_ms), f"{topic}-{partition}")
        except (KafkaStorageError, OSError) as e:
            log.warning("DescribeProducers of %s-%d: %s", topic, partition, e)
            return Described(ErrorCode.kafka_storage_error, str(e))
    return Described(ErrorCode.none, producers=tuple(active_producers(table, now_ms, expiration_ms)))


def _topic_error(ctx: Context, request: Request, name: str) -> Described | None:
    """`handleDescribeProducersRequest`'s error for every partition of a topic, or None."""
    if (invalid := topic_name_error(name)) is not None:
        return Described(ErrorCode.invalid_topic_exception, invalid)
    if not access.authorize(ctx, request, AclOperation.READ, ResourceType.TOPIC, name):
        return Described(ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED)
    if ctx.registry().get(name) is None:
        return Described(ErrorCode.unknown_topic_or_partition, Errors.UNKNOWN_TOPIC_OR_PARTITION.default_message)
    return None


async def _partition(ctx: Context, request: Request, name: str, partition: int) -> Described:
    config = ctx.registry().get(name)
    if config is None or not 0 <= partition < config.partitions:
        return Described(ErrorCode.unknown_topic_or_partition)
    if ctx.leader(name, partition) != request.node_id:
        return Described(ErrorCode.not_leader_or_follower)
    if not ctx.stored(config):  # a re-created topic whose old partitions are not removed yet: no producers
        return Described(ErrorCode.none)
    return await asyncio.to_thread(describe, ctx.segments_root, name, partition, int(time.time() * 1000),
                                   config.producer_id_expiration_ms)


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_PRODUCERS, request.api_version)
    topics = []
    for t in request.body.topics:
        topic_error = _topic_error(ctx, request, t.name)
        partitions = []
        for p in t.partition_indexes:
            found = topic_error if topic_error is not None else await _partition(ctx, request, t.name, p)
            partitions.append(build(module.PartitionResponse, partition_index=p, error_code=found.error,
                                    error_message=found.message, active_producers=tuple(
                                        build(module.ProducerState, producer_id=e.producer_id,
                                              producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                                              last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                                              current_txn_start_offset=e.current_txn_first_offset)
                                        for e in found.producers)))
        topics.append(build(module.TopicResponse, name=t.name, partitions=tuple(partitions)))
    return build(module.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = register(Api(ApiKey.DESCRIBE_PRODUCERS, (0, 0), handle, acls=(Acl(AclOperation.READ, ResourceType.TOPIC),)))
