"""OffsetCommit (key 8, v2-v10; topics by id from v10): a group's consumed positions, stored on the
groups topic before the answer (`groups/offset_manager.py` `commit`). The commit timestamp is the
coordinator's clock (v2+ carry none); v2-v4's retention time is ignored, as Kafka 4 ignores it.
A partition the registry lacks: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id). Asked of a node
that does not coordinate the group: NOT_COORDINATOR for every partition. Without READ on the group every
partition gets GROUP_AUTHORIZATION_FAILED; a topic without READ TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

TOPIC_ID_VERSION = 10
NO_LEADER_EPOCH = -1


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.OFFSET_COMMIT, version)
    by_id = version >= TOPIC_ID_VERSION
    names = ctx.topic_ids() if by_id else {}
    registry = ctx.registry()
    now_ms = int(time.time() * 1000)
    moved = ctx.coordinator_error(body.group_id, request.node_id)
    # KafkaApis.handleOffsetCommitRequest: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED),
    # then READ on each topic
    group_denied = not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id)
    resolved = [names.get(t.topic_id) if by_id else t.name for t in body.topics]
    readable = set() if group_denied else access.authorized_names(
        ctx, request, AclOperation.READ, ResourceType.TOPIC, (n for n in resolved if n is not None))
    errors: dict[tuple[Any, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    keys: dict[tuple[str, int], tuple[Any, int]] = {}
    for t, name in zip(body.topics, resolved, strict=True):
        key = t.topic_id if by_id else t.name
        config = registry.get(name) if name is not None else None
        for p in t.partitions:
            if group_denied:
                errors[key, p.partition_index] = ErrorCode.group_authorization_failed
            elif name is not None and name not in readable:
                errors[key, p.partition_index] = ErrorCode.topic_authorization_failed
            elif moved is not None:
                errors[key, p.partition_index] = moved
            elif config is None or not 0 <= p.partition_index < config.partitions:
                errors[key, p.partition_index] = (ErrorCode.unknown_topic_id if by_id and name is None
                                                  else ErrorCode.unknown_topic_or_partition)
            else:
                assert name is not None
                offsets[name, p.partition_index] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                    p.committed_metadata or "", now_ms)
                keys[name, p.partition_index] = (key, p.partition_index)
    if offsets:
        committed = await ctx.groups.commit(body.group_id, body.generation_id_or_member_epoch, body.member_id,
                                            getattr(body, "group_instance_id", None), offsets)
        errors.update({keys[tp]: code for tp, code in committed.items()})
    topics = []
    for t in body.topics:
        key = t.topic_id if by_id else t.name
        partitions = tuple(build(module.OffsetCommitResponsePartition, partition_index=p.partition_index,
                                 error_code=errors[key, p.partition_index]) for p in t.partitions)
        topics.append(build(module.OffsetCommitResponseTopic, name=None if by_id else key,
                            topic_id=key if by_id else None, partitions=partitions))
    return build(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = register(Api(ApiKey.OFFSET_COMMIT, (2, 10), handle, acls=(
    Acl(AclOperation.READ, ResourceType.GROUP),
    Acl(AclOperation.READ, ResourceType.TOPIC),
)))
