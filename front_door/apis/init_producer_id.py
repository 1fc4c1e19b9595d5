"""InitProducerId (key 22). For idempotent producers: a new producer id, epoch 0, on every call — what
Kafka's `TransactionCoordinator.handleInitProducerId` does when there is no transactional id (the
existing id and epoch a v3+ client sends are not needed: its new id starts a fresh sequence space).
Sequence and epoch checks stay with the gateway's stage (`validators.producer_state`). The principal needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.

With a transactional id: WRITE on it, asked of its coordinator, which keeps the id's producer id and bumps
its epoch (`transactions/coordinator.py`; an open transaction is aborted first, CONCURRENT_TRANSACTIONS).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.transaction_requests import kafka_error, transaction_error
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, millis, response_module
from front_door.network.wire import Request
from front_door.security.acls import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger("gateway.front_door")


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.INIT_PRODUCER_ID, request.api_version)
    body = request.body
    if body.transactional_id is not None:
        refused = transaction_error(ctx, request, body.transactional_id)
        if refused is not None:
            return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, producer_id=-1, producer_epoch=-1,
                         error_code=refused)
        assert ctx.transactions is not None
        expected = None
        if getattr(body, "producer_id", -1) >= 0:  # v3+: the id and epoch the producer has (KIP-360)
            expected = (body.producer_id, body.producer_epoch)
        error, pid, epoch = await ctx.transactions.init_producer_id(
            body.transactional_id, millis(body.transaction_timeout), expected)
        return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, producer_id=pid, producer_epoch=epoch,
                     error_code=kafka_error(error))
    # KafkaApis.handleInitProducerIdRequest (KIP-679): IDEMPOTENT_WRITE on the cluster (not logged when
    # denied: it is the first of two ways) or WRITE on some topic
    if not (access.authorize_cluster(ctx, request, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
            or access.authorize_by_resource_type(ctx, request, AclOperation.WRITE, ResourceType.TOPIC)):
        access.denied(ctx, request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
        return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, producer_id=-1, producer_epoch=-1,
                     error_code=ErrorCode.cluster_authorization_failed)
    try:
        pid = await asyncio.to_thread(ctx.producer_ids.generate)
    except (OSError, ValueError) as e:
        log.error("producer id allocation failed: %s", e)
        return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, producer_id=-1, producer_epoch=-1,
                     error_code=ErrorCode.kafka_storage_error)
    return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 producer_id=pid, producer_epoch=0)


API = register(Api(ApiKey.INIT_PRODUCER_ID, (0, 5), handle, acls=(
    Acl(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    Acl(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER),
    Acl(AclOperation.WRITE, ResourceType.TOPIC),
)))
