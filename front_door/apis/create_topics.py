"""CreateTopics (key 19, v2-v7): a topic added to the registry (`kafka_cluster/registry_store.py`), served by every door
and decided by the stage from the next micro-batch on.

Kafka's rules (`ControllerApis.createTopics`, `ReplicationControlManager.createTopic`): CREATE on the cluster or
the topic, else TOPIC_AUTHORIZATION_FAILED; a name given twice INVALID_REQUEST; a name `Topic.validate` refuses
INVALID_TOPIC_EXCEPTION; a taken name TOPIC_ALREADY_EXISTS (also when another door's creation came first);
partitions and replication factor -1 take the defaults (`num.partitions`, one copy), a non-positive one
INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, more copies than nodes INVALID_REPLICATION_FACTOR; manual
assignments give the partition count (placement is the door's own, `leadership.py`); a config `LogConfig`
refuses INVALID_CONFIG. `validate_only` checks all of it and creates nothing. From v5 the answer carries the
topic's configs (DESCRIBE_CONFIGS on the topic, else TOPIC_AUTHORIZATION_FAILED as its config error).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.describe_configs import topic_entries
from front_door.apis.registry import Acl, Api, register
from front_door.apis.topic_admin import (
    AUTHORIZATION_FAILED,
    NO_REPLICATION_FACTOR,
    Problem,
    in_store,
    partitions_problem,
    refusal,
    replication_problem,
    validated,
)
from front_door.cluster.topic_ids import ZERO_TOPIC_ID
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from validators.topic_config import TopicConfig, num_partitions


def _plan(ctx: Context, topic: Any) -> tuple[int, int, dict[str, Any]] | Problem:
    """(partitions, replication factor, configs) of one requested topic, or its problem."""
    partitions, factor = int(topic.num_partitions), int(topic.replication_factor)
    if topic.assignments:
        if partitions != -1 or factor != NO_REPLICATION_FACTOR:
            return ErrorCode.invalid_request, ("Both numPartitions or replicationFactor and replicasAssignments were "
                                               "set. Both cannot be used at the same time.")
        partitions = len(topic.assignments)
        factor = max((len(a.broker_ids) for a in topic.assignments), default=1)
    elif partitions == -1:
        partitions = num_partitions(ctx.registry().defaults)
    if (problem := partitions_problem(partitions)) is not None:
        return problem
    if factor == NO_REPLICATION_FACTOR:
        factor = 1
    if (problem := replication_problem(ctx, factor)) is not None:
        return problem
    names = [c.name for c in topic.configs]
    if len(set(names)) < len(names):
        return ErrorCode.invalid_config, "Duplicate config keys"
    return partitions, factor, {c.name: c.value for c in topic.configs}


async def create_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_TOPICS, request.api_version)
    names = [t.name for t in request.body.topics]
    creatable = set(names) if access.authorize_cluster(ctx, request, AclOperation.CREATE, log_if_denied=False) \
        else access.authorized_names(ctx, request, AclOperation.CREATE, ResourceType.TOPIC, names)
    configs_visible = access.authorized_names(ctx, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    duplicated = {n for n in names if names.count(n) > 1}
    results = []
    for topic in request.body.topics:
        name = topic.name
        outcome: Problem | tuple[TopicConfig, int, uuid.UUID]
        if name in duplicated:
            outcome = ErrorCode.invalid_request, "Duplicate topic name."
        elif name not in creatable:
            outcome = ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED
        elif ctx.topic_store is None:
            outcome = ErrorCode.policy_violation, refusal(ctx, "create the topic")
        else:
            outcome = await _create(ctx, topic, bool(request.body.validate_only))
        if len(outcome) == 2:  # a problem
            code, message = outcome  # type: ignore[misc]
            config_code = ErrorCode.topic_authorization_failed \
                if name not in configs_visible and code != ErrorCode.topic_authorization_failed else ErrorCode.none
            results.append(build(module.CreatableTopicResult, name=name, topic_id=ZERO_TOPIC_ID, error_code=code,
                                 error_message=message, topic_config_error_code=config_code, num_partitions=-1,
                                 replication_factor=NO_REPLICATION_FACTOR, configs=None))
            continue
        config, factor, topic_id = outcome  # type: ignore[misc]
        visible = name in configs_visible
        configs = None if request.api_version < 5 else tuple(build(module.CreatableTopicConfigs, name=e.name, value=e.value, read_only=e.read_only,
                              config_source=int(e.source), is_sensitive=False)
                        for e in topic_entries(config, ctx.registry().defaults)) if visible else ()
        results.append(build(module.CreatableTopicResult, name=name, topic_id=topic_id, error_code=ErrorCode.none,
                             error_message=None,
                             topic_config_error_code=ErrorCode.none if visible else ErrorCode.topic_authorization_failed,
                             num_partitions=config.partitions, replication_factor=factor, configs=configs))
    return build(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


async def _create(ctx: Context, topic: Any, validate_only: bool) -> Problem | tuple[TopicConfig, int, uuid.UUID]:
    store = ctx.topic_store
    assert store is not None
    plan = _plan(ctx, topic)
    if isinstance(plan[0], ErrorCode):
        return plan  # type: ignore[return-value]
    partitions, factor, configs = plan  # type: ignore[misc]
    checked = validated(ctx, topic.name, partitions, configs)
    if not isinstance(checked, TopicConfig):
        return checked
    if ctx.registry().get(topic.name) is not None:
        return ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists."
    if validate_only:
        return checked, factor, ZERO_TOPIC_ID
    created = await in_store(lambda: store.create(topic.name, partitions, {k: str(v) for k, v in configs.items()}))
    if isinstance(created, tuple):
        return created
    return checked, factor, uuid.UUID(created.topic_id)


API = register(Api(ApiKey.CREATE_TOPICS, (2, 7), create_topics, acls=(
    Acl(AclOperation.CREATE, ResourceType.CLUSTER),
    Acl(AclOperation.CREATE, ResourceType.TOPIC),
    Acl(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC),
)))
