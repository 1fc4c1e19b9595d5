"""DescribeClientQuotas (key 48, v0-v1, KIP-546): the door's client quotas, the per-IP connection creation
rates (`connection_quotas.py`), as `ClientQuotaControlManager.describeClientQuotas` filters them:
`kafka-configs.sh --describe --entity-type ips [--entity-name IP | --entity-default]`, and the quotas asked
for beside the SCRAM credentials by `--describe --entity-type users` (none: user quotas are not served).

DESCRIBE_CONFIGS on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED. A component filters by an entity type
with a match type: 0 that name, 1 the default entity, 2 any entity of the type; `strict` keeps only
entities with no other types. An empty or repeated entity type, or an IP filter beside a user or client-id
one, is INVALID_REQUEST; an unknown entity type UNSUPPORTED_VERSION (Kafka's exceptions for them).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.access import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from front_door.api_keys import ApiKey
from front_door.apis.alter_client_quotas import CLIENT_ID_ENTITY, USER_ENTITY
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.connection_quotas import IP_ENTITY
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_ANY = object()  # a component matching every entity of its type


def _filters(components: Any) -> tuple[dict[str, object], tuple[ErrorCode, str] | None]:
    """Each entity type's wanted name (None: the default; _ANY: any), or the request's error."""
    wanted: dict[str, object] = {}
    for c in components:
        if not c.entity_type:
            return wanted, (ErrorCode.invalid_request, "Invalid empty entity type.")
        if c.entity_type in wanted:
            return wanted, (ErrorCode.invalid_request,
                            f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (IP_ENTITY, USER_ENTITY, CLIENT_ID_ENTITY):
            return wanted, (ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            wanted[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            wanted[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            wanted[c.entity_type] = _ANY
        else:
            return wanted, (ErrorCode.invalid_request, f"Unexpected match type {c.match_type}")
    if IP_ENTITY in wanted and (USER_ENTITY in wanted or CLIENT_ID_ENTITY in wanted):
        return wanted, (ErrorCode.invalid_request, "Invalid entity filter component combination. IP filter component "
                                                   "should not be used with user or clientId filter component.")
    return wanted, None


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, request.api_version)

    def error(code: ErrorCode, message: str) -> Any:
        return build(module.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, entries=None)

    if not authorize_cluster(ctx, request, AclOperation.DESCRIBE_CONFIGS):
        return error(ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED)
    wanted, problem = _filters(request.body.components)
    if problem is not None:
        return error(*problem)
    entries = []
    for entity, values in (ctx.quotas.described() if ctx.quotas is not None else {}).items():
        names: dict[str, str | None] = {IP_ENTITY: entity.ip}
        if request.body.strict and len(names) != len(wanted):
            continue
        if any(t not in names or (w is not _ANY and names[t] != w) for t, w in wanted.items()):
            continue
        entries.append(module.EntryData(
            entity=tuple(module.EntityData(entity_type=t, entity_name=n) for t, n in names.items()),
            values=tuple(module.ValueData(key=k, value=v) for k, v in sorted(values.items()))))
    return build(module.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, entries=tuple(entries))


API = register(Api(ApiKey.DESCRIBE_CLIENT_QUOTAS, (0, 1), handle, acls=(
    Acl(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER),
)))
