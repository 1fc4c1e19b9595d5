"""FindCoordinator (key 10, v0-v6; batched keys from v4, KIP-699): a group's coordinator is the node
`groups/placement.py` names — the same on every node, so a client asking any of them goes to one place; a
transactional id's (key type 1) is the one `transactions/placement.py` names. Without its groups topic
(unreadable at start) every group gets COORDINATOR_NOT_AVAILABLE, with the reason; without the transaction
state topic every transactional id.
A group the principal may not DESCRIBE gets GROUP_AUTHORIZATION_FAILED (a transactional id
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), before anything else.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

TRANSACTIONS_UNAVAILABLE = "The transaction state topic is not readable: see the front door's start-up warning."


class KeyType(IntEnum):
    """`FindCoordinatorRequest.CoordinatorType`"""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2


def _find(ctx: Context, request: Request, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) of one key; authorization first (`KafkaApis.getCoordinator`)."""
    if key_type == KeyType.GROUP and not access.authorize(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, access.GROUP_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == KeyType.TRANSACTION and not access.authorize(ctx, request, AclOperation.DESCRIBE,
                                                                ResourceType.TRANSACTIONAL_ID, key):
        return (ErrorCode.transactional_id_authorization_failed, access.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                -1, "", -1)
    if key_type == KeyType.TRANSACTION:
        if not key:
            return ErrorCode.invalid_request, "The transactional id must not be empty", -1, "", -1
        if ctx.transactions is None:
            return ErrorCode.coordinator_not_available, TRANSACTIONS_UNAVAILABLE, -1, "", -1
        return _node(ctx, ctx.transaction_coordinator(key))
    if key_type != KeyType.GROUP:
        return ErrorCode.invalid_request, f"Unsupported coordinator type {key_type}", -1, "", -1
    if not key:  # KafkaApis: an empty group id is not a group
        return ErrorCode.invalid_request, "The group id must not be empty", -1, "", -1
    if ctx.groups.unavailable is not None:  # as Kafka answers while __consumer_offsets has no leader
        return ErrorCode.coordinator_not_available, ctx.groups.unavailable, -1, "", -1
    return _node(ctx, ctx.coordinator(key))


def _node(ctx: Context, node_id: int) -> tuple[ErrorCode, str | None, int, str, int]:
    node = ctx.node(node_id)
    if node is None:  # moving between doors, or led by a door without this listener: the client asks again
        return ErrorCode.coordinator_not_available, "The coordinator is not available.", -1, "", -1
    return ErrorCode.none, None, node.node_id, node.host, node.port


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    module = response_module(ApiKey.FIND_COORDINATOR, version)
    key_type = getattr(body, "key_type", KeyType.GROUP)
    if version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            code, message, node_id, host, port = _find(ctx, request, key, key_type)
            coordinators.append(build(module.Coordinator, key=key, node_id=node_id, host=host, port=port,
                                      error_code=code, error_message=message))
        return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
    code, message, node_id, host, port = _find(ctx, request, body.key, key_type)
    return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=code,
                 error_message=message, node_id=node_id, host=host, port=port)


API = register(Api(ApiKey.FIND_COORDINATOR, (0, 6), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.GROUP),
    Acl(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
)))
