"""DescribeClientQuotas (key 48, v0-v1, KIP-546): the front door has no client quotas, so every filter
matches nothing. `kafka-configs.sh --describe --entity-type users` asks for quotas beside the SCRAM
credentials (`DescribeUserScramCredentials`); DESCRIBE_CONFIGS on the CLUSTER, as Kafka checks."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.access import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.security.acls import AclOperation
from front_door.wire import Request


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, request.api_version)
    if not authorize_cluster(ctx, request, AclOperation.DESCRIBE_CONFIGS):
        return build(module.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_AUTHORIZATION_FAILED, entries=None)
    return build(module.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, entries=())
