"""SaslHandshake (key 17, v0-v1, KIP-43/KIP-152): the mechanism a client picks on a SASL listener.

The exchange itself runs before authentication, per connection (`security/sasl_server.py`, driven by
`server.py`); what reaches this handler is a handshake Kafka answers from `KafkaApis`: on a listener without
SASL, or on a connection already authenticated — ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.network.messages import build, response_module
from front_door.network.wire import Request


def handshake_body(version: int, code: ErrorCode, mechanisms: Sequence[str]) -> Any:
    module = response_module(ApiKey.SASL_HANDSHAKE, version)
    return build(module.SaslHandshakeResponse, error_code=code, mechanisms=tuple(mechanisms))


async def handle(_ctx: Context, request: Request) -> Any:
    return handshake_body(request.api_version, ErrorCode.illegal_sasl_state, ())
