"""ApiVersions (key 18): what the front door speaks (KIP-35, KIP-511).

The version ranges are Kafka 4.x's where kio has them. Group and transaction APIs are not advertised:
consumer groups and transactions are out of scope (DESIGN §4.7); a client that sends one anyway gets
UNSUPPORTED_VERSION (`unsupported.py`).
"""

from __future__ import annotations

from typing import Any

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, error_code, response_module
from front_door.wire import Request

# api key -> (min, max) version served
ADVERTISED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
}


def api_versions_body(version: int, code: int = 0) -> Any:
    module = response_module(ApiKey.API_VERSIONS, version)
    keys = tuple(build(module.ApiVersion, api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in sorted(ADVERTISED.items()))
    return build(module.ApiVersionsResponse, error_code=error_code(code), api_keys=keys, throttle_time=NO_THROTTLE)


async def handle(_ctx: Context, request: Request) -> Any:
    return api_versions_body(request.api_version)
