"""DescribeAcls (key 29, v1-v3: Kafka 4.x's range, all kio has), as `AclApis.handleDescribeAcls` answers it:
a filter with an UNKNOWN element does not parse (`DescribeAclsRequest.normalizeAndValidate`: the
connection is closed); without an authorizer SECURITY_DISABLED; without DESCRIBE on the cluster
CLUSTER_AUTHORIZATION_FAILED; otherwise every binding the filter matches (`AclBindingFilter.matches`),
grouped by resource pattern (`DescribeAclsResponse.aclsResources`), in a stable order.
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
from front_door.security.acls import AccessControlEntry, AclOperation, ResourcePattern, ResourceType

NO_AUTHORIZER = "No Authorizer is configured on the broker"


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_ACLS, request.api_version)
    try:
        binding_filter = acl_requests.describe_filter(request.body)
    except acl_requests.UnreadableAclRequestError as e:
        return CloseConnection(f"DescribeAcls: {e}")

    def error(code: ErrorCode, message: str) -> Any:
        return build(module.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                     resources=())

    if ctx.authorizer is None:
        return error(ErrorCode.security_disabled, NO_AUTHORIZER)
    if not access.authorize_cluster(ctx, request, AclOperation.DESCRIBE):
        return error(ErrorCode.cluster_authorization_failed, access.cluster_denied_message(request))
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in ctx.authorizer.describe(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = tuple(
        build(module.DescribeAclsResource, resource_type=p.resource_type, resource_name=p.name,
              pattern_type=p.pattern_type, acls=tuple(
                  build(module.AclDescription, principal=e.principal, host=e.host, operation=e.operation,
                        permission_type=e.permission) for e in entries))
        for p, entries in by_pattern.items())
    return build(module.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 resources=resources)


# Kafka 4.x's range for each ACL API (v0 was removed in 4.0, KIP-896), and all kio has: v1-v3
API = register(Api(ApiKey.DESCRIBE_ACLS, (1, 3), handle, acls=(Acl(AclOperation.DESCRIBE, ResourceType.CLUSTER),)))
