"""Building kio response entities for any version of an API from one set of values.

kio generates one dataclass per message and version; fields come and go between versions (Kafka's
`"versions": "5+"`). `build` keeps the values a version has and drops the others, as Kafka's generated
`Message.write` does for fields the version lacks (their defaults, never sent).
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

from front_door.network.wire import response_schema


@cache
def _field_names(entity: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(entity))


def build(entity: type, **values: Any) -> Any:
    """An `entity` with the values its version has (the others are dropped)."""
    names = _field_names(entity)
    return entity(**{k: v for k, v in values.items() if k in names})


def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module of one response version, where its nested entity classes live."""
    import sys

    return sys.modules[response_schema(api_key, version).__module__]


def error_code(code: int) -> ErrorCode:
    return ErrorCode(code)


NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
READ_COMMITTED = 1  # Fetch's and ListOffsets' isolation_level: read_committed (0 is read_uncommitted)


def timestamp(ms: int) -> datetime.datetime | None:
    """An int64 millisecond timestamp as kio carries it (None is Kafka's -1)."""
    return None if ms < 0 else tz_aware_from_i64(ms)


def millis(delta: datetime.timedelta) -> int:
    return int(delta / datetime.timedelta(milliseconds=1))


_ZERO_UUID = __import__("uuid").UUID(int=0)


def _zero_value(f: dataclasses.Field[Any]) -> Any:
    """A field's value in an error response: Kafka's generated defaults (-1 ids, empty strings and
    arrays, false, the zero UUID)."""
    kind = f.metadata.get("kafka_type")
    if kind is None:  # nested entities: arrays of them are empty
        return ()
    if kind.startswith(("int", "uint", "float")):
        return -1
    return {"string": "", "bool": False, "uuid": _ZERO_UUID, "records": None, "bytes": b"",
            "timedelta_i32": NO_THROTTLE, "timedelta_i64": i64Timedelta.parse(datetime.timedelta(0)),
            "datetime_i64": None}.get(kind)


def error_response(api_key: int, version: int, code: int, message: str) -> Any:
    """The whole-request error response of any API (`AbstractRequest.getErrorResponse`): every
    `error_code` is `code`, `error_message` (where the version has one) is `message`."""
    entity = response_schema(api_key, version)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        if f.name == "error_code":
            values[f.name] = ErrorCode(code)
        elif f.name == "error_message":
            values[f.name] = message
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            values[f.name] = _zero_value(f)
    return entity(**values)


def error_name(code: int) -> str:
    """An error code as the metrics label it: NONE, NOT_LEADER_OR_FOLLOWER, ...; UNKNOWN_SERVER_ERROR for a code
    kio does not know."""
    try:
        return "NONE" if code == 0 else ErrorCode(code).name.upper()
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"
