"""IncrementalAlterConfigs (key 44, v0-v1, KIP-339): what `kafka-configs.sh --alter` sends. The door takes the
cluster default's dynamic connection caps (`broker_configs.py`):
`kafka-configs.sh --alter --entity-type brokers --entity-default --add-config max.connections.per.ip=100`.

Kafka's rules (`KafkaApis.handleIncrementalAlterConfigsRequest`, `ConfigAdminManager.preprocess` and
`validateBrokerConfigChange`, `DynamicBrokerConfig.validate`): ALTER_CONFIGS on the CLUSTER for a BROKER
resource (on the topic for a TOPIC one), else CLUSTER_AUTHORIZATION_FAILED (TOPIC_AUTHORIZATION_FAILED);
INVALID_REQUEST for a config key given twice, a null value to set, an unknown operation, a value its config
does not take or settings that do not go together (Kafka's messages); INVALID_CONFIG for APPEND or SUBTRACT on
a config that is not a list. `validate_only` checks and stores nothing.

Where the door differs, on purpose, each with a message saying so: a broker's own id (`--entity-name 1`) is
refused, as the door's nodes are not brokers with configs of their own (the cluster default applies to every
door); configs other than the connection caps are refused (the rest are read-only here). A TOPIC resource's
configs change in the registry (`alter_topic`): every door shows them and the stage decides with them from the
next micro-batch on (the KIP-937 windows among them); a value `LogConfig` refuses is INVALID_CONFIG.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis import topic_admin
from front_door.apis.describe_configs import ResourceType
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.security_store import SecurityStoreError
from front_door.context import Context
from front_door.network.broker_configs import (
    BROKER_CONFIGS_UNAVAILABLE,
    CONNECTION_SETTINGS,
    is_dynamic,
    value_problem,
)
from front_door.network.connection_limits import ConnectionLimitError
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation
from front_door.security.acls import ResourceType as AclResourceType

Problem = topic_admin.Problem
NOT_PER_BROKER = ("the front door takes broker configs for the cluster default only (--entity-default): its "
                  "nodes share one set of connection caps")
ONLY_CONNECTION_CAPS = ("the front door changes these broker configs dynamically: "
                        f"{', '.join(CONNECTION_SETTINGS)} and listener.name.<listener>.{{max.connections,"
                        "max.connection.creation.rate}}; not")


class OpType(IntEnum):
    """`AlterConfigOp.OpType`"""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _changed(current: dict[str, str], configs: Any) -> dict[str, str] | Problem:
    """The cluster default's dynamic configs after `configs` (`prepareIncrementalConfigs`), or the problem."""
    names = [c.name for c in configs]
    if len(set(names)) < len(names):
        return ErrorCode.invalid_request, "Error due to duplicate config keys"
    nulls = [c.name for c in configs if c.config_operation != OpType.DELETE and c.value is None]
    if nulls:
        return ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
    if unknown := [c.config_operation for c in configs if c.config_operation not in tuple(OpType)]:
        return ErrorCode.invalid_request, f"Unknown operations type {unknown[0]}"
    if refused := [c.name for c in configs if not is_dynamic(c.name)]:
        return ErrorCode.invalid_request, f"{ONLY_CONNECTION_CAPS} {', '.join(refused)}"
    changed = dict(current)
    for c in configs:
        if c.config_operation in (OpType.APPEND, OpType.SUBTRACT):  # none of the caps is a LIST
            verb = "append" if c.config_operation == OpType.APPEND else "subtract"
            return ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {c.name}"
        if c.config_operation == OpType.DELETE:
            changed.pop(c.name, None)
        elif (problem := value_problem(c.name, c.value)) is not None:
            return ErrorCode.invalid_request, problem
        else:
            changed[c.name] = c.value.strip()
    return changed


async def _alter_broker(ctx: Context, request: Request, resource: Any) -> Problem | None:
    if resource.resource_name:
        return ErrorCode.invalid_request, NOT_PER_BROKER
    configs = ctx.broker_configs
    if configs is None or not configs.stored:
        return ErrorCode.kafka_storage_error, BROKER_CONFIGS_UNAVAILABLE
    changed = _changed(configs.dynamic, resource.configs)
    if isinstance(changed, tuple):
        return changed
    try:
        configs.check_dynamic(changed)
    except ConnectionLimitError as e:
        return ErrorCode.invalid_request, str(e)
    if request.body.validate_only:
        return None
    try:
        await configs.write(changed)
    except SecurityStoreError as e:
        return ErrorCode.kafka_storage_error, str(e)
    return None


LIST_TOPIC_CONFIGS = ("cleanup.policy", "follower.replication.throttled.replicas",
                      "leader.replication.throttled.replicas")  # Kafka's LIST-typed topic configs


def _topic_changed(current: Mapping[str, str], configs: Any) -> dict[str, str] | Problem:
    """A topic's configs after `configs` (`ConfigAdminManager.prepareIncrementalConfigs`), or the problem."""
    names = [c.name for c in configs]
    if len(set(names)) < len(names):
        return ErrorCode.invalid_request, "Error due to duplicate config keys"
    nulls = [c.name for c in configs if c.config_operation != OpType.DELETE and c.value is None]
    if nulls:
        return ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
    changed = dict(current)
    for c in configs:
        if c.config_operation not in tuple(OpType):
            return ErrorCode.invalid_request, f"Unknown operations type {c.config_operation}"
        if c.config_operation == OpType.DELETE:
            changed.pop(c.name, None)
        elif c.config_operation == OpType.SET:
            changed[c.name] = c.value
        elif c.name not in LIST_TOPIC_CONFIGS:
            verb = "append" if c.config_operation == OpType.APPEND else "subtract"
            return ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {c.name}"
        else:
            items = [v for v in changed.get(c.name, "").split(",") if v]
            given = [v.strip() for v in c.value.split(",") if v.strip()]
            items = items + [v for v in given if v not in items] if c.config_operation == OpType.APPEND \
                else [v for v in items if v not in given]
            changed[c.name] = ",".join(items)
    return changed


async def alter_topic(ctx: Context, name: str, configs: Any, validate_only: bool,
                      incremental: bool = True) -> Problem | None:
    """A topic's configs changed in the registry (`kafka_cluster/registry_store.py`): incrementally, or (AlterConfigs)
    replaced by `configs` as a whole; checked as CreateTopics checks them (INVALID_CONFIG)."""
    spec = ctx.topic_store.topic(name) if ctx.topic_store is not None else None
    if ctx.registry().get(name) is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist"
    if ctx.topic_store is None or spec is None:
        return ErrorCode.policy_violation, topic_admin.refusal(ctx, "change the topic's configs")
    if incremental:
        changed = _topic_changed(spec.configs, configs)
        if isinstance(changed, tuple):
            return changed
    else:
        names = [c.name for c in configs]
        if len(set(names)) < len(names):
            return ErrorCode.invalid_request, "Error due to duplicate config keys"
        changed = {c.name: c.value for c in configs}
    checked = topic_admin.validated(ctx, name, spec.partitions, changed)
    if isinstance(checked, tuple):
        return checked
    if validate_only:
        return None
    store = ctx.topic_store
    done = await topic_admin.in_store(lambda: store.alter(name, configs={k: str(v) for k, v in changed.items()}))
    return done if isinstance(done, tuple) else None


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.api_version)
    results = []
    for resource in request.body.resources:
        problem: Problem | None
        if resource.resource_type == ResourceType.BROKER:
            if not access.authorize_cluster(ctx, request, AclOperation.ALTER_CONFIGS):
                problem = ErrorCode.cluster_authorization_failed, access.CLUSTER_AUTHORIZATION_FAILED
            else:
                problem = await _alter_broker(ctx, request, resource)
        elif resource.resource_type == ResourceType.TOPIC:
            if not access.authorize(ctx, request, AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC,
                                    resource.resource_name):
                problem = ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED
            else:
                problem = await alter_topic(ctx, resource.resource_name, resource.configs,
                                            bool(request.body.validate_only))
        else:
            problem = ErrorCode.invalid_request, (f"the front door alters BROKER configs only, not resource type "
                                                  f"{resource.resource_type}")
        results.append(build(module.AlterConfigsResourceResponse,
                             error_code=problem[0] if problem else ErrorCode.none,
                             error_message=problem[1] if problem else None,
                             resource_type=resource.resource_type, resource_name=resource.resource_name))
    return build(module.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


API = register(Api(ApiKey.INCREMENTAL_ALTER_CONFIGS, (0, 1), handle, acls=(
    Acl(AclOperation.ALTER_CONFIGS, AclResourceType.CLUSTER),
    Acl(AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC),
)))
