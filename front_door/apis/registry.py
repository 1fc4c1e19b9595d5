"""The APIs the front door reads, each declared by its own module (Kafka's `ApiKeys` with `KafkaApis`' handler
table; franz-go's `kfake` registers one file per API the same way). An `Api` names its key, the versions
served, whether a SASL listener reads it before the connection has logged in, the ACLs its handler asks for
(Kafka's "Operations and Resources on Protocols" table; `tests/unit/test_front_door_layout.py` finds every
ACL check of the module among them), and the handler. The server's handler table, ApiVersions' answer and
the refused list are what the modules registered: adding an API is one new module here, plus its test.

Loading this module loads every module of `front_door.apis` (at the bottom), so the tables below are
complete once it is imported.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.index import schema_name_map
from kio.schema.index import api_key_map

from front_door.context import Context
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType

Handler = Callable[[Context, Request], Awaitable[Any]]


@dataclass(frozen=True)
class Acl:
    """One operation on one type of resource that the handler asks the authorizer about."""

    operation: AclOperation
    resource: ResourceType


@dataclass(frozen=True)
class Api:
    key: int  # an ApiKey, or a key the door reads only to refuse (`refused`)
    versions: tuple[int, int]  # (min, max) served and advertised; a refused API: every version kio knows
    handler: Handler
    before_authentication: bool = False  # read on a SASL listener before login (SaslServerAuthenticator)
    acls: tuple[Acl, ...] = ()
    # read and answered UNSUPPORTED_VERSION, never advertised (KIP-848's group APIs: `unsupported.py`)
    refused: bool = False

    @property
    def name(self) -> str:
        return api_key_map[self.key]


def kio_versions(key: int) -> tuple[int, int]:
    """Every version of an API kio knows."""
    versions = sorted(schema_name_map[api_key_map[key]])
    return versions[0], versions[-1]


# Filled by `register`, each module's last line; complete once this module is imported.
APIS: dict[int, Api] = {}
HANDLERS: dict[int, Handler] = {}
# api key -> (min, max) version: what ApiVersions advertises, and what the door reads (the refused APIs too)
ADVERTISED: dict[int, tuple[int, int]] = {}
READABLE: dict[int, tuple[int, int]] = {}
REFUSED_APIS: dict[int, str] = {}  # api key -> name


def register(api: Api) -> Api:
    """`api` in every table; a key registered twice is a programming error, found at import."""
    if api.key in APIS:
        raise RuntimeError(f"API key {api.key} ({api.name}) registered twice")
    APIS[api.key] = api
    HANDLERS[api.key] = api.handler
    READABLE[api.key] = api.versions
    if api.refused:
        REFUSED_APIS[api.key] = api.name
    else:
        ADVERTISED[api.key] = api.versions
    return api


def before_authentication() -> frozenset[int]:
    """The keys a SASL listener reads before the connection has logged in."""
    return frozenset(key for key, api in APIS.items() if api.before_authentication)


def api_name(api_key: int) -> str:
    """The API's name as the metrics label it; "unknown" for a key the door does not read."""
    return api_key_map.get(api_key, "unknown") if api_key in READABLE else "unknown"


def _load_every_api() -> None:
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{module.name}")


_load_every_api()
