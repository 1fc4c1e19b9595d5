"""AlterUserScramCredentials (key 51, v0, KIP-554): add, replace or delete users' SCRAM credentials
(`kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name
alice`). The client sends the salt, the iterations and the salted password, never the password; the door
keeps the stored and server keys (`security/scram_credentials.py`).

Kafka's rules (`KafkaApis.handleAlterUserScramCredentialsRequest`, `ScramControlManager`): ALTER on the
CLUSTER; per user, the first problem wins — an empty name (UNACCEPTABLE_CREDENTIAL), a user altered twice
for one mechanism (DUPLICATE_RESOURCE), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), too few or too
many iterations or an empty salt or password (UNACCEPTABLE_CREDENTIAL), deleting what does not exist
(RESOURCE_NOT_FOUND). A user with a problem has none of its changes applied; one result per user.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.access import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from front_door.api_keys import ApiKey
from front_door.apis.describe_user_scram_credentials import UNAVAILABLE
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.security_store import SecurityStoreError
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from front_door.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
)
from kafka_cluster.security import SaslMechanism

_BY_TYPE = {code: mechanism for mechanism, code in MECHANISM_TYPES.items()}


def _problem(ctx: Context, change: Any, deletion: bool, counts: Counter[tuple[str, int]]) -> tuple[ErrorCode, str] | None:
    if not change.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if counts[(change.name, change.mechanism)] > 1:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    mechanism = _BY_TYPE.get(change.mechanism)
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if deletion:
        assert ctx.credentials is not None
        if ctx.credentials.get(change.name, mechanism) is None:
            return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if not change.salt or not change.salted_password:
        return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    return None


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request.api_version)
    body = request.body
    changes = [(d, True) for d in body.deletions] + [(u, False) for u in body.upsertions]
    users = list(dict.fromkeys(change.name for change, _ in changes))

    def result(name: str, code: ErrorCode, message: str | None) -> Any:
        return build(module.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message)

    def response(results: list[Any]) -> Any:
        return build(module.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(results))

    if not authorize_cluster(ctx, request, AclOperation.ALTER):
        return response([result(u, ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED) for u in users])
    if ctx.credentials is None:
        return response([result(u, ErrorCode.kafka_storage_error, UNAVAILABLE) for u in users])
    credentials = ctx.credentials
    counts = Counter((change.name, change.mechanism) for change, _ in changes)
    problems: dict[str, tuple[ErrorCode, str]] = {}
    for change, deletion in changes:
        if change.name not in problems and (problem := _problem(ctx, change, deletion, counts)) is not None:
            problems[change.name] = problem
    results = []
    for name in users:
        if name in problems:
            results.append(result(name, *problems[name]))
            continue
        try:
            for change, deletion in changes:
                if change.name != name:
                    continue
                mechanism: SaslMechanism = _BY_TYPE[change.mechanism]
                if deletion:
                    await credentials.delete(name, mechanism)
                else:
                    await credentials.upsert(name, ScramCredential.from_salted_password(
                        mechanism, change.salt, change.salted_password, change.iterations))
        except SecurityStoreError as e:
            results.append(result(name, ErrorCode.kafka_storage_error, str(e)))
            continue
        results.append(result(name, ErrorCode.none, None))
    return response(results)


API = register(Api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, (0, 0), handle, acls=(
    Acl(AclOperation.ALTER, ResourceType.CLUSTER),
)))
