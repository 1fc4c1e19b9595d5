"""SyncGroup (key 14, v0-v5): the leader hands in the assignment it computed, every member gets its
own (`groups/classic_group_membership.py` `sync`). Asked of a node that does not coordinate the group:
NOT_COORDINATOR. Without READ on the group: GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.groups.coordinator_api import SyncResult
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def handle(ctx: Context, request: Request) -> Any:
    body = request.body
    module = response_module(ApiKey.SYNC_GROUP, request.api_version)
    if not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        result = SyncResult(ErrorCode.group_authorization_failed)  # KafkaApis.handleSyncGroupRequest
    elif (moved := ctx.coordinator_error(body.group_id, request.node_id)) is not None:
        result = SyncResult(moved)
    else:
        result = await ctx.groups.sync(
            body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None),
            getattr(body, "protocol_type", None), getattr(body, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in body.assignments})
    return build(module.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error,
                 protocol_type=result.protocol_type, protocol_name=result.protocol_name, assignment=result.assignment)


API = register(Api(ApiKey.SYNC_GROUP, (0, 5), handle, acls=(Acl(AclOperation.READ, ResourceType.GROUP),)))
