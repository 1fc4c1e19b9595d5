"""DeleteGroups (key 42, v0-v2): an empty group and its committed offsets go (tombstones on the groups
topic); a group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND
(`groups/coordinator.py` `delete`). Asked of a node that does not coordinate a group: NOT_COORDINATOR.
Without DELETE on a group: GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_GROUPS, request.api_version)
    results = []
    for group_id in request.body.groups_names:
        if not access.authorize(ctx, request, AclOperation.DELETE, ResourceType.GROUP, group_id):
            error = ErrorCode.group_authorization_failed  # KafkaApis.handleDeleteGroupsRequest
        elif (moved := ctx.coordinator_error(group_id, request.node_id)) is not None:
            error = moved
        else:
            error = await ctx.groups.delete(group_id)
        results.append(build(module.DeletableGroupResult, group_id=group_id, error_code=error))
    return build(module.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


API = register(Api(ApiKey.DELETE_GROUPS, (0, 2), handle, acls=(Acl(AclOperation.DELETE, ResourceType.GROUP),)))
