"""OffsetCommit (key 8, v2-v10; topics by id from v10): a group's consumed positions, stored on the
groups topic before the answer (`groups/coordinator.py` `commit`). The commit timestamp is the
coordinator's clock (v2+ carry none); v2-v4's retention time is ignored, as Kafka 4 ignores it.
A partition the registry lacks: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id). Asked of a node
that does not coordinate the group: NOT_COORDINATOR for every partition.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.wire import Request

TOPIC_ID_VERSION = 10
NO_LEADER_EPOCH = -1


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.OFFSET_COMMIT, version)
    by_id = version >= TOPIC_ID_VERSION
    names = ctx.topic_ids() if by_id else {}
    registry = ctx.registry()
    now_ms = int(time.time() * 1000)
    coordinated = ctx.coordinator(body.group_id) == request.node_id
    errors: dict[tuple[Any, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    keys: dict[tuple[str, int], tuple[Any, int]] = {}
    for t in body.topics:
        key = t.topic_id if by_id else t.name
        name = names.get(t.topic_id) if by_id else t.name
        config = registry.get(name) if name is not None else None
        for p in t.partitions:
            if not coordinated:
                errors[key, p.partition_index] = ErrorCode.not_coordinator
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
