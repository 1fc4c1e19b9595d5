"""ApiVersions (key 18): what the front door speaks (KIP-35, KIP-511): every API module's key and versions
(`registry.ADVERTISED`).

The version ranges are Kafka 4.x's where kio has them, each declared beside its handler. The classic group
protocol is served; KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe are not advertised (a client
switches to the new protocol as soon as it sees key 68); a client that sends one anyway gets
UNSUPPORTED_VERSION (`unsupported.py`).
"""

from __future__ import annotations

from typing import Any

from front_door.api_keys import ApiKey
from front_door.apis.registry import ADVERTISED, Api, register
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, error_code, response_module
from front_door.network.wire import Request


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


API = register(Api(ApiKey.API_VERSIONS, (0, 4), handle, before_authentication=True))
