"""OffsetFetch (key 9, v1-v10; several groups from v8, KIP-709; topics by id from v10): what a group
committed (`groups/offset_manager.py` `fetch_offsets`): -1 with no error where nothing is committed, every
committed partition when no topics are named (v2+). Asked of a node that does not coordinate the group:
NOT_COORDINATOR for the group (per partition in v1, which has no group error). Without DESCRIBE on the
group: GROUP_AUTHORIZATION_FAILED; a topic without DESCRIBE is left out of a listing of every committed
partition, and named, answered TOPIC_AUTHORIZATION_FAILED. With `require_stable` (v7+, KIP-447) a partition whose
offset a transaction holds (`groups/transactional_offsets.py`) gets UNSTABLE_OFFSET_COMMIT and offset -1: the
consumer asks again once the transaction has ended.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.topic_ids import topic_id
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

GROUP_ERROR_VERSION = 2
BATCHED_VERSION = 8
TOPIC_ID_VERSION = 10


def _group(ctx: Context, request: Request, module: Any, group_id: str, topics: Any,
           partition_entity: Any, topic_entity: Any) -> tuple[ErrorCode, tuple[Any, ...]]:
    """(group error, topics) for one group."""
    version = request.api_version
    unstable = ctx.groups.transactional.partitions(group_id) if getattr(request.body, "require_stable", False) \
        else set()
    by_id = version >= TOPIC_ID_VERSION
    # KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group (OffsetFetchRequest.getErrorResponse: from v2
    # no topics, v1 the error on each partition asked for), then DESCRIBE on each topic
    if not access.authorize(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
        if version >= GROUP_ERROR_VERSION:
            return error, ()
    elif (moved := ctx.coordinator_error(group_id, request.node_id)) is not None:
        error = moved
    else:
        error = ErrorCode.none
    if topics is None:
        wanted = None
    else:
        names = ctx.topic_ids() if by_id else {}
        wanted = [((names.get(t.topic_id) if by_id else t.name), p) for t in topics for p in t.partition_indexes]
    # offsets of topics the principal may not describe are not shown: left out of a listing, each asked
    # one's partitions TOPIC_AUTHORIZATION_FAILED
    asked_names = {n for n, _ in wanted if n is not None} if wanted is not None else set()
    describable = asked_names if error != ErrorCode.none else access.authorized_names(
        ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, asked_names)
    fetched = {} if error != ErrorCode.none else ctx.groups.fetch_offsets(
        group_id, None if wanted is None else [(n, p) for n, p in wanted if n is not None and n in describable])
    if wanted is None and ctx.authorizer is not None:
        listed = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                         (n for n, _ in fetched), log_if_denied=False)
        fetched = {tp: o for tp, o in fetched.items() if tp[0] in listed}
    partition_error = error if version < GROUP_ERROR_VERSION else ErrorCode.none
    by_topic: dict[Any, list[Any]] = {}
    if wanted is None:
        for (name, p), o in fetched.items():
            config = ctx.registry().get(name) if by_id else None
            held = (name, p) in unstable
            by_topic.setdefault((config.id if config is not None else topic_id(name)) if by_id else name, []).append(
                build(partition_entity, partition_index=p, committed_offset=-1 if held else o.offset,
                      committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                      error_code=ErrorCode.unstable_offset_commit if held else ErrorCode.none))
    else:
        for t in topics:
            key = t.topic_id if by_id else t.name
            name = ctx.topic_ids().get(t.topic_id) if by_id else t.name
            for p in t.partition_indexes:
                o = fetched.get((name, p)) if name is not None else None
                unknown = by_id and name is None and error == ErrorCode.none
                denied = name is not None and name not in describable and error == ErrorCode.none
                code = (ErrorCode.unknown_topic_id if unknown else ErrorCode.topic_authorization_failed if denied
                        else partition_error)
                if code == ErrorCode.none and (name, p) in unstable:
                    code, o = ErrorCode.unstable_offset_commit, None
                by_topic.setdefault(key, []).append(build(
                    partition_entity, partition_index=p, committed_offset=o.offset if o else -1,
                    committed_leader_epoch=o.leader_epoch if o else -1, metadata=o.metadata if o else "",
                    error_code=code))
    out = tuple(build(topic_entity, name=None if by_id else key, topic_id=key if by_id else None,
                      partitions=tuple(parts)) for key, parts in by_topic.items())
    return error, out


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.OFFSET_FETCH, version)
    if version >= BATCHED_VERSION:
        groups = []
        for g in body.groups:
            error, topics = _group(ctx, request, module, g.group_id, g.topics,
                                   module.OffsetFetchResponsePartitions, module.OffsetFetchResponseTopics)
            groups.append(build(module.OffsetFetchResponseGroup, group_id=g.group_id, topics=topics, error_code=error))
        return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = _group(ctx, request, module, body.group_id, body.topics,
                           module.OffsetFetchResponsePartition, module.OffsetFetchResponseTopic)
    return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=error)


API = register(Api(ApiKey.OFFSET_FETCH, (1, 10), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.GROUP),
    Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),
)))
