"""DescribeTopicPartitions (key 75, v0, KIP-966): what Kafka 4's admin client sends for `describeTopics`, in
pages of partitions.

Kafka's rules (`DescribeTopicPartitionsRequestHandler`): no topics named lists every topic the principal may
DESCRIBE, sorted by name; a named topic the principal may not describe gets TOPIC_AUTHORIZATION_FAILED, an
unknown one UNKNOWN_TOPIC_OR_PARTITION; topics are answered in name order from the cursor's topic and partition
on, at most `response_partition_limit` partitions in all (capped at the broker's 2000), and `next_cursor` names
where the next page begins (null when none is left). Each partition as Metadata gives it: its leading node as
leader, replica and in-sync replica; no eligible leader replicas (the gateway's storage has one copy).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.metadata import AUTHORIZED_OPERATIONS_OMITTED
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.topic_ids import ZERO_TOPIC_ID
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from validators.append_result import GATEWAY_LEADER_EPOCH

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_TOPIC_PARTITIONS, request.api_version)
    body = request.body
    registry = ctx.registry()
    asked = sorted({t.name for t in body.topics}) if body.topics else None
    names = asked if asked is not None else sorted(registry.topics)
    describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                          log_if_denied=asked is not None)
    if asked is None:
        names = [n for n in names if n in describable]
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(1, min(int(body.response_partition_limit), MAX_PARTITIONS))
    topics, left, next_cursor = [], limit, None
    for name in names:
        config = registry.get(name)
        if name not in describable or config is None:
            code = ErrorCode.topic_authorization_failed if name not in describable else ErrorCode.unknown_topic_or_partition
            topics.append(build(module.DescribeTopicPartitionsResponseTopic, error_code=code, name=name,
                                topic_id=ZERO_TOPIC_ID, is_internal=False, partitions=(),
                                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if left == 0:
            next_cursor = build(module.Cursor, topic_name=name, partition_index=first)
            break
        last = min(config.partitions, first + left)
        partitions = []
        for p in range(first, last):
            leader = ctx.leader(name, p)
            partitions.append(build(module.DescribeTopicPartitionsResponsePartition, error_code=ErrorCode.none,
                                    partition_index=p, leader_id=leader, leader_epoch=GATEWAY_LEADER_EPOCH,
                                    replica_nodes=(leader,), isr_nodes=(leader,), eligible_leader_replicas=(),
                                    last_known_elr=(), offline_replicas=()))
        left -= last - first
        topics.append(build(module.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
                            topic_id=config.id, is_internal=False, partitions=tuple(partitions),
                            topic_authorized_operations=access.authorized_operations(
                                ctx, request, ResourceType.TOPIC, name)))
        if last < config.partitions:
            next_cursor = build(module.Cursor, topic_name=name, partition_index=last)
            break
    return build(module.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics),
                 next_cursor=next_cursor)


API = register(Api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, (0, 0), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),
)))
