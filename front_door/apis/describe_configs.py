"""DescribeConfigs (key 32, v1-v4): what `kafka-topics --describe`, `kafka-configs --describe` and admin
clients read. A TOPIC resource gets every topic config the gateway applies to it (`validators/topic_config.py`),
each with Kafka's source: TOPIC_CONFIG where the registry sets it for the topic, STATIC_BROKER_CONFIG where
it comes from the registry's `defaults` (the gateway's server.properties), DEFAULT_CONFIG where Kafka's
default applies (`is_default`); with `include_synonyms` the chain below it, as `ConfigHelper` lists it.
A BROKER resource (this node's id, or "" for the cluster default) gets the registry's defaults and the
front door's own broker settings, read-only (the registry file is where they change), and the connection caps,
which IncrementalAlterConfigs changes (`broker_configs.py`): DYNAMIC_DEFAULT_BROKER_CONFIG where the cluster
default sets one, STATIC_BROKER_CONFIG where the `front_door_security` block does, DEFAULT_CONFIG otherwise.

Errors as `KafkaApis.handleDescribeConfigsRequest`/`ConfigHelper` answer: a topic the registry lacks
UNKNOWN_TOPIC_OR_PARTITION, another broker's id INVALID_REQUEST, an unknown resource type INVALID_REQUEST;
without DESCRIBE_CONFIGS on the topic TOPIC_AUTHORIZATION_FAILED, on the cluster (a broker resource)
CLUSTER_AUTHORIZATION_FAILED, before anything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.context import Context
from front_door.network.broker_configs import CONNECTION_SETTINGS, DEFAULTS, BrokerConfigs
from front_door.network.connection_limits import MAX_CONNECTIONS_PER_IP_OVERRIDES
from front_door.network.connection_slots import LISTENER_SETTING
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import CLUSTER_NAME, AclOperation
from front_door.security.acls import ResourceType as AclResourceType
from validators.codec.record_batch import TimestampType
from validators.topic_config import (
    TOPIC_CONFIG_SETTINGS,
    TopicConfig,
    TopicRegistry,
    auto_create_topics,
    num_partitions,
)


class ResourceType(IntEnum):
    """`ConfigResource.Type`"""

    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    """`DescribeConfigsResponse.ConfigSource`"""

    TOPIC_CONFIG = 1
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """`DescribeConfigsResponse.ConfigType` (v3+)"""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


# ConfigDef types of the topic configs the gateway applies (`TopicConfig`, Kafka's `LogConfig`)
_TYPES = {
    "message.timestamp.type": ConfigType.STRING, "max.message.bytes": ConfigType.INT,
    "compression.type": ConfigType.STRING, "cleanup.policy": ConfigType.LIST, "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT, "index.interval.bytes": ConfigType.INT,
    "producer.id.expiration.ms": ConfigType.INT, "gateway.record.validation": ConfigType.STRING,
}
_DEFAULTS = TopicConfig(name="-", partitions=1)


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    synonyms: tuple[Synonym, ...]
    read_only: bool = True

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def render(value: Any) -> str:
    """A config value as Kafka prints it."""
    if isinstance(value, TimestampType):
        return "LogAppendTime" if value == TimestampType.LOG_APPEND_TIME else "CreateTime"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(getattr(value, "value", value))


def topic_entries(config: TopicConfig, defaults: Mapping[str, Any]) -> list[ConfigEntry]:
    entries = []
    for key, (attr, broker_keys) in sorted(TOPIC_CONFIG_SETTINGS.items()):
        chain = []
        if key in config.explicit:
            chain.append(Synonym(key, render(getattr(config, attr)), ConfigSource.TOPIC_CONFIG))
        chain += [Synonym(b, str(defaults[b]), ConfigSource.STATIC_BROKER_CONFIG) for b in broker_keys if b in defaults]
        chain.append(Synonym(broker_keys[0] if broker_keys else key, render(getattr(_DEFAULTS, attr)),
                             ConfigSource.DEFAULT_CONFIG))
        entries.append(ConfigEntry(key, render(getattr(config, attr)), chain[0].source,
                                   _TYPES.get(key, ConfigType.LONG), tuple(chain), read_only=False))
    # Kafka's configs the topic keeps without acting on them (`PASSIVE_TOPIC_CONFIGS`), where it was given some
    entries += [ConfigEntry(k, v, ConfigSource.TOPIC_CONFIG, ConfigType.STRING,
                            (Synonym(k, v, ConfigSource.TOPIC_CONFIG),), read_only=False) for k, v in config.passive]
    return sorted(entries, key=lambda e: e.name)


def broker_entries(ctx: Context, registry: TopicRegistry) -> list[ConfigEntry]:
    entries = [ConfigEntry(k, str(v), ConfigSource.STATIC_BROKER_CONFIG, ConfigType.STRING,
                           (Synonym(k, str(v), ConfigSource.STATIC_BROKER_CONFIG),))
               for k, v in sorted(registry.defaults.items())]
    own = {"socket.request.max.bytes": (str(ctx.max_request_bytes), ConfigType.INT),
           "auto.create.topics.enable": (str(auto_create_topics(registry.defaults)).lower(), ConfigType.BOOLEAN),
           "delete.topic.enable": (str(ctx.topic_store is not None).lower(), ConfigType.BOOLEAN),
           "num.partitions": (str(num_partitions(registry.defaults)), ConfigType.INT),
           "group.initial.rebalance.delay.ms": (str(ctx.groups.settings.initial_rebalance_delay_ms), ConfigType.INT),
           "group.min.session.timeout.ms": (str(ctx.groups.settings.min_session_timeout_ms), ConfigType.INT),
           "group.max.session.timeout.ms": (str(ctx.groups.settings.max_session_timeout_ms), ConfigType.INT),
           "offset.metadata.max.bytes": (str(ctx.groups.settings.offset_metadata_max_bytes), ConfigType.INT)}
    entries += [ConfigEntry(k, v, ConfigSource.STATIC_BROKER_CONFIG, t, (Synonym(k, v, ConfigSource.STATIC_BROKER_CONFIG),))
                for k, (v, t) in sorted(own.items()) if k not in registry.defaults]
    if ctx.broker_configs is not None:
        entries += connection_entries(ctx.broker_configs)
    return entries


def connection_entries(configs: BrokerConfigs) -> list[ConfigEntry]:
    """The connection caps, each with its chain as `ConfigHelper.configSynonyms` lists it (the cluster default's
    dynamic value, the static one, Kafka's non-empty default; a per-listener cap followed by its base cap's);
    the four of Kafka's always, the per-listener ones where set."""
    def chain(key: str) -> list[Synonym]:
        return [Synonym(key, v, src) for v, src in ((configs.dynamic.get(key), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                                                   (configs.static.get(key), ConfigSource.STATIC_BROKER_CONFIG),
                                                   (DEFAULTS.get(key) or None, ConfigSource.DEFAULT_CONFIG))
                if v is not None]

    entries = []
    for key in sorted({*CONNECTION_SETTINGS, *configs.static, *configs.dynamic}):
        synonyms = chain(key)
        if (match := LISTENER_SETTING.fullmatch(key)) is not None:
            synonyms += chain(match.group(2))
        value, source = (synonyms[0].value, synonyms[0].source) if synonyms else ("", ConfigSource.DEFAULT_CONFIG)
        kind = ConfigType.STRING if key == MAX_CONNECTIONS_PER_IP_OVERRIDES else ConfigType.INT
        entries.append(ConfigEntry(key, value, source, kind, tuple(synonyms), read_only=False))
    return entries


def _describe(ctx: Context, registry: TopicRegistry, node_id: int, resource_type: int,
              name: str) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    if resource_type == ResourceType.TOPIC:
        config = registry.get(name)
        if config is None:
            return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist in the registry", []
        return ErrorCode.none, None, topic_entries(config, registry.defaults)
    if resource_type == ResourceType.BROKER:
        if name not in ("", str(node_id)):
            return ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id} or empty string, but received {name}", []
        return ErrorCode.none, None, broker_entries(ctx, registry)
    return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}", []


# `ConfigResource.Type` -> the ACL resource DESCRIBE_CONFIGS is asked on, and the error when it is denied
# (`KafkaApis.handleDescribeConfigsRequest`): BROKER, BROKER_LOGGER (8) and CLIENT_METRICS (16) on the
# cluster, TOPIC on the topic, GROUP (32) on the group
_AUTHORIZED_ON: dict[int, tuple[AclResourceType, ErrorCode, str]] = {
    ResourceType.TOPIC: (AclResourceType.TOPIC, ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED),
    ResourceType.BROKER: (AclResourceType.CLUSTER, ErrorCode.cluster_authorization_failed,
                          access.CLUSTER_AUTHORIZATION_FAILED),
    8: (AclResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, access.CLUSTER_AUTHORIZATION_FAILED),
    16: (AclResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, access.CLUSTER_AUTHORIZATION_FAILED),
    32: (AclResourceType.GROUP, ErrorCode.group_authorization_failed, access.GROUP_AUTHORIZATION_FAILED),
}


def _denied(ctx: Context, request: Request, resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """The error of a resource the principal may not DESCRIBE_CONFIGS, or None."""
    on = _AUTHORIZED_ON.get(resource_type)
    if on is None:  # a type Kafka refuses anyway (INVALID_REQUEST below)
        return None
    acl_type, code, message = on
    resource = CLUSTER_NAME if acl_type == AclResourceType.CLUSTER else name
    if access.authorize(ctx, request, AclOperation.DESCRIBE_CONFIGS, acl_type, resource):
        return None
    return code, message


def _filtered(entries: Iterable[ConfigEntry], keys: Iterable[str] | None) -> list[ConfigEntry]:
    if keys is None:
        return list(entries)
    wanted = set(keys)
    return [e for e in entries if e.name in wanted]


async def handle(ctx: Context, request: Request) -> Any:
    body = request.body
    module = response_module(ApiKey.DESCRIBE_CONFIGS, request.api_version)
    registry = ctx.registry()
    results = []
    for r in body.resources:
        denied = _denied(ctx, request, r.resource_type, r.resource_name)
        if denied is not None:
            results.append(build(module.DescribeConfigsResult, error_code=denied[0], error_message=denied[1],
                                 resource_type=r.resource_type, resource_name=r.resource_name, configs=()))
            continue
        code, message, entries = _describe(ctx, registry, request.node_id, r.resource_type, r.resource_name)
        configs = tuple(
            build(module.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
                  config_source=int(e.source), is_default=e.is_default, is_sensitive=False,
                  synonyms=tuple(build(module.DescribeConfigsSynonym, name=s.name, value=s.value, source=int(s.source))
                                 for s in e.synonyms) if body.include_synonyms else (),
                  config_type=int(e.type), documentation=None)
            for e in _filtered(entries, r.configuration_keys))
        results.append(build(module.DescribeConfigsResult, error_code=code, error_message=message,
                             resource_type=r.resource_type, resource_name=r.resource_name, configs=configs))
    return build(module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


API = register(Api(ApiKey.DESCRIBE_CONFIGS, (1, 4), handle, acls=(
    Acl(AclOperation.DESCRIBE_CONFIGS, AclResourceType.CLUSTER),
    Acl(AclOperation.DESCRIBE_CONFIGS, AclResourceType.TOPIC),
    Acl(AclOperation.DESCRIBE_CONFIGS, AclResourceType.GROUP),
)))
