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
door); configs other than the connection caps are refused (the rest are read-only here); a topic's configs are
its registry's, refused with POLICY_VIOLATION as CreateTopics is (`topic_admin.py`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access, topic_admin
from front_door.api_keys import ApiKey
from front_door.broker_configs import (
    BROKER_CONFIGS_UNAVAILABLE,
    CONNECTION_SETTINGS,
    is_dynamic,
    value_problem,
)
from front_door.connection_limits import ConnectionLimitError
from front_door.context import Context
from front_door.describe_configs import ResourceType
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.security.acls import AclOperation
from front_door.security.acls import ResourceType as AclResourceType
from front_door.security.store import SecurityStoreError
from front_door.wire import Request

Problem = tuple[ErrorCode, str]
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
                problem = ErrorCode.policy_violation, topic_admin.refusal(ctx, "change the topic's configs")
        else:
            problem = ErrorCode.invalid_request, (f"the front door alters BROKER configs only, not resource type "
                                                  f"{resource.resource_type}")
        results.append(build(module.AlterConfigsResourceResponse,
                             error_code=problem[0] if problem else ErrorCode.none,
                             error_message=problem[1] if problem else None,
                             resource_type=resource.resource_type, resource_name=resource.resource_name))
    return build(module.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
