"""The ACL APIs the front door serves, for the server's table (`server.HANDLERS`) and ApiVersions'
(`api_versions.ADVERTISED`): merge them in with

    HANDLERS = {..., **ACL_HANDLERS}
    ADVERTISED = {..., **ACL_VERSIONS}

The ranges are Kafka 4.x's (v0 of each was removed in 4.0, KIP-896), and all kio has: v1-v3.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from front_door.api_keys import ApiKey
from front_door.apis import create_acls, delete_acls, describe_acls
from front_door.context import Context
from front_door.network.wire import Request

Handler = Callable[[Context, Request], Awaitable[Any]]

ACL_HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_ACLS: describe_acls.handle,
    ApiKey.CREATE_ACLS: create_acls.handle,
    ApiKey.DELETE_ACLS: delete_acls.handle,
}
ACL_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
}
