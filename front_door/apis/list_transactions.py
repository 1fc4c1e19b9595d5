"""ListTransactions (key 66, v0-v1): the transactions this node coordinates, as `kafka-transactions.sh list`
gathers them from every broker (`TransactionStateManager.listTransactionStates`): filtered by state names (an
unknown one is named back in `unknown_state_filters`), producer ids and, from v1, by how long they have run;
only ids the principal may DESCRIBE.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from validators.transaction_state import TransactionState


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.LIST_TRANSACTIONS, request.api_version)
    if ctx.transactions is None:
        return build(module.ListTransactionsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.coordinator_not_available, unknown_state_filters=(), transaction_states=())
    names = {s.kafka_name: s for s in TransactionState}
    unknown = tuple(f for f in body.state_filters if f not in names)
    states = {names[f] for f in body.state_filters if f in names}
    producers = set(body.producer_id_filters)
    duration = int(getattr(body, "duration_filter", -1))  # v1: running at least this long (ms); -1: any
    now = int(time.time() * 1000)
    listed = []
    for tid, meta in sorted(ctx.transactions.transactions().items()):
        if ctx.transaction_coordinator(tid) != request.node_id:
            continue
        if (states and meta.state not in states) or (producers and meta.producer_id not in producers):
            continue
        if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < duration):
            continue
        listed.append((tid, meta))
    allowed = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                      (tid for tid, _ in listed))
    return build(module.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 unknown_state_filters=unknown, transaction_states=tuple(
                     build(module.TransactionState, transactional_id=tid, producer_id=meta.producer_id,
                           transaction_state=meta.state.kafka_name)
                     for tid, meta in listed if tid in allowed))


API = register(Api(ApiKey.LIST_TRANSACTIONS, (0, 1), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
)))
