"""LeaveGroup (key 13, v0-v5; several members at once from v3, KIP-345): members leave and the group
rebalances (`groups/classic_group_membership.py` `leave`). Before v3 the one member's error is the answer's.
Asked of a node that does not coordinate the group: NOT_COORDINATOR. Without READ on the group:
GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.groups.coordinator_api import LeavingMember
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

BATCHED_VERSION = 3


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.LEAVE_GROUP, version)
    if version >= BATCHED_VERSION:
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [LeavingMember(body.member_id, None)]
    if not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        # KafkaApis.handleLeaveGroupRequest (LeaveGroupRequest.getErrorResponse: no members)
        return build(module.LeaveGroupResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.group_authorization_failed, members=())
    if (moved := ctx.coordinator_error(body.group_id, request.node_id)) is not None:
        error, results = moved, []
    else:
        error, results = ctx.groups.leave(body.group_id, leaving)
    if version < BATCHED_VERSION and error == ErrorCode.none and results:
        error = results[0][1]
    members = () if version < BATCHED_VERSION else tuple(
        build(module.MemberResponse, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code)
        for m, code in results)
    return build(module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error, members=members)


API = register(Api(ApiKey.LEAVE_GROUP, (0, 5), handle, acls=(Acl(AclOperation.READ, ResourceType.GROUP),)))
