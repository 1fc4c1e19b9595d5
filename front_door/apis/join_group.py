"""JoinGroup (key 11, v0-v9): a consumer joins a classic group (`groups/classic_group_rebalance.py` has the
rules: KIP-394's MEMBER_ID_REQUIRED, KIP-345's static members, protocol selection). The answer waits for the
rebalance to complete. Asked of a node that does not coordinate the group: NOT_COORDINATOR. Without READ
on the group: GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.groups.classic_group import Protocol
from front_door.groups.coordinator_api import JoinRequest, JoinResult
from front_door.network.messages import NO_THROTTLE, build, millis, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

# v4+: a member without an id is given one first (KIP-394)
REQUIRE_KNOWN_MEMBER_ID_VERSION = 4
# v7+: protocol_type and a nullable protocol_name in the answer
NULLABLE_PROTOCOL_VERSION = 7


def _response(module: Any, version: int, r: JoinResult) -> Any:
    name = r.protocol_name if r.protocol_name is not None or version >= NULLABLE_PROTOCOL_VERSION else ""
    members = tuple(build(module.JoinGroupResponseMember, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          metadata=m.metadata) for m in r.members)
    return build(module.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=r.error, generation_id=r.generation,
                 protocol_type=r.protocol_type, protocol_name=name, leader=r.leader,
                 skip_assignment=r.skip_assignment, member_id=r.member_id, members=members)


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.JOIN_GROUP, version)
    # KafkaApis.handleJoinGroupRequest: READ on the group (JoinGroupRequest.getErrorResponse: no member id)
    if not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(module, version, JoinResult(ErrorCode.group_authorization_failed, ""))
    if (moved := ctx.coordinator_error(body.group_id, request.node_id)) is not None:
        return _response(module, version, JoinResult(moved, body.member_id))
    session_ms = millis(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)  # v0: the session timeout bounds the rebalance too
    result = await ctx.groups.join(JoinRequest(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None), session_timeout_ms=session_ms,
        rebalance_timeout_ms=millis(rebalance) if rebalance is not None else session_ms,
        protocol_type=body.protocol_type, protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
        client_id=request.client_id or "", client_host=request.client_host,
        require_known_member_id=version >= REQUIRE_KNOWN_MEMBER_ID_VERSION))
    return _response(module, version, result)


API = register(Api(ApiKey.JOIN_GROUP, (0, 9), handle, acls=(Acl(AclOperation.READ, ResourceType.GROUP),)))
