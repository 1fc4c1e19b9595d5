"""EndTxn (key 26, v0-v5): a transactional producer commits or aborts its transaction. WRITE on the
transactional id (`KafkaApis.handleEndTxnRequest`), then the coordinator (`transactions/coordinator.py`)
answers once the PrepareCommit/PrepareAbort state is durable; the markers reach the partitions after it.
v5 is transaction version 2 (KIP-890, `TransactionVersion.for_end_txn`): the epoch is bumped and the answer
carries the producer id and epoch of the producer's next transaction.
"""

from __future__ import annotations

from typing import Any

from contract.transaction_version import TransactionVersion
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
        return build(module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=refused, producer_id=-1,
                     producer_epoch=-1)
    assert ctx.transactions is not None
    error, producer_id, epoch = await ctx.transactions.end_transaction(
        body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed),
        TransactionVersion.for_end_txn(request.api_version))
    return build(module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=kafka_error(error),
                 producer_id=producer_id, producer_epoch=epoch)


API = register(Api(ApiKey.END_TXN, (0, 5), handle, acls=(Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),)))
