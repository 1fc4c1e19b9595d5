"""OffsetDelete (key 47, v0): a group's committed offsets of some partitions removed (tombstones on the groups
topic), as `kafka-consumer-groups.sh --delete-offsets` and Kafka Streams' reset tool ask.

Kafka's rules (`KafkaApis.handleOffsetDeleteRequest`, `GroupMetadataManager.deleteOffsets`): DELETE on the
group, else GROUP_AUTHORIZATION_FAILED; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions;
asked of a node that does not coordinate the group NOT_COORDINATOR; an unknown group GROUP_ID_NOT_FOUND; a group
with members of another protocol type than `consumer` NON_EMPTY_GROUP; a consumer group with members keeps the
offsets of the topics they subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the rest.
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a `ConsumerProtocolSubscription` (every version begins with its version and its topics);
    none for bytes that are not one."""
    try:
        (count,) = struct.unpack_from(">i", subscription, 2)
        at, topics = 6, set()
        for _ in range(max(count, 0)):
            (size,) = struct.unpack_from(">h", subscription, at)
            topics.add(subscription[at + 2:at + 2 + size].decode())
            at += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.OFFSET_DELETE, request.api_version)
    body = request.body
    group_id = body.group_id
    asked = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    if not access.authorize(ctx, request, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return build(module.OffsetDeleteResponse, error_code=ErrorCode.group_authorization_failed,
                     throttle_time=NO_THROTTLE, topics=())
    if (moved := ctx.coordinator_error(group_id, request.node_id)) is not None:
        return build(module.OffsetDeleteResponse, error_code=moved, throttle_time=NO_THROTTLE, topics=())
    readable = access.authorized_names(ctx, request, AclOperation.READ, ResourceType.TOPIC, {n for n, _ in asked})
    group_error, results = await ctx.groups.delete_committed_offsets(
        group_id, [tp for tp in asked if tp[0] in readable], subscribed_topics)
    if group_error != ErrorCode.none:
        return build(module.OffsetDeleteResponse, error_code=group_error, throttle_time=NO_THROTTLE, topics=())
    topics = tuple(
        build(module.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(
            build(module.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                  error_code=results.get((t.name, p.partition_index), ErrorCode.topic_authorization_failed))
            for p in t.partitions))
        for t in body.topics)
    return build(module.OffsetDeleteResponse, error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=topics)


API = register(Api(ApiKey.OFFSET_DELETE, (0, 0), handle, acls=(
    Acl(AclOperation.DELETE, ResourceType.GROUP),
    Acl(AclOperation.READ, ResourceType.TOPIC),
)))
