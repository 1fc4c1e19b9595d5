"""KIP-848's consumer-group APIs: not served by the front door (docs/kafka-compatibility.md).
They are not advertised in ApiVersions; a client that sends one anyway gets Kafka's UNSUPPORTED_VERSION in
every error field of the response, with a message saying what to do instead. Each is read in every version
kio knows, to be answered.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.apis.registry import Api, kio_versions, register
from front_door.context import Context
from front_door.network.messages import error_response
from front_door.network.wire import Request

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
MESSAGE = ("The gateway's front door has the classic consumer group protocol (group.protocol=classic), not "
           "KIP-848's.")


async def handle(_ctx: Context, request: Request) -> Any:
    return error_response(request.api_key, request.api_version, ErrorCode.unsupported_version, MESSAGE)


APIS = tuple(register(Api(key, kio_versions(key), handle, refused=True))
             for key in (CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE))
