"""ApiVersions (key 18): what the front door speaks (KIP-35, KIP-511).

The version ranges are Kafka 4.x's where kio has them. The classic group protocol is served; KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe are not advertised (a client switches to the new protocol
as soon as it sees key 68); a client that sends one anyway gets UNSUPPORTED_VERSION (`unsupported.py`).
"""

from __future__ import annotations

from typing import Any

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, error_code, response_module
from front_door.network.wire import Request
from front_door.security.acl_apis import ACL_VERSIONS

# api key -> (min, max) version served
ADVERTISED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # the classic transaction protocol: the client's AddPartitionsToTxn (v4+ is the brokers' form) and EndTxn
    # before KIP-890's v5; no `transaction.version` feature is finalized, so clients stay on it
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    **ACL_VERSIONS,
}


def api_versions_body(version: int, code: int = 0) -> Any:
    """The answer; an UNSUPPORTED_VERSION one lists the ApiVersions key alone (KIP-511,
    `ApiVersionsRequest.getErrorResponse`), so the client retries in a version it shares."""
    module = response_module(ApiKey.API_VERSIONS, version)
    served = ADVERTISED if code == 0 else {ApiKey.API_VERSIONS: ADVERTISED[ApiKey.API_VERSIONS]}
    keys = tuple(build(module.ApiVersion, api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in sorted(served.items()))
    return build(module.ApiVersionsResponse, error_code=error_code(code), api_keys=keys, throttle_time=NO_THROTTLE)


async def handle(_ctx: Context, request: Request) -> Any:
    return api_versions_body(request.api_version)
