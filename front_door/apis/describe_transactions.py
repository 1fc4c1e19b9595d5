"""DescribeTransactions (key 65, v0): a transactional id's state at its coordinator, as
`kafka-transactions.sh describe` shows it (`KafkaApis.handleDescribeTransactionsRequest`,
`TransactionCoordinator.handleDescribeTransactions`): DESCRIBE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; asked of a node that does not coordinate it NOT_COORDINATOR; an unknown
id TRANSACTIONAL_ID_NOT_FOUND; an empty one INVALID_REQUEST.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

NO_TIME = tz_aware_from_i64(-1)  # Kafka's -1: no transaction started (the field is not nullable)


def _state(ctx: Context, request: Request, module: Any, tid: str) -> Any:
    def refused(code: ErrorCode) -> Any:
        return build(module.TransactionState, error_code=code, transactional_id=tid, transaction_state="",
                     transaction_timeout=datetime.timedelta(0), transaction_start_time=NO_TIME, producer_id=-1,
                     producer_epoch=-1, topics=())

    if not access.authorize(ctx, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        return refused(ErrorCode.transactional_id_authorization_failed)
    if ctx.transactions is None:
        return refused(ErrorCode.coordinator_not_available)
    if not tid:
        return refused(ErrorCode.invalid_request)
    if ctx.transaction_coordinator(tid) != request.node_id:
        return refused(ErrorCode.not_coordinator)
    meta = ctx.transactions.describe(tid)
    if meta is None:
        return refused(ErrorCode.transactional_id_not_found)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return build(module.TransactionState, error_code=ErrorCode.none, transactional_id=tid,
                 transaction_state=meta.state.kafka_name,
                 transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
                 transaction_start_time=tz_aware_from_i64(meta.start_ms), producer_id=meta.producer_id,
                 producer_epoch=meta.producer_epoch,
                 topics=tuple(build(module.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_TRANSACTIONS, request.api_version)
    return build(module.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(
        _state(ctx, request, module, tid) for tid in request.body.transactional_ids))


API = register(Api(ApiKey.DESCRIBE_TRANSACTIONS, (0, 0), handle, acls=(
    Acl(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
)))
