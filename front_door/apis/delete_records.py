"""DeleteRecords (key 21, v0-v2): a partition's log start offset moved up (`storage/delete_records.py`), as
`kafka-delete-records.sh` and Kafka Streams (purging its repartition topics) ask.

Kafka's rules (`KafkaApis.handleDeleteRecordsRequest`, `ReplicaManager.deleteRecords`): DELETE on the topic,
else TOPIC_AUTHORIZATION_FAILED for each of its partitions; an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; a partition another node leads NOT_LEADER_OR_FOLLOWER; an offset past the high
watermark OFFSET_OUT_OF_RANGE; a compact-only topic POLICY_VIOLATION. The answer's low watermark is the
partition's log start offset afterwards (-1 with an error).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from storage.delete_records import DeleteRecordsError, delete_records

_ERRORS = {DeleteRecordsError.OFFSET_OUT_OF_RANGE: ErrorCode.offset_out_of_range,
           DeleteRecordsError.POLICY_VIOLATION: ErrorCode.policy_violation}
NO_WATERMARK = -1


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_RECORDS, request.api_version)
    registry = ctx.registry()
    names = [t.name for t in request.body.topics]
    deletable = access.authorized_names(ctx, request, AclOperation.DELETE, ResourceType.TOPIC, names)
    topics = []
    for topic in request.body.topics:
        config = registry.get(topic.name)
        results = []
        for p in topic.partitions:
            code, low = ErrorCode.none, NO_WATERMARK
            if topic.name not in deletable:
                code = ErrorCode.topic_authorization_failed
            elif config is None or not 0 <= p.partition_index < config.partitions:
                code = ErrorCode.unknown_topic_or_partition
            elif ctx.leader(topic.name, p.partition_index) != request.node_id:
                code = ErrorCode.not_leader_or_follower
            else:
                # the partition lock may be held by an append for a moment: off the event loop
                done = await asyncio.to_thread(delete_records, ctx.segments_root, topic.name, p.partition_index,
                                               config, int(p.offset))
                if isinstance(done, tuple):
                    code = _ERRORS[done[0]]
                else:
                    low = done.low_watermark
            results.append(build(module.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                                 low_watermark=low, error_code=code))
        topics.append(build(module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(results)))
    return build(module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = register(Api(ApiKey.DELETE_RECORDS, (0, 2), handle, acls=(Acl(AclOperation.DELETE, ResourceType.TOPIC),)))
