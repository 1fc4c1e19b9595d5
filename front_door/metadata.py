"""Metadata (key 3): the front door's nodes are the brokers (each its own listener, `front_door_nodes`)
and every partition of every topic in the registry (its reloads included) is led by the node
`leadership.py` assigns, its only replica and ISR. Any node answers for the whole cluster, as any Kafka
broker does. A topic the registry lacks gets UNKNOWN_TOPIC_OR_PARTITION, an
illegal name INVALID_TOPIC_EXCEPTION, an unknown id UNKNOWN_TOPIC_ID; topics are never auto-created
(`allow_auto_topic_creation` is ignored, as on a broker with `auto.create.topics.enable=false`).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.context import CLUSTER_ID, CONTROLLER_ID, Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.topic_ids import topic_id
from front_door.wire import Request
from validators.append_result import GATEWAY_LEADER_EPOCH
from validators.topic_config import TopicRegistry, topic_name_error

# Kafka's "authorized operations not requested" (Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)


def _requested(body: Any, version: int, registry: TopicRegistry) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of each topic asked for; every registry topic when the request names none (a null
    list, or an empty one in v0)."""
    topics = body.topics
    if topics is None or (version == 0 and not topics):
        return [(name, None) for name in sorted(registry.topics)]
    return [(t.name, getattr(t, "topic_id", None)) for t in topics]


def _topic(module: Any, ctx: Context, registry: TopicRegistry, name: str | None, tid: uuid.UUID | None) -> Any:
    if name is None:  # asked by id (v10+)
        name = ctx.topic_ids().get(tid) if tid is not None else None
        if name is None:
            return build(module.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_id, name=None,
                         topic_id=tid or _ZERO_UUID, is_internal=False, partitions=(),
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
                 topic_id=topic_id(name) if config is not None else _ZERO_UUID, is_internal=False,
                 partitions=partitions, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.METADATA, request.api_version)
    registry = ctx.registry()
    brokers = tuple(build(module.MetadataResponseBroker, node_id=n.node_id, host=n.host, port=n.port, rack=None)
                    for n in ctx.nodes)
    topics = tuple(_topic(module, ctx, registry, name, tid)
                   for name, tid in _requested(request.body, request.api_version, registry))
    return build(module.MetadataResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, brokers=brokers,
                 cluster_id=CLUSTER_ID, controller_id=CONTROLLER_ID, topics=topics,
                 cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
