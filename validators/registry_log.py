"""The topic registry as the records of its topic (docs/configuration.md: the topic registry), folded in offset
order into the registry they describe: a pure function of the records, so every front door and the query's
driver that read the same records serve the same topics (Kafka keeps its topics the same way, as records of its
metadata log: `TopicRecord`, `PartitionRecord`, `ConfigRecord`, `RemoveTopicRecord`).

Keys and values (the topic is compacted, so only a key's last record lasts):

- `topic/<name>/<topic id>`: one incarnation of a topic, its value a JSON `TopicSpec` (partitions, configs and
  the offset of its creation); a tombstone deletes it. A key per incarnation, not per name: a deleted and
  re-created topic is another key, and compaction can never bring the old incarnation back.
- `defaults`: the gateway-wide defaults (the seed file's `defaults`, Kafka's `server.properties`).
- `seed`: the seed file's text as last applied (`kafka_cluster/registry_store.py` applies each change of the file as
  the difference from it).

Two creations of one name can race (two doors): both are written; the incarnation created first (the lowest
creation offset) is the topic, on every reader, and the later one's writer deletes its own record and answers
TOPIC_ALREADY_EXISTS, as Kafka's controller refuses the second `CreateTopics`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from validators.topic_config import ConfigError, TopicConfig, TopicRegistry, topic_config

log = logging.getLogger(__name__)

TOPIC_PREFIX = "topic/"
DEFAULTS_KEY = "defaults"
SEED_KEY = "seed"
UNKNOWN_OFFSET = -1  # a creation record's own offset is its creation offset


def topic_key(name: str, topic_id: str) -> str:
    return f"{TOPIC_PREFIX}{name}/{topic_id}"


@dataclass(frozen=True)
class TopicSpec:
    """One incarnation of a topic as its record holds it."""

    name: str
    topic_id: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    created: int = UNKNOWN_OFFSET  # the offset of the record that created it

    @property
    def key(self) -> str:
        return topic_key(self.name, self.topic_id)

    def value(self) -> bytes:
        return json.dumps({"partitions": self.partitions, "configs": dict(self.configs), "created": self.created},
                          separators=(",", ":"), sort_keys=True).encode()

    @staticmethod
    def decode(name: str, topic_id: str, value: bytes, offset: int) -> TopicSpec:
        doc = json.loads(value)
        created = int(doc.get("created", UNKNOWN_OFFSET))
        configs = doc.get("configs") or {}
        if not isinstance(configs, dict):
            raise ValueError("configs is not an object")
        return TopicSpec(name, topic_id, int(doc["partitions"]), {str(k): str(v) for k, v in configs.items()},
                         offset if created == UNKNOWN_OFFSET else created)

    def file_entry(self) -> dict[str, Any]:
        """Its entry in a registry file (`TopicRegistry.from_json`)."""
        return {"partitions": self.partitions, "configs": dict(self.configs), "id": self.topic_id}


class RegistryLog:
    """The registry's records folded in offset order (`apply`); `registry()` is the `TopicRegistry` they give."""

    def __init__(self) -> None:
        self.incarnations: dict[str, TopicSpec] = {}  # by key: every live incarnation, a race's later one included
        self.defaults: dict[str, Any] = {}
        self.seed: str | None = None
        self.position = 0  # the offset after the last record applied
        self._registry: TopicRegistry | None = None
        self._configs: dict[tuple[str, str], tuple[TopicSpec, TopicConfig]] = {}  # built once per spec

    def apply(self, key: str, value: bytes | None, offset: int) -> None:
        """One record; records at or before `position` were applied already (a writer applies its own record when
        acknowledged, and its follower meets it again)."""
        if offset < self.position:
            return
        self.position = offset + 1
        if key.startswith(TOPIC_PREFIX):
            name, sep, topic_id = key[len(TOPIC_PREFIX):].rpartition("/")
            if not sep:
                log.warning("registry record %r at offset %d: not topic/<name>/<id>; skipped", key, offset)
                return
            if value is None:
                self.incarnations.pop(key, None)
            else:
                try:
                    self.incarnations[key] = TopicSpec.decode(name, topic_id, value, offset)
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("registry record %s at offset %d is not a topic spec (%s); skipped", key, offset, e)
                    return
        elif key == DEFAULTS_KEY:
            try:
                defaults = json.loads(value) if value is not None else {}
            except ValueError:
                log.warning("registry defaults at offset %d are not JSON; skipped", offset)
                return
            self.defaults = defaults if isinstance(defaults, dict) else {}
            self._configs.clear()
        elif key == SEED_KEY:
            self.seed = value.decode() if value is not None else None
            return
        else:
            log.warning("registry record %r at offset %d: unknown key; skipped", key, offset)
            return
        self._registry = None

    def topics(self) -> dict[str, TopicSpec]:
        """Each name's topic: of its live incarnations, the one created first."""
        out: dict[str, TopicSpec] = {}
        for spec in self.incarnations.values():
            held = out.get(spec.name)
            if held is None or (spec.created, spec.topic_id) < (held.created, held.topic_id):
                out[spec.name] = spec
        return out

    def topic(self, name: str) -> TopicSpec | None:
        return self.topics().get(name)

    def registry(self) -> TopicRegistry:
        """The registry the records give; a topic whose stored configs no longer validate (a default changed under
        it) is left out, with a warning, rather than failing every topic."""
        if self._registry is not None:
            return self._registry
        configs: dict[str, TopicConfig] = {}
        built: dict[tuple[str, str], tuple[TopicSpec, TopicConfig]] = {}
        for name, spec in self.topics().items():
            cached = self._configs.get((name, spec.topic_id))
            if cached is not None and cached[0] == spec:
                config = cached[1]
            else:
                try:
                    config = topic_config(name, spec.partitions, spec.configs, self.defaults, spec.topic_id)
                except ConfigError as e:
                    log.warning("registry topic %s left out: %s", name, e)
                    continue
            configs[name] = config
            built[(name, spec.topic_id)] = (spec, config)
        self._configs = built
        self._registry = TopicRegistry(configs, self.defaults)
        return self._registry

    def file_document(self) -> dict[str, Any]:
        """The registry as a registry file's document, ids included (what the query's executors read)."""
        return {"defaults": dict(self.defaults),
                "topics": {name: spec.file_entry() for name, spec in sorted(self.topics().items())}}

