"""InitProducerId (key 22) for idempotent producers: a new producer id, epoch 0, on every call — what
Kafka's `TransactionCoordinator.handleInitProducerId` does when there is no transactional id (the
existing id and epoch a v3+ client sends are not needed: its new id starts a fresh sequence space).
Sequence and epoch checks stay with the gateway's stage (`validators.producer_state`).
A transactional id is refused: the front door has no transaction coordinator. Without a transactional id
the principal needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679), else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.produce import TRANSACTIONS_REFUSED
from front_door.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from front_door.wire import Request

log = logging.getLogger("gateway.front_door")


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.INIT_PRODUCER_ID, request.api_version)
    if request.body.transactional_id is not None:
        return build(module.InitProducerIdResponse, throttle_time=NO_THROTTLE, producer_id=-1, producer_epoch=-1,
                     error_code=ErrorCode.transactional_id_authorization_failed, error_message=TRANSACTIONS_REFUSED)
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
