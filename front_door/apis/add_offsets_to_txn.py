"""AddOffsetsToTxn (key 25, v0-v3): a transactional producer's consumer group joins its transaction, as its
offsets partition (`__consumer_offsets`' partition of the group, `groups/placement.py`), so the transaction's
end reaches the offsets it commits with TxnOffsetCommit (`sendOffsetsToTransaction`).

Kafka's order (`KafkaApis.handleAddOffsetsToTxnRequest`): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else GROUP_AUTHORIZATION_FAILED; then the coordinator.
The group's coordinator may be on any door: the transaction's end reaches it through the groups topic and the
transaction state topic (`groups/transactional_offsets.py`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.transaction_requests import kafka_error, transaction_error
from front_door.context import Context
from front_door.groups.placement import OFFSETS_TOPIC, partition_for
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.ADD_OFFSETS_TO_TXN, request.api_version)
    refused = transaction_error(ctx, request, body.transactional_id)
    if refused is None and not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        refused = ErrorCode.group_authorization_failed
    if refused is not None:
        return build(module.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=refused)
    assert ctx.transactions is not None
    error = await ctx.transactions.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                                  [(OFFSETS_TOPIC, partition_for(body.group_id))])
    return build(module.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=kafka_error(error))


API = register(Api(ApiKey.ADD_OFFSETS_TO_TXN, (0, 3), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    Acl(AclOperation.READ, ResourceType.GROUP),
)))
