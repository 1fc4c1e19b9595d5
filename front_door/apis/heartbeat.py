"""Heartbeat (key 12, v0-v4): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin
(`groups/classic_group_membership.py` `heartbeat`). Asked of a node that does not coordinate the group:
NOT_COORDINATOR. Without READ on the group: GROUP_AUTHORIZATION_FAILED.
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
    body = request.body
    if not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed  # KafkaApis.handleHeartbeatRequest
    elif (moved := ctx.coordinator_error(body.group_id, request.node_id)) is not None:
        error = moved
    else:
        error = ctx.groups.heartbeat(body.group_id, body.generation_id, body.member_id,
                                     getattr(body, "group_instance_id", None))
    return build(response_module(ApiKey.HEARTBEAT, request.api_version).HeartbeatResponse,
                 throttle_time=NO_THROTTLE, error_code=error)


API = register(Api(ApiKey.HEARTBEAT, (0, 4), handle, acls=(Acl(AclOperation.READ, ResourceType.GROUP),)))
