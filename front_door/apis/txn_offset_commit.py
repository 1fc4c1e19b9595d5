"""TxnOffsetCommit (key 28, v0-v5): offsets a transactional producer commits for a consumer group inside its
transaction (`sendOffsetsToTransaction`), held by the group's coordinator (and written to the groups topic as pending) until the transaction ends
(`groups/transactional_offsets.py`): visible as the group's committed offsets once it commits, dropped if it
aborts. v3 carries the consumer's generation and member id, checked as an OffsetCommit's (KIP-447).

Kafka's order (`KafkaApis.handleTxnOffsetCommitRequest`): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition; READ on the group, else GROUP_AUTHORIZATION_FAILED;
READ on each topic (TOPIC_AUTHORIZATION_FAILED) and each partition known (UNKNOWN_TOPIC_OR_PARTITION); asked of
a node that does not coordinate the group, NOT_COORDINATOR.

v5 is a transaction version 2 producer's (KIP-890): it sends no AddOffsetsToTxn, and the group's offsets
partition is added to its transaction here, on its behalf, before the offsets are held (the group coordinator's
`ADD_PARTITION` verification, `network/add_partitions_to_txn_manager.py`); if it cannot be, every partition
gets the coordinator's answer (a coordinator that cannot be reached: COORDINATOR_NOT_AVAILABLE, as Kafka's group
coordinator answers NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.groups.placement import OFFSETS_TOPIC, partition_for
from front_door.network.add_partitions_to_txn_manager import leader_answer
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from validators.errors import Errors
from validators.transaction_state import TransactionMetadata, TransactionState

log = logging.getLogger("gateway.front_door.transactions")

NO_LEADER_EPOCH = -1
NO_GENERATION = -1
NO_TRANSACTION_START = -1
# How long a TxnOffsetCommit waits for this door to see the group's offsets partition in its transaction
# (AddOffsetsToTxn, or v5's add on the producer's behalf, written by the transaction's coordinator, perhaps
# another door, and followed here within moments)
ADD_OFFSETS_SEEN_TIMEOUT_S = 10.0
FIRST_ADD_PARTITION_VERSION = 5  # TxnOffsetCommit v5: the group coordinator adds the offsets partition


async def _add_offsets_partition(ctx: Context, transactional_id: str, producer_id: int, epoch: int,
                                 group_id: str) -> ErrorCode | None:
    """The group's offsets partition added to the producer's transaction; the error for every partition when it
    could not be (`GroupCoordinatorService.handleOperationException` after the leader's answer)."""
    manager = ctx.add_partitions_to_txn
    added = leader_answer(Errors.COORDINATOR_NOT_AVAILABLE) if manager is None else await manager.add(
        ctx.transaction_coordinator(transactional_id), transactional_id, producer_id, epoch,
        [(OFFSETS_TOPIC, partition_for(group_id))])
    if added.error is Errors.NONE:
        return None
    if added.error is Errors.NOT_ENOUGH_REPLICAS:
        return ErrorCode.coordinator_not_available
    return ErrorCode(added.error.code)


async def _transaction_start(ctx: Context, transactional_id: str, producer_id: int, group_id: str) -> int:
    """The start of the producer's open transaction with the group's offsets partition in it, once this door has
    seen it (`transactions/view.py`): the pending offsets are told apart by it, and every earlier transaction of
    the producer has been seen to end. A transaction this door never sees so (the client skipped AddOffsetsToTxn)
    is held as Kafka holds it, without an end to come."""
    if ctx.transactions is None:
        return NO_TRANSACTION_START
    partition = (OFFSETS_TOPIC, partition_for(group_id))

    def joined(meta: TransactionMetadata | None) -> bool:
        return (meta is not None and meta.producer_id == producer_id and meta.state is TransactionState.ONGOING
                and partition in meta.partitions)

    meta = await ctx.transactions.store.view.wait_for(transactional_id, joined, ADD_OFFSETS_SEEN_TIMEOUT_S)
    if not joined(meta):
        log.warning("transactional id %s: offsets for group %s outside a transaction this door has seen it add "
                    "them to; held without an end", transactional_id, group_id)
        return NO_TRANSACTION_START
    assert meta is not None
    return meta.start_ms


async def handle(ctx: Context, request: Request) -> Any:
    body, module = request.body, response_module(ApiKey.TXN_OFFSET_COMMIT, request.api_version)
    wanted = [(t.name, p) for t in body.topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    refused = None
    if not access.authorize(ctx, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        refused = ErrorCode.transactional_id_authorization_failed
    elif not access.authorize(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        refused = ErrorCode.group_authorization_failed
    else:
        refused = ctx.coordinator_error(body.group_id, request.node_id)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    if refused is None:
        registry = ctx.registry()
        readable = access.authorized_names(ctx, request, AclOperation.READ, ResourceType.TOPIC,
                                           {name for name, _ in wanted})
        now_ms = int(time.time() * 1000)
        for name, p in wanted:
            config = registry.get(name)
            if name not in readable:
                errors[name, p.partition_index] = ErrorCode.topic_authorization_failed
            elif config is None or not 0 <= p.partition_index < config.partitions:
                errors[name, p.partition_index] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[name, p.partition_index] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                    p.committed_metadata or "", now_ms)
        if offsets and request.api_version >= FIRST_ADD_PARTITION_VERSION:
            refused = await _add_offsets_partition(ctx, body.transactional_id, body.producer_id,
                                                   body.producer_epoch, body.group_id)
        if offsets and refused is None:
            start = await _transaction_start(ctx, body.transactional_id, body.producer_id, body.group_id)
            errors.update(await ctx.groups.commit_transactional(
                body.producer_id, start, body.group_id, getattr(body, "generation_id", NO_GENERATION),
                getattr(body, "member_id", ""), getattr(body, "group_instance_id", None), offsets))
    by_topic: dict[str, list[Any]] = {}
    for name, p in wanted:
        by_topic.setdefault(name, []).append(build(module.TxnOffsetCommitResponsePartition,
                                                   partition_index=p.partition_index,
                                                   error_code=refused or errors[name, p.partition_index]))
    return build(module.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
        build(module.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()))


API = register(Api(ApiKey.TXN_OFFSET_COMMIT, (0, 5), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    Acl(AclOperation.READ, ResourceType.GROUP),
    Acl(AclOperation.READ, ResourceType.TOPIC),
)))
