"""CreateAcls (key 30, v1-v3: Kafka 4.x's range, all kio has), as `AclApis.handleCreateAcls` answers it:

- a creation with an UNKNOWN (0) code: the request does not parse (`CreateAclsRequest.validate`) and the
  connection is closed;
- without an authorizer, every creation SECURITY_DISABLED "No Authorizer is configured.";
- without ALTER on the cluster, every creation CLUSTER_AUTHORIZATION_FAILED;
- a creation with an ANY resource type, an ANY or MATCH pattern type, an ANY operation or permission
  (Kafka's `ResourcePattern`/`AccessControlEntry` constructors throw): every creation UNKNOWN_SERVER_ERROR;
- per creation INVALID_REQUEST: a CLUSTER resource not named kafka-cluster, an empty name, and what
  `AclControlManager.validateNewAcl` refuses (a code Kafka does not know, a principal without a colon);
- the others are stored (an existing one is a success that adds nothing) and apply on every door.
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
from front_door.security.acls import CLUSTER_NAME, AclBinding, AclOperation, ResourceType
from front_door.security.authorizer import AclError

NO_AUTHORIZER = "No Authorizer is configured."


def _precheck(binding: AclBinding) -> AclError | None:
    """`AclApis.handleCreateAcls`' own checks, before the authorizer's."""
    if binding.pattern.resource_type == ResourceType.CLUSTER and binding.pattern.name != CLUSTER_NAME:
        return AclError(ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not binding.pattern.name:
        return AclError(ErrorCode.invalid_request, "Invalid empty resource name")
    return None


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_ACLS, request.api_version)
    count = len(request.body.creations)

    def answer(results: list[AclError | None]) -> Any:
        return build(module.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
            build(module.AclCreationResult, error_code=ErrorCode.none if r is None else r.code,
                  error_message=None if r is None else r.message) for r in results))

    try:
        bindings = acl_requests.creations(request.body)
    except acl_requests.UnreadableAclRequestError as e:
        return CloseConnection(f"CreateAcls: {e}")
    except acl_requests.IllegalBindingError:
        bindings = None
    if ctx.authorizer is None:
        return answer([AclError(ErrorCode.security_disabled, NO_AUTHORIZER)] * count)
    if not access.authorize_cluster(ctx, request, AclOperation.ALTER):
        return answer([AclError(ErrorCode.cluster_authorization_failed, access.cluster_denied_message(request))] * count)
    if bindings is None:
        return answer([AclError(ErrorCode.unknown_server_error, None)] * count)
    results: list[AclError | None] = [_precheck(b) for b in bindings]
    valid = [b for b, r in zip(bindings, results, strict=True) if r is None]
    created = iter(await ctx.authorizer.create(valid))
    return answer([r if r is not None else next(created) for r in results])


API = register(Api(ApiKey.CREATE_ACLS, (1, 3), handle, acls=(Acl(AclOperation.ALTER, ResourceType.CLUSTER),)))
