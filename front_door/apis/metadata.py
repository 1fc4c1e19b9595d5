"""Metadata (key 3): the live front doors' nodes are the brokers (each its own listener, `front_door_nodes`
per door, `door_cluster.py`) and every partition of every topic in the registry (its reloads included) is led by the node
`leadership.py` assigns, its only replica and ISR. Any node answers for the whole cluster, as any Kafka
broker does. A topic the registry lacks gets UNKNOWN_TOPIC_OR_PARTITION, an
illegal name INVALID_TOPIC_EXCEPTION, an unknown id UNKNOWN_TOPIC_ID; topics are never auto-created
(`allow_auto_topic_creation` is ignored, as on a broker with `auto.create.topics.enable=false`).

With an authorizer (`access.py`): the list of every topic holds only those the principal may DESCRIBE; a
named one it may not gets TOPIC_AUTHORIZATION_FAILED (whether it exists or not). Authorized operations are
given where asked (v8+: topics; v8-v10: the cluster); without an authorizer they stay "not requested".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.topic_ids import ZERO_TOPIC_ID
from front_door.context import CLUSTER_ID, Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafka_cluster.registry_store import RegistryError
from validators.append_result import GATEWAY_LEADER_EPOCH
from validators.topic_config import (
    INTERNAL_TOPICS,
    TopicRegistry,
    auto_create_topics,
    num_partitions,
    topic_name_error,
)

# Kafka's "authorized operations not requested" (Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# From this many partitions in an answer, it is built (and encoded, `processor.py`) off the door's event loop.
OFF_LOOP_PARTITIONS = 1000


def partitions_in(body: Any) -> int:
    """The partitions a Metadata response lists."""
    return sum(len(t.partitions) for t in body.topics)


def _requested(body: Any, version: int, registry: TopicRegistry) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of each topic asked for; every registry topic when the request names none (a null
    list, or an empty one in v0)."""
    topics = body.topics
    if topics is None or (version == 0 and not topics):
        return [(name, None) for name in sorted(registry.topics)]
    return [(t.name, getattr(t, "topic_id", None)) for t in topics]


def _topic(module: Any, ctx: Context, registry: TopicRegistry, name: str | None, tid: uuid.UUID | None,
           operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> Any:
    if name is None:  # asked by id (v10+)
        name = ctx.topic_ids().get(tid) if tid is not None else None
        if name is None:
            return build(module.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_id, name=None,
                         topic_id=tid or ZERO_TOPIC_ID, is_internal=False, partitions=(),
                         topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    config = registry.get(name)
    if config is not None:
        code = ErrorCode.none
    else:
        code = ErrorCode.invalid_topic_exception if topic_name_error(name) else ErrorCode.unknown_topic_or_partition
    leaders = [] if config is None else [ctx.leader(name, p) for p in range(config.partitions)]
    partitions = tuple(
        build(module.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=p, leader_id=leader,
              leader_epoch=GATEWAY_LEADER_EPOCH, replica_nodes=(leader,), isr_nodes=(leader,), offline_replicas=())
        for p, leader in enumerate(leaders)
    )
    return build(module.MetadataResponseTopic, error_code=code, name=name,
                 topic_id=config.id if config is not None else ZERO_TOPIC_ID, is_internal=False,
                 partitions=partitions, topic_authorized_operations=operations)


def _unauthorized(module: Any, name: str | None, tid: uuid.UUID | None) -> Any:
    """A topic the principal may not DESCRIBE: no partitions, and neither its id (asked by name) nor its
    name (asked by id) given away."""
    return build(module.MetadataResponseTopic, error_code=ErrorCode.topic_authorization_failed, name=name,
                 topic_id=tid if name is None and tid is not None else ZERO_TOPIC_ID, is_internal=False, partitions=(),
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _cluster_operations(ctx: Context, request: Request) -> int:
    """v8-v10's cluster authorized operations when asked (later versions ask DescribeCluster, KIP-700): the
    bit field with DESCRIBE on the cluster, 0 without it; every supported operation without an authorizer
    (`AuthHelper.authorizedOperations`)."""
    if not getattr(request.body, "include_cluster_authorized_operations", False):
        return AUTHORIZED_OPERATIONS_OMITTED
    if not access.authorize_cluster(ctx, request, AclOperation.DESCRIBE):
        return 0
    return access.authorized_operations(ctx, request, ResourceType.CLUSTER, CLUSTER_NAME)


async def _auto_create(ctx: Context, request: Request, registry: TopicRegistry, unknown: list[str]) -> TopicRegistry:
    """Kafka's `auto.create.topics.enable` (`KafkaApis.getTopicMetadata`, `AutoTopicCreationManager`): each unknown
    topic named, with a valid name and CREATE on the cluster or the topic, created with `num.partitions`
    partitions and the registry's defaults; the registry as it is then. A topic another door created meanwhile
    is simply there."""
    store = ctx.topic_store
    if not unknown or store is None:
        return registry
    allowed = set(unknown) if access.authorize_cluster(ctx, request, AclOperation.CREATE, log_if_denied=False) \
        else access.authorized_names(ctx, request, AclOperation.CREATE, ResourceType.TOPIC, unknown)
    count = num_partitions(registry.defaults)
    for name in unknown:
        if name in allowed and topic_name_error(name) is None and name not in INTERNAL_TOPICS:
            with contextlib.suppress(RegistryError):  # TopicExists among them: the other creation is the topic
                await asyncio.to_thread(store.create, name, count, {})
    return ctx.registry()


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.METADATA, version)
    registry = ctx.registry()
    brokers = tuple(build(module.MetadataResponseBroker, node_id=n.node_id, host=n.host, port=n.port, rack=None)
                    for n in ctx.brokers())
    asked = _requested(body, version, registry)
    every_topic = body.topics is None or (version == 0 and not body.topics)
    ids = ctx.topic_ids()
    names = [name if name is not None else ids.get(tid) if tid is not None else None for name, tid in asked]
    # KafkaApis.handleTopicMetadataRequest: DESCRIBE on each topic; listing every topic leaves out (without a
    # log line) those the principal may not describe, naming one answers TOPIC_AUTHORIZATION_FAILED for it
    describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          (n for n in names if n is not None), log_if_denied=not every_topic)
    with_operations = getattr(body, "include_topic_authorized_operations", False)
    if not every_topic and auto_create_topics(registry.defaults) and ctx.topic_store is not None \
            and (version < 4 or body.allow_auto_topic_creation):
        registry = await _auto_create(ctx, request, registry, [n for n, _ in asked if n is not None and n not in registry])

    def answer_topics() -> list[Any]:
        topics = []
        for (name, tid), resolved in zip(asked, names, strict=True):
            if resolved is not None and resolved not in describable:
                if not every_topic:
                    topics.append(_unauthorized(module, name, tid))
                continue
            operations = access.authorized_operations(ctx, request, ResourceType.TOPIC, resolved) \
                if with_operations and resolved is not None else AUTHORIZED_OPERATIONS_OMITTED
            topics.append(_topic(module, ctx, registry, name, tid, operations))
        return topics

    partitions = sum(int(c.partitions) for n in names if n is not None and (c := registry.get(n)) is not None)
    # Thousands of partitions take tens of ms to build (~3 µs each): on a thread of its own, so the loop goes
    # on serving the door's other connections between the GIL's switches meanwhile.
    topics = await asyncio.to_thread(answer_topics) if partitions > OFF_LOOP_PARTITIONS else answer_topics()
    return build(module.MetadataResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, brokers=brokers,
                 cluster_id=CLUSTER_ID, controller_id=ctx.controller_id(), topics=tuple(topics),
                 cluster_authorized_operations=_cluster_operations(ctx, request))


API = register(Api(ApiKey.METADATA, (0, 13), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),
    Acl(AclOperation.DESCRIBE, ResourceType.CLUSTER),
    Acl(AclOperation.CREATE, ResourceType.CLUSTER),
    Acl(AclOperation.CREATE, ResourceType.TOPIC),
)))
