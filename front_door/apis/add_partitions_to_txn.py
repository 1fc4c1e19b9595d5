"""AddPartitionsToTxn (key 24, v0-v3, the client's form; v4+ is brokers' batched verification, KIP-890): the
partitions a transactional producer is about to write join its transaction at the coordinator
(`transactions/coordinator.py`).

Kafka's order (`KafkaApis.handleAddPartitionsToTxnRequest`): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition; then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED)
and each partition known (UNKNOWN_TOPIC_OR_PARTITION), the other partitions then OPERATION_NOT_ATTEMPTED; then
the coordinator's answer for all of them.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.transaction_requests import kafka_error, transaction_error
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.ADD_PARTITIONS_TO_TXN, request.api_version)
    tid = body.v3_and_below_transactional_id
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    answers: dict[tuple[str, int], ErrorCode] = {}
    refused_all = transaction_error(ctx, request, tid)
    if refused_all is None:
        registry = ctx.registry()
        writable = access.authorized_names(ctx, request, AclOperation.WRITE, ResourceType.TOPIC,
                                           {name for name, _ in wanted})
        for name, partition in wanted:
            config = registry.get(name)
            if name not in writable:
                answers[(name, partition)] = ErrorCode.topic_authorization_failed
            elif config is None or not 0 <= partition < config.partitions:
                answers[(name, partition)] = ErrorCode.unknown_topic_or_partition
        if answers:
            refused_all = ErrorCode.operation_not_attempted
    if refused_all is None:
        assert ctx.transactions is not None
        error = await ctx.transactions.add_partitions(tid, body.v3_and_below_producer_id,
                                                      body.v3_and_below_producer_epoch, wanted)
        refused_all = kafka_error(error)
    by_topic: dict[str, list[Any]] = {}
    for name, partition in wanted:
        by_topic.setdefault(name, []).append(build(
            module.AddPartitionsToTxnPartitionResult, partition_index=partition,
            partition_error_code=answers.get((name, partition), refused_all)))
    return build(module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(
        build(module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(results))
        for name, results in by_topic.items()))


# the classic transaction protocol: the client's AddPartitionsToTxn (v4+ is the brokers' form) and EndTxn
# before KIP-890's v5; no `transaction.version` feature is finalized, so clients stay on it
API = register(Api(ApiKey.ADD_PARTITIONS_TO_TXN, (0, 3), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    Acl(AclOperation.WRITE, ResourceType.TOPIC),
)))
