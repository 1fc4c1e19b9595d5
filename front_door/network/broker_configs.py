"""Dynamic broker configs at the door: the connection caps an operator changes while the doors run, as on a
Kafka cluster, with Kafka's tool through any door —
`kafka-configs.sh --alter --entity-type brokers --entity-default --add-config max.connections.per.ip=100`
(IncrementalAlterConfigs on the cluster-default BROKER resource). The configs are Kafka's dynamic connection
settings (`DynamicConnectionQuota.ReconfigurableConfigs`, `DynamicListenerConfig`): `max.connections.per.ip`,
`max.connections.per.ip.overrides`, `max.connections`, `max.connection.creation.rate` and the per-listener
`listener.name.<listener>.max.connections` and `listener.name.<listener>.max.connection.creation.rate`.

They live in the security store (kind `broker`, one record for the cluster default: a JSON map), so every door
applies a change at once and after a restart. A dynamic value wins over the `front_door_security` block's, as
Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG wins over server.properties (STATIC_BROKER_CONFIG).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from front_door.cluster.security_store import BROKER_KIND, SecurityStore
from front_door.network.connection_limits import (
    MAX_CONNECTIONS_PER_IP,
    MAX_CONNECTIONS_PER_IP_OVERRIDES,
    ConnectionLimitError,
    check_per_ip,
    parse_overrides,
)
from front_door.network.connection_slots import (
    LISTENER_SETTING,
    MAX_CONNECTION_CREATION_RATE,
    MAX_CONNECTIONS,
    SlotLimits,
)

log = logging.getLogger("gateway.front_door.broker_configs")

DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.DEFAULT: the record of the cluster default
CONNECTION_SETTINGS = (MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_IP_OVERRIDES, MAX_CONNECTIONS,
                       MAX_CONNECTION_CREATION_RATE)
INT_SETTINGS = (MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)
INT_MAX = 2**31 - 1  # Kafka's default for each INT setting: no limit
DEFAULTS = {MAX_CONNECTIONS_PER_IP: str(INT_MAX), MAX_CONNECTIONS_PER_IP_OVERRIDES: "", MAX_CONNECTIONS: str(INT_MAX),
            MAX_CONNECTION_CREATION_RATE: str(INT_MAX)}
BROKER_CONFIGS_UNAVAILABLE = "the front door's broker configs are unavailable: its security topic cannot be read"


def is_dynamic(key: str) -> bool:
    """A connection setting the door takes from the cluster default while it runs."""
    return key in CONNECTION_SETTINGS or LISTENER_SETTING.fullmatch(key) is not None


def _is_int_setting(key: str) -> bool:
    return key in INT_SETTINGS or LISTENER_SETTING.fullmatch(key) is not None


def value_problem(key: str, value: str | None) -> str | None:
    """`ConfigDef.parseType` and `Range.atLeast(0)`, in Kafka's words: why `value` is not one for `key`."""
    if not _is_int_setting(key):
        return None
    text = (value or "").strip()
    try:
        number = int(text)
    except ValueError:
        return f"Invalid value {value} for configuration {key}: Not a number of type INT"
    if number > INT_MAX or number < -INT_MAX - 1:
        return f"Invalid value {value} for configuration {key}: Not a number of type INT"
    if number < 0:
        return f"Invalid value {number} for configuration {key}: Value must be at least 0"
    return None


@dataclass(frozen=True)
class ConnectionSettings:
    """The connection caps that apply, parsed: per IP (`connection_limits.py`), for the door and its listeners
    (`connection_slots.py`)."""

    max_connections_per_ip: int | None = None  # None: no limit
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    slots: SlotLimits = SlotLimits()

    @staticmethod
    def parse(settings: Mapping[str, str], listeners: Iterable[str], strict: bool = True) -> ConnectionSettings:
        """From settings by Kafka's names (absent: no limit); ConnectionLimitError naming what is wrong. A
        listener-prefixed one must name one of `listeners` (matched without regard to case, as Kafka's
        lower-case prefix); not `strict`, one for another listener is left out (another door's). Names in the
        overrides are not looked up here (`ConnectionsPerIp` resolves them)."""
        for key, value in settings.items():
            if (problem := value_problem(key, value)) is not None:
                raise ConnectionLimitError(problem)

        def count(key: str) -> int | None:
            value = settings.get(key)
            return None if value is None or int(value) >= INT_MAX else int(value)

        names = {name.lower(): name for name in listeners}
        per_listener: dict[str, dict[str, int]] = {MAX_CONNECTIONS: {}, MAX_CONNECTION_CREATION_RATE: {}}
        for key, value in settings.items():
            if (match := LISTENER_SETTING.fullmatch(key)) is None:
                continue
            name = names.get(match.group(1).lower())
            if name is None and not strict:
                continue
            if name is None:
                raise ConnectionLimitError(f"{key}: the door has no listener {match.group(1)!r} (its listeners: "
                                           f"{', '.join(names.values())})")
            if int(value) < INT_MAX:
                per_listener[match.group(2)][name] = int(value)
        overrides = parse_overrides(settings.get(MAX_CONNECTIONS_PER_IP_OVERRIDES, ""))
        per_ip = count(MAX_CONNECTIONS_PER_IP)
        check_per_ip(per_ip, overrides)
        return ConnectionSettings(per_ip, tuple(overrides.items()), SlotLimits(
            count(MAX_CONNECTIONS), count(MAX_CONNECTION_CREATION_RATE), per_listener[MAX_CONNECTIONS],
            per_listener[MAX_CONNECTION_CREATION_RATE]))


class BrokerConfigs:
    """The static settings (the `front_door_security` block's) and the dynamic cluster default over them, for
    a door with `listeners` (their names); `subscribe` is told of every change, this door's and other doors'
    alike, on the door's loop."""

    def __init__(self, static: Mapping[str, str], store: SecurityStore | None = None,
                 listeners: Iterable[str] = ("PLAINTEXT",)) -> None:
        self.static = dict(static)
        self.listeners = tuple(listeners)
        self._store = store
        self.dynamic: dict[str, str] = {}
        self._listeners: list[Callable[[], None]] = []
        if store is not None:
            self._apply(store.snapshot(BROKER_KIND).get(DEFAULT_ENTITY))
            store.subscribe(lambda kind, name, value: kind == BROKER_KIND and name == DEFAULT_ENTITY
                            and self._apply(value))

    @property
    def stored(self) -> bool:
        """Whether dynamic configs can be written (a door without a readable security topic takes none)."""
        return self._store is not None

    def effective(self) -> dict[str, str]:
        return {**self.static, **self.dynamic}

    def check_dynamic(self, dynamic: Mapping[str, str]) -> None:
        """What `DynamicBrokerConfig.validate` refuses of a new cluster default beyond each value's own check:
        the settings over the static ones as a whole, and a listener's cap of 0 (`ListenerConnectionQuota.
        validateReconfiguration`, whose message Kafka wraps as below). ConnectionLimitError."""
        for key, value in dynamic.items():
            if (match := LISTENER_SETTING.fullmatch(key)) is not None and int(value) <= 0:
                raise ConnectionLimitError("Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
                                           f"{match.group(2)} {int(value)} for configuration Invalid dynamic "
                                           "configuration")
        self.connection_settings(dynamic)

    def connection_settings(self, dynamic: Mapping[str, str] | None = None) -> ConnectionSettings:
        """The caps that apply, or would with `dynamic` as the cluster default's (checked as
        `DynamicBrokerConfig.validate` checks the new values over the static ones, as a whole).
        ConnectionLimitError naming what is wrong."""
        if dynamic is None:
            return ConnectionSettings.parse(self.effective(), self.listeners, strict=False)
        return ConnectionSettings.parse({**self.static, **dynamic}, self.listeners)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self._listeners.append(on_change)

    def _apply(self, value: bytes | None) -> None:
        try:
            configs = {str(k): str(v) for k, v in json.loads(value).items()} if value is not None else {}
        except (ValueError, TypeError, AttributeError) as e:
            log.warning("security store: broker config record unreadable (%s); skipped", e)
            return
        self.dynamic = configs
        for on_change in self._listeners:
            on_change()

    async def write(self, configs: Mapping[str, str]) -> None:
        """Store the cluster default's dynamic configs (none: forget them); every door applies them.
        SecurityStoreError when the cluster does not take it."""
        assert self._store is not None, "dynamic broker configs are stored in the security store"
        value = json.dumps(dict(sorted(configs.items()))).encode() if configs else None
        await self._store.write(BROKER_KIND, DEFAULT_ENTITY, value)  # applied here through the subscription
