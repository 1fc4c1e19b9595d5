"""What a handler asks before it acts, as Kafka's `AuthHelper` asks the authorizer for `KafkaApis`: may this
request's principal, from this client's host, do this operation on this resource? Without an authorizer
(`Context.authorizer` None) everything is allowed, as on a broker without `authorizer.class.name`.

A denial is audit-logged and counted under the request's API (`security/audit.py`), except where Kafka
asks with `logIfDenied = false` (filtering what a listing shows, a first of two alternatives).
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.index import api_key_map

from front_door.context import Context
from front_door.network.wire import Request
from front_door.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

# Kafka's `Errors` default messages, which `ApiError` sends with an error of that code
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."
GROUP_AUTHORIZATION_FAILED = "Group authorization failed."
CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = "Transactional Id authorization failed."


def api(request: Request) -> str:
    """The API's name as the front door's metrics label it ("produce", "create_acls")."""
    return api_key_map.get(request.api_key, "unknown")


def authorize(ctx: Context, request: Request, operation: AclOperation, resource_type: ResourceType, name: str,
              *, log_if_denied: bool = True) -> bool:
    """`AuthHelper.authorize`: one action on the LITERAL resource `name`."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    if authorizer.authorize(request.principal, request.host, operation, resource_type, name):
        return True
    if log_if_denied:
        authorizer.audit.denied(request.principal, request.host, api(request), operation, resource_type, name)
    return False


def authorize_cluster(ctx: Context, request: Request, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    """`AuthHelper.authorizeClusterOperation`'s question: `operation` on the CLUSTER resource."""
    return authorize(ctx, request, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def authorized_names(ctx: Context, request: Request, operation: AclOperation, resource_type: ResourceType,
                     names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
    """`AuthHelper.filterByAuthorized`: the names among `names` the principal may act on, each asked once
    (so a denial is logged and counted once per resource per request)."""
    distinct = dict.fromkeys(names)
    if ctx.authorizer is None:
        return set(distinct)
    return {n for n in distinct if authorize(ctx, request, operation, resource_type, n, log_if_denied=log_if_denied)}


def authorize_by_resource_type(ctx: Context, request: Request, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """`AuthHelper.authorizeByResourceType` (KIP-679); a denial is audited by its caller."""
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(request.principal, request.host, operation,
                                                                       resource_type)


def denied(ctx: Context, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    """Audit a denial decided from several questions (InitProducerId's IDEMPOTENT_WRITE or WRITE)."""
    if ctx.authorizer is not None:
        ctx.authorizer.audit.denied(request.principal, request.host, api(request), operation, resource_type, name)


def authorized_operations(ctx: Context, request: Request, resource_type: ResourceType, name: str) -> int:
    """`AuthHelper.authorizedOperations`: the bit field of the supported operations allowed on the resource
    (every supported one without an authorizer)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        field = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            field |= 1 << operation
        return field
    return authorizer.authorized_operations(request.principal, request.host, resource_type, name)


def cluster_denied_message(request: Request) -> str:
    """`AuthHelper.authorizeClusterOperation`'s `ClusterAuthorizationException` message, naming the session
    as Kafka's `RequestChannel.Request` does."""
    return (f"Request(session=Session({request.principal},{request.client_host or '/' + request.host}), "
            f"listenerName=ListenerName({request.listener})) is not authorized.")
