"""AlterConfigs (key 33, v0-v2): the older, whole-set form of IncrementalAlterConfigs that admin clients still
send (librdkafka's `AlterConfigs`, Java's deprecated `alterConfigs`). A TOPIC resource's configs become exactly
the ones given (`incremental_alter_configs.alter_topic`); ALTER_CONFIGS on the topic, else
TOPIC_AUTHORIZATION_FAILED. The door's broker configs change through IncrementalAlterConfigs only: a BROKER
resource gets INVALID_REQUEST saying so.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.describe_configs import ResourceType
from front_door.apis.incremental_alter_configs import Problem, alter_topic
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation
from front_door.security.acls import ResourceType as AclResourceType


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.ALTER_CONFIGS, request.api_version)
    results = []
    for resource in request.body.resources:
        problem: Problem | None
        if resource.resource_type != ResourceType.TOPIC:
            problem = ErrorCode.invalid_request, ("the front door alters broker configs with IncrementalAlterConfigs "
                                                  "(kafka-configs.sh --alter), not AlterConfigs")
        elif not access.authorize(ctx, request, AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC,
                                  resource.resource_name):
            problem = ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED
        else:
            problem = await alter_topic(ctx, resource.resource_name, resource.configs,
                                        bool(request.body.validate_only), incremental=False)
        results.append(build(module.AlterConfigsResourceResponse,
                             error_code=problem[0] if problem else ErrorCode.none,
                             error_message=problem[1] if problem else None,
                             resource_type=resource.resource_type, resource_name=resource.resource_name))
    return build(module.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


API = register(Api(ApiKey.ALTER_CONFIGS, (0, 2), handle, acls=(
    Acl(AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC),
)))
