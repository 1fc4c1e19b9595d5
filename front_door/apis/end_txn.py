"""EndTxn (key 26, v0-v4): a transactional producer commits or aborts its transaction. WRITE on the
transactional id (`KafkaApis.handleEndTxnRequest`), then the coordinator (`transactions/coordinator.py`)
answers once the PrepareCommit/PrepareAbort state is durable; the markers reach the partitions after it.
"""

from __future__ import annotations

from typing import Any

from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.transaction_requests import kafka_error, transaction_error
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.END_TXN, request.api_version)
    refused = transaction_error(ctx, request, body.transactional_id)
    if refused is not None:
        return build(module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=refused)
    assert ctx.transactions is not None
    error = await ctx.transactions.end_transaction(body.transactional_id, body.producer_id, body.producer_epoch,
                                                   bool(body.committed))
    return build(module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=kafka_error(error))


# the classic transaction protocol: the client's AddPartitionsToTxn (v4+ is the brokers' form) and EndTxn
# before KIP-890's v5; no `transaction.version` feature is finalized, so clients stay on it
API = register(Api(ApiKey.END_TXN, (0, 4), handle, acls=(Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),)))
