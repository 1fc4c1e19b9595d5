"""Consumer-group and transaction APIs: out of scope for the front door (DESIGN §4.7). They are not
advertised in ApiVersions; a client that sends one anyway gets Kafka's UNSUPPORTED_VERSION in every
error field of the response, with a message saying what to do instead.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, error_response, response_module
from front_door.wire import Request

GROUP_APIS = {8: "offset_commit", 9: "offset_fetch", 10: "find_coordinator", 11: "join_group", 12: "heartbeat",
              13: "leave_group", 14: "sync_group", 15: "describe_groups", 16: "list_groups", 42: "delete_groups",
              68: "consumer_group_heartbeat", 69: "consumer_group_describe"}
TRANSACTION_APIS = {24: "add_partitions_to_txn", 25: "add_offsets_to_txn", 26: "end_txn", 28: "txn_offset_commit"}
REFUSED_APIS = {**GROUP_APIS, **TRANSACTION_APIS}
MESSAGE = ("The gateway's front door has no consumer groups or transactions: assign() partitions and keep "
           "offsets in the client; produce without a transactional.id.")


async def handle(_ctx: Context, request: Request) -> Any:
    if request.api_key == ApiKey.FIND_COORDINATOR and request.api_version >= 4:  # one answer per key asked
        module = response_module(ApiKey.FIND_COORDINATOR, request.api_version)
        return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(build(module.Coordinator, key=k, node_id=-1, host="", port=-1,
                                     error_code=ErrorCode.unsupported_version, error_message=MESSAGE)
                               for k in request.body.coordinator_keys))
    return error_response(request.api_key, request.api_version, ErrorCode.unsupported_version, MESSAGE)
