"""OffsetForLeaderEpoch (key 23, v2-v4, KIP-101/KIP-320): the end offset of a leader epoch, which a
consumer asks to validate its position after a leader change (`LeaderEpochFileCache.endOffsetFor`). The
gateway appends every batch in its one epoch (`GATEWAY_LEADER_EPOCH`): that epoch ends at the log end
offset; an earlier or later one, or any on an empty partition, is unknown (epoch -1, offset -1), as
Kafka answers an epoch its cache does not hold. `current_leader_epoch` is checked (`leader_epoch.py`); a
partition another node of this door leads gets NOT_LEADER_OR_FOLLOWER (one another door leads is answered
here: `Context.sibling_leader`); a topic the principal may not DESCRIBE (without
CLUSTER_ACTION) TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.leader_epoch import NO_EPOCH, epoch_error
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from storage.errors import KafkaStorageError
from storage.log_reader import log_end_offset
from validators.append_result import GATEWAY_LEADER_EPOCH

UNDEFINED_EPOCH_OFFSET = -1


Result = tuple[ErrorCode, int, int]  # error, epoch, end offset


def end_offsets_for(root: Path, asked: Sequence[tuple[str, int, int]]) -> list[Result]:
    """`end_offset_for` of each (topic, partition, epoch) in turn on one worker thread: a consumer validating a
    thousand partitions after a leader change costs one hand-over to a thread, not one per partition."""
    return [end_offset_for(root, topic, partition, epoch) for topic, partition, epoch in asked]


def end_offset_for(root: Path, topic: str, partition: int, epoch: int) -> Result:
    """(error, epoch, end offset) of `epoch`; on a worker thread (file I/O)."""
    if epoch != GATEWAY_LEADER_EPOCH:
        return ErrorCode.none, NO_EPOCH, UNDEFINED_EPOCH_OFFSET
    try:
        end = log_end_offset(root, topic, partition)
    except (KafkaStorageError, OSError):
        return ErrorCode.kafka_storage_error, NO_EPOCH, UNDEFINED_EPOCH_OFFSET
    if end == 0:  # nothing appended: no epoch has started
        return ErrorCode.none, NO_EPOCH, UNDEFINED_EPOCH_OFFSET
    return ErrorCode.none, GATEWAY_LEADER_EPOCH, end


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version)
    registry = ctx.registry()
    # KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster (a follower, not logged when
    # denied), else DESCRIBE on each topic (a consumer, KIP-320)
    if access.authorize_cluster(ctx, request, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        describable = {t.topic for t in request.body.topics}
    else:
        describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                              (t.topic for t in request.body.topics))
    answers: list[tuple[str, list[tuple[int, Result | None]]]] = []
    asked: list[tuple[str, int, int]] = []  # the partitions storage answers, in the request's order
    for t in request.body.topics:
        config = registry.get(t.topic)
        partitions: list[tuple[int, Result | None]] = []
        for p in t.partitions:
            result: Result | None
            if t.topic not in describable:
                result = (ErrorCode.topic_authorization_failed, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
            elif config is None or not 0 <= p.partition < config.partitions:
                result = (ErrorCode.unknown_topic_or_partition, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
            elif ctx.sibling_leader(t.topic, p.partition, request.node_id) is not None:
                result = (ErrorCode.not_leader_or_follower, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
            elif (fenced := epoch_error(p.current_leader_epoch)) is not None:
                result = (fenced, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
            else:
                result = None
                asked.append((t.topic, p.partition, p.leader_epoch))
            partitions.append((p.partition, result))
        answers.append((t.topic, partitions))
    found = iter(await asyncio.to_thread(end_offsets_for, ctx.segments_root, asked) if asked else ())
    topics = []
    for topic, partitions in answers:
        built = []
        for partition, known in partitions:
            code, epoch, end = known if known is not None else next(found)
            built.append(build(module.EpochEndOffset, error_code=code, partition=partition, leader_epoch=epoch,
                               end_offset=end))
        topics.append(build(module.OffsetForLeaderTopicResult, topic=topic, partitions=tuple(built)))
    return build(module.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = register(Api(ApiKey.OFFSET_FOR_LEADER_EPOCH, (2, 4), handle, acls=(
    Acl(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),
    Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),
)))
