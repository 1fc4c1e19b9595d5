"""AddPartitionsToTxn (key 24, v0-v5): partitions join a producer's transaction at its coordinator
(`transactions/coordinator.py`). v0-v3 are the client's form (the classic protocol): the producer adds each
partition it is about to write. v4+ are brokers' (KIP-890): a batch of transactions, each either verified
(VerifyOnly: is each partition in the open transaction? NONE or TRANSACTION_ABORTABLE) or added on a transaction
version 2 producer's behalf, as a leader does before appending its batch (`add_partitions_to_txn_manager.py`,
which sends v5 between doors).

Kafka's order (`KafkaApis.handleAddPartitionsToTxnRequest`): v4+ needs CLUSTER_ACTION on the cluster, else the
whole request is CLUSTER_AUTHORIZATION_FAILED; v0-v3 WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED);
then each partition known (UNKNOWN_TOPIC_OR_PARTITION; the groups' offsets partitions are known), the other
partitions then OPERATION_NOT_ATTEMPTED; then the coordinator's answer for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from contract.transaction_version import TransactionVersion
from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.transaction_requests import coordinator_error, kafka_error, transaction_error
from front_door.context import Context
from front_door.groups.placement import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

FIRST_BROKER_VERSION = 4

Answers = dict[tuple[str, int], ErrorCode]


def _unknown(ctx: Context, wanted: list[tuple[str, int]]) -> Answers:
    """The partitions neither the registry nor the groups' offsets topic has."""
    registry = ctx.registry()
    answers: Answers = {}
    for name, partition in wanted:
        config = registry.get(name)
        count = OFFSETS_TOPIC_PARTITIONS if name == OFFSETS_TOPIC else config.partitions if config else 0
        if not 0 <= partition < count:
            answers[(name, partition)] = ErrorCode.unknown_topic_or_partition
    return answers


async def _answers(ctx: Context, request: Request, transactional_id: str, producer_id: int, epoch: int,
                   wanted: list[tuple[str, int]], verify_only: bool = False) -> Answers:
    """Each partition's answer for one transaction."""
    broker = request.api_version >= FIRST_BROKER_VERSION
    refused_all = coordinator_error(ctx, request, transactional_id) if broker else transaction_error(
        ctx, request, transactional_id)
    answers: Answers = {}
    if refused_all is None:
        if not broker:
            writable = access.authorized_names(ctx, request, AclOperation.WRITE, ResourceType.TOPIC,
                                               {name for name, _ in wanted})
            answers = {(n, p): ErrorCode.topic_authorization_failed for n, p in wanted if n not in writable}
        answers.update((tp, code) for tp, code in _unknown(ctx, wanted).items() if tp not in answers)
        if answers:
            refused_all = ErrorCode.operation_not_attempted
    if refused_all is None:
        assert ctx.transactions is not None
        if verify_only:
            verified = ctx.transactions.verify_partitions(transactional_id, producer_id, epoch, wanted)
            return {tp: kafka_error(error) for tp, error in verified.items()}
        refused_all = kafka_error(await ctx.transactions.add_partitions(
            transactional_id, producer_id, epoch, wanted,
            TransactionVersion.for_add_partitions_to_txn(request.api_version)))
    return {tp: answers.get(tp, refused_all) for tp in wanted}


def _topic_results(module: Any, answers: Mapping[tuple[str, int], ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (name, partition), code in answers.items():
        by_topic.setdefault(name, []).append(build(module.AddPartitionsToTxnPartitionResult,
                                                   partition_index=partition, partition_error_code=code))
    return tuple(build(module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(results))
                 for name, results in by_topic.items())


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.ADD_PARTITIONS_TO_TXN, request.api_version)
    if request.api_version < FIRST_BROKER_VERSION:
        wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
        answers = await _answers(ctx, request, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                 body.v3_and_below_producer_epoch, wanted)
        return build(module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     results_by_topic_v3_and_below=_topic_results(module, answers))
    if not access.authorize_cluster(ctx, request, AclOperation.CLUSTER_ACTION):
        return build(module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=())
    results = []
    for txn in body.transactions:
        wanted = [(t.name, int(p)) for t in txn.topics for p in t.partitions]
        answers = await _answers(ctx, request, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted,
                                 bool(txn.verify_only))
        results.append(build(module.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                             topic_results=_topic_results(module, answers)))
    return build(module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 results_by_transaction=tuple(results))


API = register(Api(ApiKey.ADD_PARTITIONS_TO_TXN, (0, 5), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    Acl(AclOperation.WRITE, ResourceType.TOPIC),
    Acl(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),
)))
