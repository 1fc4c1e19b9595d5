"""Typed topic configuration (Kafka's topic configs, with gateway-wide `log.*` defaults).

Kafka 4.x defaults (reference Appendix A). A topic's own key wins over the gateway-wide broker key
(`message.timestamp.type` over `log.message.timestamp.type`), which wins over Kafka's default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validators.record_batch import TimestampType

LONG_MAX = 9223372036854775807


class ConfigError(ValueError):
    """A bad configuration value: names the key and what is allowed."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    partitions: int
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    max_message_bytes: int = 1048588
    compression_type: str = "producer"
    cleanup_policy: tuple[str, ...] = ("delete",)
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    retention_max_eventtime_ms: int = -1
    producer_id_expiration_ms: int = 86400000

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy


# topic key -> (broker key, field, parser)
def _long(key: str, value: Any, minimum: int | None = None) -> int:
    try:
        v = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"Invalid value {value!r} for configuration {key}: Not a number of type LONG") from None
    if minimum is not None and v < minimum:
        raise ConfigError(f"Invalid value {v} for configuration {key}: Value must be at least {minimum}")
    return v


def _timestamp_type(key: str, value: Any) -> TimestampType:
    for t in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        if str(value) == t.kafka_name:
            return t
    raise ConfigError(f"Invalid value {value!r} for configuration {key}: String must be one of: CreateTime, LogAppendTime")


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _compression(key: str, value: Any) -> str:
    if str(value) not in _COMPRESSION:
        raise ConfigError(f"Invalid value {value!r} for configuration {key}: String must be one of: {', '.join(_COMPRESSION)}")
    return str(value)


def _cleanup_policy(key: str, value: Any) -> tuple[str, ...]:
    items = tuple(p.strip() for p in str(value).split(",") if p.strip())
    for p in items:
        if p not in ("delete", "compact"):
            raise ConfigError(f"Invalid value {value!r} for configuration {key}: The value must be one of: [delete, compact]")
    return items


_KEYS: dict[str, tuple[str, str, Any]] = {
    "message.timestamp.type": ("log.message.timestamp.type", "message_timestamp_type", _timestamp_type),
    "message.timestamp.before.max.ms": (
        "log.message.timestamp.before.max.ms", "message_timestamp_before_max_ms", lambda k, v: _long(k, v, 0)),
    "message.timestamp.after.max.ms": (
        "log.message.timestamp.after.max.ms", "message_timestamp_after_max_ms", lambda k, v: _long(k, v, 0)),
    "max.message.bytes": ("message.max.bytes", "max_message_bytes", lambda k, v: _long(k, v, 0)),
    "compression.type": ("compression.type", "compression_type", _compression),
    "cleanup.policy": ("log.cleanup.policy", "cleanup_policy", _cleanup_policy),
    "segment.bytes": ("log.segment.bytes", "segment_bytes", lambda k, v: _long(k, v, 14)),
    "segment.ms": ("log.roll.ms", "segment_ms", lambda k, v: _long(k, v, 1)),
    "segment.jitter.ms": ("log.roll.jitter.ms", "segment_jitter_ms", lambda k, v: _long(k, v, 0)),
    "segment.index.bytes": ("log.index.size.max.bytes", "segment_index_bytes", lambda k, v: _long(k, v, 4)),
    "index.interval.bytes": ("log.index.interval.bytes", "index_interval_bytes", lambda k, v: _long(k, v, 0)),
    "retention.ms": ("log.retention.ms", "retention_ms", lambda k, v: _long(k, v, -1)),
    "retention.bytes": ("log.retention.bytes", "retention_bytes", lambda k, v: _long(k, v)),
    "retention.max.eventtime.ms": (
        "log.retention.max.eventtime.ms", "retention_max_eventtime_ms", lambda k, v: _long(k, v, -1)),
    "producer.id.expiration.ms": ("producer.id.expiration.ms", "producer_id_expiration_ms", lambda k, v: _long(k, v, 1)),
}

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str) -> str | None:
    """Kafka's `Topic.validate` message for an illegal name, or None (reference §6.3)."""
    prefix = "Topic name is invalid: "
    if name == "":
        return prefix + "the empty string is not allowed"
    if name == ".":
        return prefix + "'.' is not allowed"
    if name == "..":
        return prefix + "'..' is not allowed"
    if len(name) > 249:
        return prefix + f"the length of '{name}' is longer than the max allowed length 249"
    if not _LEGAL_TOPIC.match(name):
        return prefix + f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def topic_config(name: str, partitions: int, configs: dict[str, Any], defaults: dict[str, Any]) -> TopicConfig:
    """Build a TopicConfig from Kafka-named topic configs over gateway-wide `log.*` defaults."""
    kwargs: dict[str, Any] = {}
    for key in configs:
        if key not in _KEYS:
            raise ConfigError(f"Unknown topic configuration {key} for topic {name}; known: {', '.join(sorted(_KEYS))}")
    for topic_key, (broker_key, attr, parse) in _KEYS.items():
        if topic_key in configs:
            kwargs[attr] = parse(topic_key, configs[topic_key])
        elif broker_key in defaults:
            kwargs[attr] = parse(broker_key, defaults[broker_key])
    if int(partitions) < 1:
        raise ConfigError(f"Invalid partition count {partitions} for topic {name}: must be at least 1")
    return TopicConfig(name=name, partitions=int(partitions), **kwargs)


@dataclass(frozen=True)
class TopicRegistry:
    """The target topics the gateway leads, by name."""

    topics: dict[str, TopicConfig] = field(default_factory=dict)

    def get(self, name: str) -> TopicConfig | None:
        return self.topics.get(name)

    @staticmethod
    def from_json(doc: dict[str, Any]) -> TopicRegistry:
        defaults = doc.get("defaults", {})
        topics = {}
        for name, spec in doc.get("topics", {}).items():
            err = topic_name_error(name)
            if err:
                raise ConfigError(err)
            topics[name] = topic_config(name, spec.get("partitions", 1), spec.get("configs", {}), defaults)
        return TopicRegistry(topics)

    @staticmethod
    def load(path: str | Path) -> TopicRegistry:
        return TopicRegistry.from_json(json.loads(Path(path).read_text()))
