"""Typed topic configuration: Kafka's topic configs over gateway-wide `log.*` defaults (docs/design.md: what the stage decides).

Resolution of every setting, most specific first (KIP-937's configs and Appendix A):

    topic config (`message.timestamp.type`)  >  gateway default named like Kafka's broker config
    (`log.message.timestamp.type`)  >  Kafka 4.x default.

The two KIP-937 windows also accept the deprecated KIP-32 `message.timestamp.difference.max.ms`
(topic) / `log.message.timestamp.difference.max.ms` (gateway) as a fallback when the window itself is
unset (docs/design.md: what the stage decides; Kafka 3.6-3.9 did the same, Kafka 4.0 removed the key). Order for `before`:

    topic before > topic difference > gateway before > gateway difference > 9223372036854775807

and the same for `after` (default 3600000). Using the deprecated key emits a `DeprecationWarning`
and a logged warning. Values are validated like Kafka's `ConfigDef` (type, range, allowed strings)
and a bad one raises `ConfigError` naming the key and what is allowed.

`RegistryWatcher` re-reads the registry file when it changes; that file read is the only I/O of the
`validators` package.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from validators.codec.record_batch import TimestampType

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647

# Topic.java (Kafka's `Topic.validate`)
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class ConfigError(ValueError):
    """A bad configuration value: names the key and what is allowed (Kafka's `ConfigException` text)."""


class RecordValidation(StrEnum):
    """How deeply the gateway walks the records of a batch (gateway extension, `gateway.record.validation`).

    FULL (default): every record is walked as Kafka's `DefaultRecord.readFrom` / `readPartiallyFrom`
    does (`LogValidator.validateMessagesAndAssignOffsets`), so the gateway accepts and rejects exactly what Kafka does and never stores
    a batch a Kafka consumer or `DumpLogSegments --deep-iteration` would choke on (docs/design.md: segment storage).
    FAST: only what the decision needs (docs/performance.md): uncompressed LogAppendTime batches are decided
    from the header alone and uncompressed CreateTime batches from the record length chain and the
    timestamp deltas; the layout inside a record (key/value lengths, headers) is not verified, and on
    LogAppendTime topics neither is the declared record count. Compacted topics and compressed
    batches always get the full walk. Anything the fast walk does not accept cleanly is re-checked
    with the full walk, so every rejection still carries Kafka's exact text.
    """

    FAST = "fast"
    FULL = "full"


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# compression.type value -> codec id of the batch attributes (`DefaultRecordBatch` attributes); producer keeps the source codec
COMPRESSION_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One target topic as the gateway leads it. Defaults are Kafka 4.x's (reference Appendix A)."""

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
    max_compaction_lag_ms: int = LONG_MAX
    record_validation: RecordValidation = RecordValidation.FULL
    # the topic configs the registry sets for this topic (the rest come from its defaults or Kafka's):
    # what DescribeConfigs reports as TOPIC_CONFIG
    explicit: frozenset[str] = field(default=frozenset(), compare=False)
    # KIP-516's topic id: a new one for every creation, so a deleted and re-created topic is another topic
    # (its stage state and segments are not the old one's); the seed's topics take `seed_topic_id(name)`
    topic_id: str = ""
    passive: tuple[tuple[str, str], ...] = ()  # the `PASSIVE_TOPIC_CONFIGS` it was given, as given

    @property
    def id(self) -> uuid.UUID:
        return uuid.UUID(self.topic_id) if self.topic_id else seed_topic_id(self.name)

    @property
    def compacted(self) -> bool:
        """LogValidator's `compactedTopic`: `cleanup.policy` contains compact."""
        return "compact" in self.cleanup_policy

    @property
    def target_compression_id(self) -> int | None:
        """`BrokerCompressionType.targetCompression`: None for `producer` (keep the batch's codec)."""
        return COMPRESSION_IDS.get(self.compression_type)

    @property
    def max_segment_ms(self) -> int:
        """`LogConfig.maxSegmentMs` (`LogSegment.shouldRoll`): compacted topics roll by max.compaction.lag.ms too."""
        if self.compacted and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms


# ------------------------------------------------------------------------------------------------
# value parsers: Kafka's ConfigDef texts ("Invalid value <v> for configuration <k>: <why>")


def _invalid(key: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"Invalid value {value} for configuration {key}: {why}")


def _long(key: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise _invalid(key, value, "Expected value to be a 64-bit integer (long), but it was a boolean")
    if isinstance(value, int):
        v = value
    elif isinstance(value, str):
        try:
            v = int(value.strip())
        except ValueError:
            raise _invalid(key, value, "Not a number of type LONG") from None
    else:
        raise _invalid(key, value, f"Expected value to be a 64-bit integer (long), but it was a {type(value).__name__}")
    if not LONG_MIN <= v <= LONG_MAX:
        raise _invalid(key, value, "Not a number of type LONG")
    if minimum is not None and v < minimum:
        raise _invalid(key, v, f"Value must be at least {minimum}")
    return v


def _at_least(minimum: int | None) -> Callable[[str, Any], int]:
    return lambda key, value: _long(key, value, minimum)


def _hours(minimum: int | None) -> Callable[[str, Any], int]:
    # KafkaConfig: a negative retention in hours/minutes means "infinite", i.e. -1 ms
    return lambda key, value: max(_long(key, value, minimum) * 3_600_000, -1)


def _minutes(key: str, value: Any) -> int:
    return max(_long(key, value) * 60_000, -1)


def _timestamp_type(key: str, value: Any) -> TimestampType:
    for t in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        if value == t.kafka_name:
            return t
    raise _invalid(key, value, "String must be one of: CreateTime, LogAppendTime")


def _compression(key: str, value: Any) -> str:
    if value not in COMPRESSION_TYPES:
        raise _invalid(key, value, f"String must be one of: {', '.join(COMPRESSION_TYPES)}")
    return str(value)


def _cleanup_policy(key: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    policies = tuple(str(p).strip() for p in items if str(p).strip())
    for p in policies:
        if p not in CLEANUP_POLICIES:
            raise _invalid(key, value, f"The value must be one of [{', '.join(CLEANUP_POLICIES)}]")
    return policies


def _record_validation(key: str, value: Any) -> RecordValidation:
    for v in RecordValidation:
        if value == v.value:
            return v
    raise _invalid(key, value, f"String must be one of: {', '.join(v.value for v in RecordValidation)}")


@dataclass(frozen=True, slots=True)
class _Setting:
    attr: str
    parse: Callable[[str, Any], Any]
    broker_keys: tuple[tuple[str, Callable[[str, Any], Any]], ...]  # gateway-wide synonyms, highest priority first


# topic key -> how it resolves (synonyms: kafka ServerTopicConfigSynonyms)
_SETTINGS: dict[str, _Setting] = {
    "message.timestamp.type": _Setting(
        "message_timestamp_type", _timestamp_type, (("log.message.timestamp.type", _timestamp_type),)),
    "message.timestamp.before.max.ms": _Setting(
        "message_timestamp_before_max_ms", _at_least(0), (("log.message.timestamp.before.max.ms", _at_least(0)),)),
    "message.timestamp.after.max.ms": _Setting(
        "message_timestamp_after_max_ms", _at_least(0), (("log.message.timestamp.after.max.ms", _at_least(0)),)),
    "max.message.bytes": _Setting("max_message_bytes", _at_least(0), (("message.max.bytes", _at_least(0)),)),
    "compression.type": _Setting("compression_type", _compression, (("compression.type", _compression),)),
    "cleanup.policy": _Setting("cleanup_policy", _cleanup_policy, (("log.cleanup.policy", _cleanup_policy),)),
    # Kafka 4.0 (KIP-1030) raised the minimum segment size to 1 MiB (`LogSegment.shouldRoll`)
    "segment.bytes": _Setting("segment_bytes", _at_least(1048576), (("log.segment.bytes", _at_least(1048576)),)),
    "segment.ms": _Setting(
        "segment_ms", _at_least(1), (("log.roll.ms", _at_least(1)), ("log.roll.hours", _hours(1)))),
    "segment.jitter.ms": _Setting(
        "segment_jitter_ms", _at_least(0), (("log.roll.jitter.ms", _at_least(0)), ("log.roll.jitter.hours", _hours(0)))),
    "segment.index.bytes": _Setting(
        "segment_index_bytes", _at_least(4), (("log.index.size.max.bytes", _at_least(4)),)),
    "index.interval.bytes": _Setting(
        "index_interval_bytes", _at_least(0), (("log.index.interval.bytes", _at_least(0)),)),
    "retention.ms": _Setting(
        "retention_ms",
        _at_least(-1),
        (("log.retention.ms", _at_least(-1)), ("log.retention.minutes", _minutes), ("log.retention.hours", _hours(None))),
    ),
    "retention.bytes": _Setting("retention_bytes", _at_least(None), (("log.retention.bytes", _at_least(None)),)),
    # KIP-870 (proposal, not in Kafka): delete a segment whose max event time is this far behind the partition's
    "retention.max.eventtime.ms": _Setting(
        "retention_max_eventtime_ms", _at_least(-1), (("log.retention.max.eventtime.ms", _at_least(-1)),)),
    "max.compaction.lag.ms": _Setting(
        "max_compaction_lag_ms", _at_least(1), (("log.cleaner.max.compaction.lag.ms", _at_least(1)),)),
    # a broker config in Kafka (ProducerStateManagerConfig); the gateway also allows it per topic
    "producer.id.expiration.ms": _Setting(
        "producer_id_expiration_ms", _at_least(1), (("producer.id.expiration.ms", _at_least(1)),)),
    # gateway extension (see RecordValidation)
    "gateway.record.validation": _Setting(
        "record_validation", _record_validation, (("gateway.record.validation", _record_validation),)),
}

# KIP-32's single window, deprecated by KIP-937 and removed in Kafka 4.0 (KIP-937's configs)
DEPRECATED_DIFFERENCE_TOPIC_KEY = "message.timestamp.difference.max.ms"
DEPRECATED_DIFFERENCE_BROKER_KEY = "log.message.timestamp.difference.max.ms"
_WINDOW_KEYS = {
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
}

# Kafka's other topic configs (`LogConfig`, `TopicConfig`): replication, flushing, compaction tuning and tiered
# storage, which the gateway's storage has no use for. A topic takes them, keeps them and shows them in
# DescribeConfigs (frameworks create their topics with some: Kafka Streams sets min.compaction.lag.ms, Connect
# min.insync.replicas), and they change nothing; docs/kafka-compatibility.md lists them.
PASSIVE_TOPIC_CONFIGS = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "delete.retention.ms",
    "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "message.downconversion.enable", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
    "preallocate", "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "unclean.leader.election.enable",
})
TOPIC_CONFIG_KEYS = frozenset(_SETTINGS) | {DEPRECATED_DIFFERENCE_TOPIC_KEY} | PASSIVE_TOPIC_CONFIGS
# topic config -> (its TopicConfig attribute, its gateway-wide synonyms, most specific first)
TOPIC_CONFIG_SETTINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    k: (s.attr, tuple(b for b, _ in s.broker_keys)) for k, s in _SETTINGS.items()}
AUTO_CREATE_KEY = "auto.create.topics.enable"  # Kafka's broker configs of topic creation, registry defaults too
NUM_PARTITIONS_KEY = "num.partitions"
GATEWAY_DEFAULT_KEYS = frozenset(k for s in _SETTINGS.values() for k, _ in s.broker_keys) | {
    DEPRECATED_DIFFERENCE_BROKER_KEY, AUTO_CREATE_KEY, NUM_PARTITIONS_KEY
}


def auto_create_topics(defaults: Mapping[str, Any]) -> bool:
    """`auto.create.topics.enable` of the registry's defaults (the gateway's default: false)."""
    return str(defaults.get(AUTO_CREATE_KEY, "false")).strip().lower() == "true"


def num_partitions(defaults: Mapping[str, Any]) -> int:
    """`num.partitions` of the registry's defaults (Kafka's default: 1)."""
    return _long(NUM_PARTITIONS_KEY, defaults.get(NUM_PARTITIONS_KEY, 1), 1)

# The registry file's own keys: its sections, and the fields of each topic (docs/configuration.md)
REGISTRY_SECTIONS = ("defaults", "topics")
TOPIC_FIELDS = ("partitions", "configs", "id")  # "id": the topic id, where the registry topic gave one
_SEED_ID_NAMESPACE = uuid.UUID("5f6d1a3e-8c2b-4e7a-9b1d-2c4e6a8b0d1f")


@lru_cache(maxsize=4096)  # asked for every partition a fetch names (`TopicConfig.id`)
def seed_topic_id(name: str) -> uuid.UUID:
    """The id of a topic the registry was seeded with (derived from its name, UUID v5: the same on every door and
    across restarts, and the same as before the registry lived on Kafka); topics created later get random ids."""
    return uuid.uuid5(_SEED_ID_NAMESPACE, name)

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


@lru_cache(maxsize=4096)  # asked for every batch the stage decides
def topic_name_error(name: str) -> str | None:
    """Kafka's `Topic.validate` message for an illegal name, or None (Kafka's `Topic.validate`)."""
    prefix = "Topic name is invalid: "
    if name == "":
        return prefix + "the empty string is not allowed"
    if name == ".":
        return prefix + "'.' is not allowed"
    if name == "..":
        return prefix + "'..' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return prefix + f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return prefix + f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _deprecation(message: str) -> None:
    warnings.warn(message, DeprecationWarning, stacklevel=4)
    log.warning(message)


def _resolve_window(topic_key: str, name: str, configs: Mapping[str, Any], defaults: Mapping[str, Any]) -> int | None:
    """A KIP-937 window with the deprecated difference fallback (module docstring order)."""
    broker_key = _WINDOW_KEYS[topic_key]
    if topic_key in configs:
        return _long(topic_key, configs[topic_key], 0)
    if DEPRECATED_DIFFERENCE_TOPIC_KEY in configs:
        value = _long(DEPRECATED_DIFFERENCE_TOPIC_KEY, configs[DEPRECATED_DIFFERENCE_TOPIC_KEY], 0)
        _deprecation(
            f"Topic {name}: {DEPRECATED_DIFFERENCE_TOPIC_KEY} is deprecated (KIP-937, removed in Kafka 4.0); "
            f"using its value {value} for {topic_key}. Set {topic_key} instead."
        )
        return value
    if broker_key in defaults:
        return _long(broker_key, defaults[broker_key], 0)
    if DEPRECATED_DIFFERENCE_BROKER_KEY in defaults:
        value = _long(DEPRECATED_DIFFERENCE_BROKER_KEY, defaults[DEPRECATED_DIFFERENCE_BROKER_KEY], 0)
        _deprecation(
            f"Topic {name}: gateway default {DEPRECATED_DIFFERENCE_BROKER_KEY} is deprecated (KIP-937, removed "
            f"in Kafka 4.0); using its value {value} for {topic_key}. Set {broker_key} instead."
        )
        return value
    return None


def topic_config(
    name: str, partitions: Any, configs: Mapping[str, Any], defaults: Mapping[str, Any] | None = None,
    topic_id: str = "",
) -> TopicConfig:
    """Build a TopicConfig from Kafka-named topic configs over gateway-wide broker-named defaults."""
    defaults = defaults or {}
    err = topic_name_error(name)
    if err is not None:
        raise ConfigError(err)
    if name in INTERNAL_TOPICS:
        raise ConfigError(f"Topic {name} is an internal Kafka topic; the gateway cannot lead it")
    for key in configs:
        if key not in TOPIC_CONFIG_KEYS:
            raise ConfigError(f"Unknown topic config name: {key} (topic {name}); known: {', '.join(sorted(TOPIC_CONFIG_KEYS))}")
    if isinstance(partitions, bool) or not isinstance(partitions, int | str):
        raise ConfigError(f"Invalid partitions {partitions} for topic {name}: must be an integer of at least 1")
    try:
        n_partitions = int(partitions)
    except ValueError:
        raise ConfigError(f"Invalid partitions {partitions} for topic {name}: must be an integer of at least 1") from None
    if not 1 <= n_partitions <= INT_MAX:
        raise ConfigError(f"Invalid partitions {partitions} for topic {name}: must be an integer of at least 1")
    kwargs: dict[str, Any] = {}
    for topic_key, setting in _SETTINGS.items():
        if topic_key in _WINDOW_KEYS:
            value = _resolve_window(topic_key, name, configs, defaults)
            if value is not None:
                kwargs[setting.attr] = value
            continue
        if topic_key in configs:
            kwargs[setting.attr] = setting.parse(topic_key, configs[topic_key])
            continue
        for broker_key, parse in setting.broker_keys:
            if broker_key in defaults:
                kwargs[setting.attr] = parse(broker_key, defaults[broker_key])
                break
    passive = tuple(sorted((k, str(v)) for k, v in configs.items() if k in PASSIVE_TOPIC_CONFIGS))
    config = TopicConfig(name=name, partitions=n_partitions, explicit=frozenset(configs), topic_id=topic_id,
                         passive=passive, **kwargs)
    if config.compression_type != "producer":
        log.info(
            "Topic %s: compression.type=%s; batches with another codec are rejected with "
            "UNSUPPORTED_COMPRESSION_TYPE (the gateway never recompresses, docs/design.md: what the stage decides)",
            name, config.compression_type,
        )
    return config


def check_gateway_defaults(defaults: Mapping[str, Any]) -> None:
    """Validate every gateway-wide default once (even ones no topic inherits). Unknown keys are
    logged and ignored, as a Kafka broker does with an unknown config."""
    for key, value in defaults.items():
        if key in (DEPRECATED_DIFFERENCE_BROKER_KEY, NUM_PARTITIONS_KEY):
            _long(key, value, 0 if key == DEPRECATED_DIFFERENCE_BROKER_KEY else 1)
            continue
        if key == AUTO_CREATE_KEY:
            if str(value).strip().lower() not in ("true", "false"):
                raise _invalid(key, value, "Expected value to be either true or false")
            continue
        parser = next((p for s in _SETTINGS.values() for k, p in s.broker_keys if k == key), None)
        if parser is None:
            log.warning("The configuration '%s' was supplied but isn't a known gateway default; ignored", key)
            continue
        parser(key, value)


@dataclass(frozen=True)
class TopicRegistry:
    """The target topics the gateway leads, by name (`conf/topics.json`):

        {"defaults": {<broker-named gateway defaults>},
         "topics": {"<name>": {"partitions": <n>, "configs": {<Kafka topic configs>}}}}
    """

    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # plain dicts (copied): the registry is pickled into Spark closures, mappingproxy is not picklable
        object.__setattr__(self, "topics", dict(self.topics))
        object.__setattr__(self, "defaults", dict(self.defaults))

    def get(self, name: str | None) -> TopicConfig | None:
        return self.topics.get(name) if name is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self.topics

    def __len__(self) -> int:
        return len(self.topics)

    @property
    def largest_max_message_bytes(self) -> int:
        """The largest max.message.bytes of the registry's topics (0 without topics): the largest batch
        a producer may rightly send, which the gateway's own hops must carry (`contract.limits`)."""
        return max((t.max_message_bytes for t in self.topics.values()), default=0)

    @staticmethod
    def from_json(doc: Any) -> TopicRegistry:
        if not isinstance(doc, dict):
            raise ConfigError("Topic registry must be a JSON object with 'defaults' and 'topics'")
        unknown = set(doc) - set(REGISTRY_SECTIONS)
        if unknown:
            raise ConfigError(f"Unknown topic registry section(s): {', '.join(sorted(unknown))}; "
                              f"allowed: {', '.join(REGISTRY_SECTIONS)}")
        defaults = doc.get("defaults") or {}
        topics_doc = doc.get("topics") or {}
        if not isinstance(defaults, dict) or not isinstance(topics_doc, dict):
            raise ConfigError("Topic registry 'defaults' and 'topics' must be JSON objects")
        check_gateway_defaults(defaults)
        topics = {}
        for name, spec in topics_doc.items():
            if not isinstance(spec, dict):
                raise ConfigError(f"Topic {name}: spec must be an object with 'partitions' and 'configs'")
            extra = set(spec) - set(TOPIC_FIELDS)
            if extra:
                raise ConfigError(f"Topic {name}: unknown field(s) {', '.join(sorted(extra))}; "
                                  f"allowed: {', '.join(TOPIC_FIELDS)}")
            configs = spec.get("configs") or {}
            if not isinstance(configs, dict):
                raise ConfigError(f"Topic {name}: 'configs' must be an object of Kafka topic configs")
            topic_id = spec.get("id", "")
            if topic_id:
                try:
                    topic_id = str(uuid.UUID(str(topic_id)))
                except ValueError:
                    raise ConfigError(f"Topic {name}: id {topic_id!r} is not a UUID") from None
            topics[name] = topic_config(name, spec.get("partitions", 1), configs, defaults, topic_id)
        return TopicRegistry(topics, defaults)

    @staticmethod
    def loads(text: str) -> TopicRegistry:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"Topic registry is not valid JSON: {e}") from None
        return TopicRegistry.from_json(doc)

    @staticmethod
    def load(path: str | Path) -> TopicRegistry:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"Cannot read topic registry {path}: {e}") from None
        return TopicRegistry.loads(text)


