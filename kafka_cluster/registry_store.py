"""The topic registry on the gateway's Kafka cluster (docs/configuration.md: the topic registry): a compacted
topic of one partition (`contract.topics.registry_topic`), read whole when a process starts (`load`) and followed
afterwards by a consumer thread, so a topic created, altered or deleted through any front door reaches every door
and the query's driver within a poll. What the records mean is `validators.registry_log`; this is its I/O.

Writes go to partition 0 with an acks=all producer, one at a time. A write returns once this process's follower has
applied everything up to it, so the caller sees the registry as every reader will (a creation that raced
another door's knows here whether it came first).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from contract.topics import REGISTRY_TOPIC_CONFIGS, REGISTRY_TOPIC_PARTITIONS
from kafka_cluster.admin import create_topics, watermarks
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from validators.registry_log import DEFAULTS_KEY, SEED_KEY, RegistryLog, TopicSpec
from validators.topic_config import ConfigError, TopicRegistry, seed_topic_id

log = logging.getLogger("gateway.registry")
POLL_S = 0.2
FOLLOW_FETCH_WAIT_MS = 50  # how long the follower's fetch waits at the end of the topic: a write's latency bound


class RegistryError(RuntimeError):
    """The registry topic cannot be read, or a write was not acknowledged."""


class TopicExists(RegistryError):
    """Another creation of the name came first (Kafka's TOPIC_ALREADY_EXISTS)."""


class RegistryStore:
    """The registry's records, loaded and followed; `current()` the registry they give, `generation` counts its
    changes. `create`, `alter` and `delete` write records and return when they apply here."""

    def __init__(self, cluster: KafkaCluster, topic: str, *, timeout_ms: int = 30_000) -> None:
        self.cluster = cluster
        self.topic_name = topic
        self._timeout_ms = timeout_ms
        self._log = RegistryLog()
        self._applied = threading.Condition()
        self._ops = threading.Lock()  # one creation at a time from this process
        self.generation = 0
        self._producer: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ reading

    def _consumer(self, purpose: str) -> Any:
        return Consumer(self.cluster.client({
            "group.id": self.cluster.group_id(purpose), "enable.auto.commit": False,
            "allow.auto.create.topics": False, "enable.partition.eof": False, "logger": KAFKA_CLIENT_LOG,
            "fetch.wait.max.ms": FOLLOW_FETCH_WAIT_MS}))

    def ensure_topic(self) -> None:
        """Create the registry topic if it does not exist (compacted, one partition); the gateway's commands
        create it with its other topics, so this only asks the cluster's metadata."""
        consumer = self._consumer("registry-check")
        try:
            described = consumer.list_topics(self.topic_name, timeout=self._timeout_ms / 1000).topics.get(self.topic_name)
            if described is not None and described.error is None and described.partitions:
                return
        except KafkaException:
            pass  # creating it says what is wrong
        finally:
            consumer.close()
        try:
            create_topics(self.cluster, [(self.topic_name, REGISTRY_TOPIC_PARTITIONS, REGISTRY_TOPIC_CONFIGS)],
                          timeout=self._timeout_ms / 1000)
        except KafkaException as e:
            raise RegistryError(f"topic registry {self.topic_name}: {e.args[0].str() if e.args else e}") from None
        except TimeoutError:
            raise RegistryError(f"topic registry {self.topic_name}: the cluster did not create it within "
                                f"{self._timeout_ms} ms") from None

    def load(self) -> None:
        """Every record the topic holds now, applied in order; RegistryError when it cannot be read."""
        consumer = self._consumer("registry-load")
        timeout_s = self._timeout_ms / 1000
        try:
            meta = consumer.list_topics(self.topic_name, timeout=timeout_s)
            described = meta.topics.get(self.topic_name)
            if described is None or described.error is not None or not described.partitions:
                raise RegistryError(f"topic registry {self.topic_name} does not exist"
                                    + (f" ({described.error})" if described is not None and described.error else ""))
            end = watermarks(consumer, self.topic_name, 0, timeout_s)[1]
            if end > 0:
                consumer.assign([TopicPartition(self.topic_name, 0, OFFSET_BEGINNING)])
                while self._log.position < end:
                    msg = consumer.poll(timeout_s)
                    if msg is None:
                        raise RegistryError(f"topic registry {self.topic_name}: no records within {self._timeout_ms} ms "
                                            f"while loading (at offset {self._log.position} of {end})")
                    if msg.error() is not None:
                        raise RegistryError(f"topic registry {self.topic_name}: {msg.error()}")
                    self._apply(msg.key(), msg.value(), msg.offset())
            with self._applied:
                self._log.position = max(self._log.position, end)  # compaction leaves gaps before the end
        except KafkaException as e:
            raise RegistryError(f"topic registry {self.topic_name}: {e}") from None
        finally:
            consumer.close()

    def _apply(self, raw_key: bytes | None, value: bytes | None, offset: int) -> None:
        try:
            key = (raw_key or b"").decode()
        except UnicodeDecodeError:
            key = ""
        with self._applied:
            before = self._log.position
            self._log.apply(key, value, offset)
            if self._log.position != before:
                self.generation += 1
            self._applied.notify_all()

    @property
    def seeded(self) -> bool:
        """Whether a seed file was ever applied to the registry."""
        with self._applied:
            return self._log.seed is not None

    def current(self) -> TopicRegistry:
        with self._applied:
            return self._log.registry()

    def topic(self, name: str) -> TopicSpec | None:
        with self._applied:
            return self._log.topic(name)

    def file_document(self) -> dict[str, Any]:
        with self._applied:
            return self._log.file_document()

    # ------------------------------------------------------------------ following and writing

    def start(self) -> None:
        """Follow the topic from where `load` ended, and accept writes."""
        self._producer = Producer(self.cluster.client({
            # a repeated record is harmless (a key's record applied again), so no idempotence: its PID request
            # would wait for a cluster's transaction coordinator to load, with a warning, at every start
            "enable.idempotence": False, "max.in.flight.requests.per.connection": 1, "acks": "all", "linger.ms": 0,
            "message.timeout.ms": self._timeout_ms,
            "client.id": "gateway-registry", "logger": KAFKA_CLIENT_LOG}))
        self._thread = threading.Thread(target=self._follow, name="gateway-registry-follow", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        consumer = self._consumer("registry-follow")
        try:
            consumer.assign([TopicPartition(self.topic_name, 0, self._log.position)])
            while not self._stop.is_set():
                msg = consumer.poll(POLL_S)
                if msg is None:
                    continue
                if msg.error() is not None:
                    log.warning("topic registry %s: %s", self.topic_name, msg.error())
                    continue
                self._apply(msg.key(), msg.value(), msg.offset())
        finally:
            consumer.close()

    def _write(self, key: str, value: bytes | None) -> int:
        """One record written; returns its offset once the follower has applied it."""
        assert self._producer is not None, "start() first"
        done = threading.Event()
        outcome: list[Any] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            outcome.append(err if err is not None else msg.offset())
            done.set()

        try:
            self._producer.produce(self.topic_name, key=key.encode(), value=value, partition=0, on_delivery=delivered)
        except (KafkaException, BufferError) as e:
            raise RegistryError(f"topic registry {self.topic_name}: {e}") from None
        deadline = time.monotonic() + self._timeout_ms / 1000
        while not done.is_set() and time.monotonic() < deadline:
            self._producer.poll(0.05)
        if not outcome or isinstance(outcome[0], KafkaError):
            raise RegistryError(f"topic registry {self.topic_name}: {outcome[0] if outcome else 'no acknowledgement'}")
        offset = int(outcome[0])
        with self._applied:
            if not self._applied.wait_for(lambda: self._log.position > offset, max(0.0, deadline - time.monotonic())):
                raise RegistryError(f"topic registry {self.topic_name}: its record at offset {offset} was not read back "
                                    f"within {self._timeout_ms} ms")
        return offset

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               ) -> TopicSpec:
        """A new topic (a random id unless given); TopicExists when the name is taken, or when another door's
        creation of it came first."""
        with self._ops:
            if self.topic(name) is not None:
                raise TopicExists(f"Topic '{name}' already exists.")
            spec = TopicSpec(name, str(topic_id or uuid.uuid4()), partitions, dict(configs))
            self._write(spec.key, spec.value())
            if (winner := self.topic(name)) is None or winner.topic_id != spec.topic_id:
                self._write(spec.key, None)  # the race's later creation withdraws its own record
                raise TopicExists(f"Topic '{name}' already exists.")
            return winner

    def alter(self, name: str, *, partitions: int | None = None, configs: Mapping[str, str] | None = None) -> TopicSpec:
        """The topic's record rewritten with new partitions or configs (its id and creation kept)."""
        with self._ops:
            spec = self.topic(name)
            if spec is None:
                raise RegistryError(f"Topic {name} does not exist")
            changed = TopicSpec(name, spec.topic_id, spec.partitions if partitions is None else partitions,
                                dict(spec.configs if configs is None else configs), spec.created)
            self._write(changed.key, changed.value())
            return changed

    def delete(self, name: str) -> TopicSpec | None:
        """Every incarnation of the name deleted; the topic it was, or None."""
        with self._ops:
            with self._applied:
                keys = [k for k, s in self._log.incarnations.items() if s.name == name]
                spec = self._log.topic(name)
            for key in keys:
                self._write(key, None)
            return spec

    def apply_seed(self, text: str) -> None:
        """A seed file's text (`conf/topics.json`) applied as its difference from the one applied last: the first
        one creates every topic it names (with the name's seed id), a later change creates, alters and deletes
        what changed in the file. A topic's partitions only grow (Kafka cannot remove partitions). ConfigError
        when the file is not a valid registry; nothing is written then."""
        TopicRegistry.loads(text)  # validates every topic and default
        new = json.loads(text)
        with self._applied:
            if self._log.seed == text:
                return
            first = self._log.seed is None
            old = json.loads(self._log.seed) if self._log.seed else {}
        if (new.get("defaults") or {}) != (old.get("defaults") or {}):
            self._write_locked(DEFAULTS_KEY, json.dumps(new.get("defaults") or {}, sort_keys=True).encode())
        new_topics, old_topics = new.get("topics") or {}, old.get("topics") or {}
        for name, spec in new_topics.items():
            if not first and old_topics.get(name) == spec:
                continue
            partitions, configs = int(spec.get("partitions", 1)), {k: str(v) for k, v in (spec.get("configs") or {}).items()}
            held = self.topic(name)
            if held is None:
                try:
                    self.create(name, partitions, configs, seed_topic_id(name) if first else None)
                except TopicExists:
                    pass
            elif (held.partitions, dict(held.configs)) != (partitions, configs):
                if partitions < held.partitions:
                    log.warning("topic %s: the seed file gives %d partitions, the topic has %d; partitions are "
                                "never removed", name, partitions, held.partitions)
                self.alter(name, partitions=max(partitions, held.partitions), configs=configs)
        for name in old_topics.keys() - new_topics.keys():
            self.delete(name)
        self._write_locked(SEED_KEY, text.encode())

    def _write_locked(self, key: str, value: bytes | None) -> None:
        with self._ops:
            self._write(key, value)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None


def seed_from_file(store: RegistryStore, path: str) -> None:
    """The seed file applied (`apply_seed`); ConfigError naming the file when it cannot be read or is invalid."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"Cannot read topic registry {path}: {e}") from None
    store.apply_seed(text)
