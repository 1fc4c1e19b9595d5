"""ApiVersions (key 18): what the front door speaks (KIP-35, KIP-511): every API module's key and versions
(`registry.ADVERTISED`), and from v3 the features the doors support and finalize (KIP-584, `features.py`), as
Kafka 4.x's `ApiVersionsResponse` lists them: a supported feature whose minimum level is 0 only from v4
(older clients cannot read a 0 there), a finalized feature only at a level above 0.

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
from front_door.features import FINALIZED_FEATURES, FINALIZED_FEATURES_EPOCH, SUPPORTED_FEATURES
from front_door.network.messages import NO_THROTTLE, build, error_code, response_module
from front_door.network.wire import Request


def api_versions_body(version: int, code: int = 0) -> Any:
    """The answer; an UNSUPPORTED_VERSION one lists the ApiVersions key alone (KIP-511,
    `ApiVersionsRequest.getErrorResponse`), so the client retries in a version it shares."""
    module = response_module(ApiKey.API_VERSIONS, version)
    served = ADVERTISED if code == 0 else {ApiKey.API_VERSIONS: ADVERTISED[ApiKey.API_VERSIONS]}
    keys = tuple(build(module.ApiVersion, api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in sorted(served.items()))
    features: dict[str, Any] = {}
    if code == 0 and version >= 3:
        features = {
            "supported_features": tuple(
                build(module.SupportedFeatureKey, name=name, min_version=lo, max_version=hi)
                for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items()) if version >= 4 or lo > 0),
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": tuple(
                build(module.FinalizedFeatureKey, name=name, min_version_level=level, max_version_level=level)
                for name, level in sorted(FINALIZED_FEATURES.items()) if level > 0)}
    return build(module.ApiVersionsResponse, error_code=error_code(code), api_keys=keys, throttle_time=NO_THROTTLE,
                 **features)


async def handle(_ctx: Context, request: Request) -> Any:
    return api_versions_body(request.api_version)


API = register(Api(ApiKey.API_VERSIONS, (0, 4), handle, before_authentication=True))
