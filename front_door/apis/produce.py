"""Produce (key 0, v3-v13): each partition's records become one ingress message, and the answer is the
gateway's response in Kafka's ProduceResponse fields (Kafka's `ProduceRequest.json`).

- The batch is not looked at here: the gateway's stage is the leader and decides everything a broker's
  `LogValidator` would (unknown topic, CRC, size, timestamps, sequences), so every batch ends appended
  or dead-lettered with its error — never dropped at the door. The one exception is a batch larger than
  the ingress hop can carry (a cluster whose ingress topic or brokers take less than the gateway asked
  for, `contract.limits`): MESSAGE_TOO_LARGE here, logged, as it could never reach the leader.
- The batch's bytes go on as kio parsed them out of the request (`bytes`, not copied again here). An
  authorized transactional id goes with them (`gw.transactional.id`): only then does the stage take a
  transactional batch (`validators.log_validator`).
- A connection's produces hand their batches to the ingress topic in the order they were read, as a broker reads
  one request of a connection at a time (`network/ingress_order.py`): one that waits first (a transaction version
  2 producer's partitions added to its transaction, below) holds back the produces read after it.
- acks=0: the batch goes out with `gw.acks=0` and nothing is answered (Kafka sends no response); a
  partition refused at the door closes the connection instead, as Kafka does.
- A partition whose response does not come within the request's `timeout_ms` gets REQUEST_TIMED_OUT;
  the gateway still decides its batch exactly once (an idempotent client's retry is then acknowledged
  as a duplicate with the original offsets).
- Refused at the door, as a broker refuses before any append: a topic the principal may not WRITE
  (TOPIC_AUTHORIZATION_FAILED, `KafkaApis.handleProduceRequest`; nothing of it reaches the ingress topic;
  an idempotent batch needs nothing more since KIP-679), acks outside {-1, 0, 1}
  (INVALID_REQUIRED_ACKS), transactional records without WRITE on the request's transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), an unknown topic id in v13 (UNKNOWN_TOPIC_ID), and a registry
  partition another node of this door leads (NOT_LEADER_OR_FOLLOWER, with the leader where the version has
  room for it, KIP-951: `leader_hints.py`) — a client with stale metadata refreshes it and retries
  there. A partition another door leads is taken, unlike Kafka (`Context.sibling_leader`): a client told
  leader A, then B, then A again within a millisecond, by doors a moment apart, can stay bound to a door its
  metadata no longer names (librdkafka then keeps producing there and never migrates: "leader unchanged, not
  migrating away from preferred replica"); refused, it would get NOT_LEADER_OR_FOLLOWER until the next
  membership change. A topic or partition the registry lacks still goes
  to the gateway, which answers UNKNOWN_TOPIC_OR_PARTITION.
- v12+ is a transaction version 2 producer's (KIP-890): before its transactional batches go on, their
  partitions are added to its transaction at the coordinator, on its behalf (`KafkaApis.handleProduceRequest`
  with `ADD_PARTITION`; `network/add_partitions_to_txn_manager.py`), and a partition that cannot be added
  gets the coordinator's answer as Kafka's leader gives it (INVALID_PRODUCER_EPOCH for a fenced producer,
  CONCURRENT_TRANSACTIONS while its previous transaction completes, NOT_ENOUGH_REPLICAS while the coordinator
  cannot be reached, ...). Transactional batches of more than one producer in one request are
  INVALID_PRODUCER_ID_MAPPING (`InvalidPidMappingException`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.leader_hints import current_leader, node_endpoints
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.ingress_bridge import Answers
from front_door.network.add_partitions_to_txn_manager import leader_answer
from front_door.network.ingress_order import Turn
from front_door.network.messages import NO_THROTTLE, build, error_code, millis, response_module, timestamp
from front_door.network.wire import CloseConnection, Request
from front_door.security.acls import AclOperation, ResourceType
from validators.codec.record_batch import ATTRIBUTES_OFFSET, PRODUCER_ID_OFFSET, TRANSACTIONAL_FLAG_MASK
from validators.errors import Errors

_FLAGS_AT = ATTRIBUTES_OFFSET + 1  # a v2 batch's attributes are an int16: the flags are in its low byte
_PRODUCER = struct.Struct(">qh")  # a v2 batch's producer id and epoch, at PRODUCER_ID_OFFSET
_PRODUCER_AT = PRODUCER_ID_OFFSET
FIRST_ADD_PARTITION_VERSION = 12  # Produce v12+: the leader adds the partition (TransactionVersion 2)


def _is_transactional(records: bytes | None) -> bool:
    return records is not None and len(records) > _FLAGS_AT and bool(records[_FLAGS_AT] & TRANSACTIONAL_FLAG_MASK)


def _transactional_records(body: Any) -> bool:
    """`RequestUtils.hasTransactionalRecords`: a partition's first batch is transactional."""
    return any(_is_transactional(pd.records) for td in body.topic_data for pd in td.partition_data)


async def _add_to_transaction(ctx: Context, transactional_id: str,
                              batches: dict[tuple[Any, int], tuple[str, bytes]]) -> dict[tuple[Any, int], Any]:
    """The transactional batches' partitions added to the producer's transaction (`ReplicaManager
    .handleProduceAppend` with `ADD_PARTITION`): the answer of each partition that could not be."""
    producers = {_PRODUCER.unpack_from(records, _PRODUCER_AT) for _, records in batches.values()
                 if len(records) >= _PRODUCER_AT + _PRODUCER.size}
    if len(producers) != 1:
        return dict.fromkeys(batches, _refused(ErrorCode.invalid_producer_id_mapping,
                                                "Transactional records contained more than one producer ID"))
    ((producer_id, epoch),) = producers
    manager = ctx.add_partitions_to_txn
    added = leader_answer(Errors.COORDINATOR_NOT_AVAILABLE) if manager is None else await manager.add(
        ctx.transaction_coordinator(transactional_id), transactional_id, producer_id, epoch,
        sorted({(name, index) for (_, index), (name, _) in batches.items()}))
    if added.error is Errors.NONE:
        return {}
    return dict.fromkeys(batches, _refused(added.error.code, added.message))


def _refused(code: int, message: str | None = None, leader: int | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "leader": leader}


def _partition_response(module: Any, index: int, r: Mapping[str, Any]) -> Any:
    errors = tuple(build(module.BatchIndexAndErrorMessage, batch_index=e["batch_index"],
                         batch_index_error_message=e.get("message"))
                   for e in r.get("record_errors") or ())
    code = r["error_code"]
    return build(module.PartitionProduceResponse, index=index, error_code=error_code(code),
                 base_offset=r["base_offset"], log_append_time=timestamp(r["log_append_time_ms"]),
                 log_start_offset=r["log_start_offset"], record_errors=errors,
                 error_message=r.get("error_message") if code != 0 else None, **current_leader(module, r.get("leader")))


async def handle(ctx: Context, request: Request) -> Any:
    """The ProduceResponse; for acks=0 None, or CloseConnection when a partition was refused."""
    # taken before anything is awaited: the connection's produces hand their batches on in the order they were read
    turn = request.ingress_order.take() if request.ingress_order is not None else None
    try:
        return await _produce(ctx, request, turn)
    finally:
        if turn is not None:
            turn.done()


async def _produce(ctx: Context, request: Request, turn: Turn | None) -> Any:
    body, version = request.body, request.api_version
    started = time.monotonic()
    refusal = None
    transactional_id = body.transactional_id
    if transactional_id is not None and not access.authorize(ctx, request, AclOperation.WRITE,
                                                             ResourceType.TRANSACTIONAL_ID, transactional_id):
        transactional_id = None  # transactional records are then refused (before any topic), plain ones go on
        if _transactional_records(body):
            refusal = _refused(ErrorCode.transactional_id_authorization_failed)
    txn_refused = refusal is not None
    if refusal is None and body.acks not in (-1, 0, 1):
        refusal = _refused(ErrorCode.invalid_required_acks)
    # (topic as the request named it, partition) -> the answer
    answers: dict[tuple[Any, int], Any] = {}
    handed: dict[str, tuple[Any, int]] = {}  # request id -> (key, partition), answered into `gateway`
    sendable: dict[tuple[Any, int], tuple[str, bytes]] = {}  # (key, partition) -> (topic, batch) for the gateway
    topic_ids = ctx.topic_ids() if version >= 13 else {}
    registry = ctx.registry()
    names = [topic_ids.get(td.topic_id) if version >= 13 else td.name for td in body.topic_data]
    # WRITE on each topic (KafkaApis.handleProduceRequest), after the transactional id and before the acks
    # (ReplicaManager.appendRecords checks them on the authorized partitions only)
    writable = access.authorized_names(ctx, request, AclOperation.WRITE, ResourceType.TOPIC,
                                       () if txn_refused else (n for n in names if n is not None))
    for td, name in zip(body.topic_data, names, strict=True):
        key = td.topic_id if version >= 13 else td.name
        config = registry.get(name) if name is not None else None
        for pd in td.partition_data:
            if name is not None and not txn_refused and name not in writable:
                answers[(key, pd.index)] = _refused(ErrorCode.topic_authorization_failed)
                continue
            if refusal is not None or name is None:
                answers[(key, pd.index)] = refusal or _refused(ErrorCode.unknown_topic_id)
                continue
            known = config is not None and 0 <= pd.index < config.partitions
            if known and (leader := ctx.sibling_leader(name, pd.index, request.node_id)) is not None:
                answers[(key, pd.index)] = _refused(ErrorCode.not_leader_or_follower, leader=leader)
                continue
            records = b"" if pd.records is None else pd.records
            too_large = ctx.bridge.too_large(name, pd.index, len(records))
            if too_large is not None:
                answers[(key, pd.index)] = too_large
                continue
            sendable[(key, pd.index)] = (name, records)
    transactional = {where: batch for where, batch in sendable.items() if _is_transactional(batch[1])}
    if transactional and transactional_id is not None and version >= FIRST_ADD_PARTITION_VERSION:
        answers.update(await _add_to_transaction(ctx, transactional_id, transactional))
    if turn is not None:
        await turn.wait()  # only after a produce read before this one that is still adding its partitions
    gateway = Answers() if body.acks != 0 else None
    for (key, index), (name, records) in sendable.items():
        if (key, index) in answers:
            continue
        request_id = ctx.bridge.send(name, index, records, gateway, client_id=request.client_id, acks=body.acks,
                                     principal=str(request.principal), transactional_id=transactional_id)
        handed[request_id] = (key, index)
    if turn is not None:
        turn.done()  # the next produce of the connection may hand its batches on while this one waits for answers
    if gateway is None:
        return CloseConnection(f"error during produce request with correlation id {request.correlation_id} with "
                               "ack=0") if answers else None
    if handed:
        waiting = ctx.metrics.produce_waiting
        waiting.inc()
        try:
            await gateway.wait(millis(body.timeout) / 1000)
        finally:
            waiting.dec()
        for request_id, where in handed.items():
            if (response := gateway.responses.get(request_id)) is None:
                ctx.bridge.forget(request_id)
                response = _refused(ErrorCode.request_timed_out)
            answers[where] = response
    ctx.metrics.produce_latency(time.monotonic() - started)
    module = response_module(ApiKey.PRODUCE, version)
    leaders = [a["leader"] for a in answers.values() if a.get("leader") is not None]
    topics = []
    for td in body.topic_data:
        key = td.topic_id if version >= 13 else td.name
        partitions = tuple(_partition_response(module, pd.index, answers[(key, pd.index)]) for pd in td.partition_data)
        topics.append(build(module.TopicProduceResponse, name=td.name if version < 13 else None,
                            topic_id=td.topic_id if version >= 13 else None, partition_responses=partitions))
    return build(module.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE,
                 **node_endpoints(module, ctx, leaders))


API = register(Api(ApiKey.PRODUCE, (3, 13), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TOPIC),
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
)))
