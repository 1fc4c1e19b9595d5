"""ListGroups (key 16, v0-v5): the groups this node coordinates, as a Kafka broker lists its own (the
admin client asks every broker and merges), filtered by state (v4+, KIP-518) and type (v5+, KIP-848:
every group here is "classic"). Without DESCRIBE on the cluster, only the groups the principal may DESCRIBE.
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

GROUP_TYPE = "classic"


async def handle(ctx: Context, request: Request) -> Any:
    body = request.body
    module = response_module(ApiKey.LIST_GROUPS, request.api_version)
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    described = [] if types and GROUP_TYPE not in types else ctx.groups.list_groups(getattr(body, "states_filter", ()))
    own = [g for g in described if ctx.coordinator_error(g.group_id, request.node_id) is None]
    # KafkaApis.handleListGroupsRequest: DESCRIBE on the cluster lists every group, else only those the
    # principal may DESCRIBE (neither denial is logged)
    if not access.authorize_cluster(ctx, request, AclOperation.DESCRIBE, log_if_denied=False):
        visible = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP,
                                          (g.group_id for g in own), log_if_denied=False)
        own = [g for g in own if g.group_id in visible]
    groups = tuple(build(module.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type,
                         group_state=g.state.value, group_type=GROUP_TYPE) for g in own)
    return build(module.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)


API = register(Api(ApiKey.LIST_GROUPS, (0, 5), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.CLUSTER),
    Acl(AclOperation.DESCRIBE, ResourceType.GROUP),
)))
