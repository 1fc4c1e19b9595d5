"""AlterClientQuotas (key 49, v0-v1, KIP-546): set or remove client quotas (`kafka-configs.sh --alter
--entity-type ips --entity-name 10.1.2.3 --add-config connection_creation_rate=10`, or `--entity-default`).

Kafka's rules (`ControllerApis.handleAlterClientQuotas`, `ClientQuotaControlManager`): ALTER_CONFIGS on the
CLUSTER, else every entry CLUSTER_AUTHORIZATION_FAILED; per entity, INVALID_REQUEST for a quota key given
twice, an empty entity, an unknown entity type or an empty name, an IP combined with a user or client id, an
IP that does not resolve, a key the entity type does not have, a value not above 0, a fraction or more than
an INT for connection_creation_rate. `validate_only` checks and stores nothing.

The door enforces connection creation rates per IP (`connection_quotas.py`). User and client-id quotas
(byte rates, request percentages) are refused with INVALID_REQUEST saying so: a quota that is stored but
not enforced would look like protection that is not there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.access import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.security_store import SecurityStoreError
from front_door.context import Context
from front_door.network.connection_quotas import (
    CONNECTION_CREATION_RATE,
    IP_ENTITY,
    QUOTAS_UNAVAILABLE,
    QuotaEntity,
    resolves,
)
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

USER_ENTITY, CLIENT_ID_ENTITY = "user", "client-id"
INT_MAX = 2**31 - 1
NOT_SERVED = ("the front door enforces connection_creation_rate quotas for IPs only (--entity-type ips); user and "
              "client-id quotas are not served")

Problem = tuple[ErrorCode, str]


async def _entity_problem(entity: dict[str, str | None]) -> Problem | None:
    """`validateEntity` and `configKeysForEntityType` (a name looked up off the door's loop)."""
    if not entity:
        return ErrorCode.invalid_request, "Invalid empty client quota entity"
    for entity_type, name in entity.items():
        if entity_type not in (USER_ENTITY, CLIENT_ID_ENTITY, IP_ENTITY):
            return ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return ErrorCode.invalid_request, f"Empty {entity_type} not supported"
    if IP_ENTITY in entity:
        if USER_ENTITY in entity or CLIENT_ID_ENTITY in entity:
            return ErrorCode.invalid_request, ("Invalid quota entity combination, IP entity shouldnot be combined "
                                               "with User or ClientId")
        ip = entity[IP_ENTITY]
        if ip is not None and not await asyncio.to_thread(resolves, ip):
            return ErrorCode.invalid_request, f"{ip} is not a valid IP or resolvable host."
        return None
    return ErrorCode.invalid_request, NOT_SERVED


def _value_problem(key: str, value: float) -> Problem | None:
    """`validateQuotaKeyValue` for the IP entity's one key, an INT."""
    if key != CONNECTION_CREATION_RATE:
        return ErrorCode.invalid_request, f"Invalid configuration key {key}"
    if value <= 0.0:
        return ErrorCode.invalid_request, f"Quota {key} must be greater than 0"
    if value > INT_MAX:
        return ErrorCode.invalid_request, f"Proposed value for {key} is too large for an INT."
    if abs(value % 1.0) > 1e-6:
        return ErrorCode.invalid_request, f"{key} cannot be a fractional value."
    return None


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.ALTER_CLIENT_QUOTAS, request.api_version)
    entries = request.body.entries

    def result(entry: Any, problem: Problem | None) -> Any:
        return module.EntryData(error_code=problem[0] if problem else ErrorCode.none,
                                error_message=problem[1] if problem else None,
                                entity=tuple(module.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                                             for e in entry.entity))

    def response(results: list[Any]) -> Any:
        return build(module.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(results))

    if not authorize_cluster(ctx, request, AclOperation.ALTER_CONFIGS):
        denied = (ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED)
        return response([result(entry, denied) for entry in entries])
    results = []
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for entry in entries:
        entity = {e.entity_type: e.entity_name for e in entry.entity}
        key = tuple(sorted(entity.items(), key=lambda item: item[0]))
        keys = [op.key for op in entry.ops]
        if key in seen:
            problem: Problem | None = (ErrorCode.invalid_request, f"Ignoring duplicate entity {entity}")
        elif len(set(keys)) < len(keys):
            duplicate = next(k for k in keys if keys.count(k) > 1)
            problem = (ErrorCode.invalid_request,
                       f"Duplicate quota key {duplicate} not updating quota for this entity {entity}")
        else:
            problem = await _entity_problem(entity) or next(
                (p for op in entry.ops if not op.remove and (p := _value_problem(op.key, float(op.value)))), None)
        seen.add(key)
        if problem is None and not request.body.validate_only:
            problem = await _alter(ctx, QuotaEntity(entity[IP_ENTITY]), entry.ops)
        results.append(result(entry, problem))
    return response(results)


async def _alter(ctx: Context, entity: QuotaEntity, ops: Any) -> Problem | None:
    if ctx.quotas is None or not ctx.quotas.stored:
        return ErrorCode.kafka_storage_error, QUOTAS_UNAVAILABLE
    quotas = ctx.quotas.described().get(entity, {})
    for op in ops:
        if op.remove:
            quotas.pop(op.key, None)
        else:
            quotas[op.key] = float(op.value)
    try:
        await ctx.quotas.write(entity, quotas)
    except SecurityStoreError as e:
        return ErrorCode.kafka_storage_error, str(e)
    return None


API = register(Api(ApiKey.ALTER_CLIENT_QUOTAS, (0, 1), handle, acls=(
    Acl(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER),
)))
