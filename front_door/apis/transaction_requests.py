"""What every transactional request checks first, in Kafka's order (`KafkaApis`): WRITE on the transactional
id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED; not asked of a broker's AddPartitionsToTxn v4+), then that this node
coordinates it (`TransactionStateManager`: NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE while the door has no
transaction state)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.context import Context
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from validators.errors import Errors


def transaction_error(ctx: Context, request: Request, transactional_id: str) -> ErrorCode | None:
    """None when the request may go to the coordinator."""
    if not access.authorize(ctx, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    return coordinator_error(ctx, request, transactional_id)


def coordinator_error(ctx: Context, request: Request, transactional_id: str) -> ErrorCode | None:
    """None when this node coordinates the transactional id (a broker's request is not asked for WRITE on it)."""
    if ctx.transactions is None:
        return ErrorCode.coordinator_not_available
    if ctx.transaction_coordinator(transactional_id) != request.node_id:
        return ErrorCode.not_coordinator
    return None


def kafka_error(error: Errors) -> ErrorCode:
    """The wire error code of a coordinator's answer."""
    return ErrorCode(error.code)
