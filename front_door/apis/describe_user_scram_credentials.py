"""DescribeUserScramCredentials (key 50, v0, KIP-554): which SCRAM mechanisms and iterations each user has
(`kafka-configs.sh --describe --entity-type users`), never a salt or key. Kafka's rules
(`KafkaApis.handleDescribeUserScramCredentialsRequest`, `ScramControlManager.describeScramCredentials`):
DESCRIBE on the CLUSTER; no users named lists every user; a named user without credentials gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.access import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from front_door.security.scram_credentials import MECHANISM_TYPES

UNAVAILABLE = "the front door's users are unavailable: its security topic cannot be read"


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version)

    def response(code: ErrorCode, message: str | None, results: tuple[Any, ...] = ()) -> Any:
        return build(module.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, results=results)

    if not authorize_cluster(ctx, request, AclOperation.DESCRIBE):
        return response(ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED)
    if ctx.credentials is None:
        return response(ErrorCode.kafka_storage_error, UNAVAILABLE)
    users = ctx.credentials.users()
    named = [u.name for u in request.body.users] if request.body.users else None
    results = []
    counts = Counter(named or ())
    for name in dict.fromkeys(named) if named is not None else list(users):
        if counts[name] > 1:
            code, message, infos = (ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials for the same "
                                    f"user twice in a single request: {name}", ())
        elif name not in users:
            code, message, infos = (ErrorCode.resource_not_found,
                                    f"Attempt to describe a user credential that does not exist: {name}", ())
        else:
            code, message = ErrorCode.none, None
            infos = tuple(build(module.CredentialInfo, mechanism=MECHANISM_TYPES[c.mechanism], iterations=c.iterations)
                          for c in users[name])
        results.append(build(module.DescribeUserScramCredentialsResult, user=name, error_code=code,
                             error_message=message, credential_infos=infos))
    return response(ErrorCode.none, None, tuple(results))


API = register(Api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, (0, 0), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.CLUSTER),
)))
