"""DeleteAcls (key 31, v1-v3: Kafka 4.x's range, all kio has), as `AclApis.handleDeleteAcls` answers it: a
filter with an UNKNOWN (0) code does not parse (`DeleteAclsRequest.normalizeAndValidate`: the connection is
closed); without an authorizer every filter SECURITY_DISABLED; without ALTER on the cluster every filter
CLUSTER_AUTHORIZATION_FAILED; otherwise per filter the bindings it matched, each deleted on every door
(`AclControlManager.deleteAcls`; a filter with a code Kafka does not know: INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import CloseConnection, Request
from front_door.security import acl_requests
from front_door.security.acls import AclOperation, ResourceType
from front_door.security.authorizer import AclError, DeleteResult

NO_AUTHORIZER = "No Authorizer is configured."


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_ACLS, request.api_version)
    try:
        filters = acl_requests.delete_filters(request.body)
    except acl_requests.UnreadableAclRequestError as e:
        return CloseConnection(f"DeleteAcls: {e}")

    def answer(results: list[DeleteResult]) -> Any:
        return build(module.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
            build(module.DeleteAclsFilterResult,
                  error_code=ErrorCode.none if r.error is None else r.error.code,
                  error_message=None if r.error is None else r.error.message,
                  matching_acls=tuple(
                      build(module.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                            resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                            pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                            operation=b.entry.operation, permission_type=b.entry.permission)
                      for b in r.deleted))
            for r in results))

    if ctx.authorizer is None:
        return answer([DeleteResult(AclError(ErrorCode.security_disabled, NO_AUTHORIZER))] * len(filters))
    if not access.authorize_cluster(ctx, request, AclOperation.ALTER):
        denied = AclError(ErrorCode.cluster_authorization_failed, access.cluster_denied_message(request))
        return answer([DeleteResult(denied)] * len(filters))
    return answer(await ctx.authorizer.delete(filters))


API = register(Api(ApiKey.DELETE_ACLS, (1, 3), handle, acls=(Acl(AclOperation.ALTER, ResourceType.CLUSTER),)))
