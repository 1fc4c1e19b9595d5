"""CreatePartitions (key 37): a topic's partitions grown in the registry (`kafka_cluster/registry_store.py`); the new
partitions are served by every door and decided by the stage from the next micro-batch on.

Kafka's rules (`ControllerApis.createPartitions`, `ReplicationControlManager.createPartitions`): ALTER on each
topic, else TOPIC_AUTHORIZATION_FAILED; a topic named twice INVALID_REQUEST; an unknown one
UNKNOWN_TOPIC_OR_PARTITION; fewer partitions than it has, or as many, INVALID_PARTITIONS with Kafka's messages;
assignments are taken for their count (placement is the door's own). `validate_only` changes nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.topic_admin import Problem, in_store, refusal
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def _grow(ctx: Context, topic: Any, validate_only: bool) -> Problem | None:
    config = ctx.registry().get(topic.name)
    if config is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{topic.name}' does not exist."
    count = int(topic.count)
    if count < config.partitions:
        return ErrorCode.invalid_partitions, (f"The topic {topic.name} currently has {config.partitions} partition(s); "
                                              f"{count} would not be an increase.")
    if count == config.partitions:
        return ErrorCode.invalid_partitions, f"Topic already has {config.partitions} partition(s)."
    if topic.assignments is not None and len(topic.assignments) != count - config.partitions:
        return ErrorCode.invalid_replica_assignment, (
            f"Attempted to add {count - config.partitions} additional partition(s), but only "
            f"{len(topic.assignments)} assignment(s) were specified.")
    if ctx.topic_store is None:
        return ErrorCode.policy_violation, refusal(ctx, "change the topic's partitions")
    if validate_only:
        return None
    store = ctx.topic_store
    done = await in_store(lambda: store.alter(topic.name, partitions=count))
    return done if isinstance(done, tuple) else None


async def create_partitions(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_PARTITIONS, request.api_version)
    names = [t.name for t in request.body.topics]
    alterable = access.authorized_names(ctx, request, AclOperation.ALTER, ResourceType.TOPIC, names)
    results = []
    for topic in request.body.topics:
        problem: Problem | None
        if names.count(topic.name) > 1:
            problem = ErrorCode.invalid_request, "Duplicate topic name."
        elif topic.name not in alterable:
            problem = ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED
        else:
            problem = await _grow(ctx, topic, bool(request.body.validate_only))
        results.append(build(module.CreatePartitionsTopicResult, name=topic.name,
                             error_code=problem[0] if problem else ErrorCode.none,
                             error_message=problem[1] if problem else None))
    return build(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


API = register(Api(ApiKey.CREATE_PARTITIONS, (0, 3), create_partitions, acls=(
    Acl(AclOperation.ALTER, ResourceType.TOPIC),
)))
