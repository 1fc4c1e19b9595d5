"""SaslHandshake (key 17, v0-v1, KIP-43/KIP-152): the mechanism a client picks on a SASL listener.

The exchange itself runs before authentication, per connection (`security/sasl_exchange.py`); what reaches
this handler is a handshake Kafka answers from `KafkaApis`: on a listener without SASL, or on a connection
already authenticated — ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.apis.registry import Api, register
from front_door.context import Context
from front_door.network.wire import Request
from front_door.security.sasl_exchange import handshake_body


async def handle(_ctx: Context, request: Request) -> Any:
    return handshake_body(request.api_version, ErrorCode.illegal_sasl_state, ())


API = register(Api(ApiKey.SASL_HANDSHAKE, (0, 1), handle, before_authentication=True))
