"""SaslAuthenticate (key 36, v0-v2, KIP-152, KIP-368): one SASL token each way, wrapped in Kafka's framing.

The exchange runs per connection before authentication (`security/sasl_exchange.py`);
what reaches this handler is a SaslAuthenticate Kafka answers from `KafkaApis`: on a listener without SASL or
after a successful authentication — ILLEGAL_SASL_STATE. `session_lifetime_ms` (v1+) is the session's lifetime
once the exchange completes: `connections.max.reauth.ms` (KIP-368), 0 when sessions last (Kafka's default).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.apis.registry import Api, register
from front_door.context import Context
from front_door.network.wire import Request
from front_door.security.sasl_exchange import authenticate_body


async def handle(_ctx: Context, request: Request) -> Any:
    return authenticate_body(request.api_version, ErrorCode.illegal_sasl_state,
                             "SaslAuthenticate request received after successful authentication")


API = register(Api(ApiKey.SASL_AUTHENTICATE, (0, 2), handle, before_authentication=True))
