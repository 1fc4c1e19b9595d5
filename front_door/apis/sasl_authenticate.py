"""SaslAuthenticate (key 36, v0-v2, KIP-152, KIP-368): one SASL token each way, wrapped in Kafka's framing.

The exchange runs per connection before authentication (`security/sasl_server.py`, driven by `server.py`);
what reaches this handler is a SaslAuthenticate Kafka answers from `KafkaApis`: on a listener without SASL or
after a successful authentication — ILLEGAL_SASL_STATE. `session_lifetime_ms` (v1+) is the session's lifetime
once the exchange completes: `connections.max.reauth.ms` (KIP-368), 0 when sessions last (Kafka's default).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i64Timedelta

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.network.messages import build, response_module
from front_door.network.wire import Request


def authenticate_body(version: int, code: ErrorCode, message: str | None, auth_bytes: bytes = b"",
                      session_lifetime_ms: int = 0) -> Any:
    module = response_module(ApiKey.SASL_AUTHENTICATE, version)
    return build(module.SaslAuthenticateResponse, error_code=code, error_message=message, auth_bytes=auth_bytes,
                 session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=session_lifetime_ms)))


async def handle(_ctx: Context, request: Request) -> Any:
    return authenticate_body(request.api_version, ErrorCode.illegal_sasl_state,
                             "SaslAuthenticate request received after successful authentication")
