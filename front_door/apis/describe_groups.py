"""DescribeGroups (key 15, v0-v6): each group's state, protocol and members; subscriptions and
assignments only of a Stable group (`ClassicGroup.describe`). A group that does not exist is "Dead" with
no error before v6 and GROUP_ID_NOT_FOUND from v6 (KIP-1043). Asked of a node that does not coordinate a
group: NOT_COORDINATOR for that group. A group the principal may not DESCRIBE: GROUP_AUTHORIZATION_FAILED;
the authorized operations (v3+) when asked and an authorizer is configured.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.metadata import AUTHORIZED_OPERATIONS_OMITTED
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.groups.classic_group import GroupState
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

NOT_FOUND_ERROR_VERSION = 6


def _group(ctx: Context, request: Request, module: Any, group_id: str) -> Any:
    version, node_id = request.api_version, request.node_id
    empty = {"group_id": group_id, "protocol_type": "", "protocol_data": "", "members": (),
             "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    if not access.authorize(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        # KafkaApis.handleDescribeGroupsRequest: DescribeGroupsResponse.groupError
        return build(module.DescribedGroup, error_code=ErrorCode.group_authorization_failed,
                     error_message=access.GROUP_AUTHORIZATION_FAILED, group_state="", **empty)
    # KafkaApis.handleDescribeGroupsRequest: the authorized operations of every group answered without error
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if getattr(request.body, "include_authorized_operations", False):  # every supported one without an authorizer
        operations = access.authorized_operations(ctx, request, ResourceType.GROUP, group_id)
    if (moved := ctx.coordinator_error(group_id, node_id)) is not None:
        return build(module.DescribedGroup, error_code=moved, error_message=None, group_state="", **empty)
    d = ctx.groups.describe(group_id)
    if d is None:
        if version >= NOT_FOUND_ERROR_VERSION:
            return build(module.DescribedGroup, error_code=ErrorCode.group_id_not_found,
                         error_message=f"Group {group_id} not found.", group_state=GroupState.DEAD.value, **empty)
        return build(module.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                     group_state=GroupState.DEAD.value, **{**empty, "authorized_operations": operations})
    members = tuple(build(module.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                          member_assignment=m.assignment) for m in d.members)
    return build(module.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
                 group_state=d.state.value, protocol_type=d.protocol_type, protocol_data=d.protocol, members=members,
                 authorized_operations=operations)


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_GROUPS, request.api_version)
    groups = tuple(_group(ctx, request, module, g) for g in request.body.groups)
    return build(module.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


API = register(Api(ApiKey.DESCRIBE_GROUPS, (0, 6), handle, acls=(Acl(AclOperation.DESCRIBE, ResourceType.GROUP),)))
