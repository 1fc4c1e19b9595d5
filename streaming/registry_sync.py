"""The query driver's side of the topic registry (docs/configuration.md: the topic registry).

The registry lives on the gateway's Kafka cluster (`kafka_cluster/registry_store.py`), followed by the driver. At the
start of every micro-batch (`before_micro_batch`, from the foreachBatch sink, when no task of the query runs)
the driver:

1. applies a change of the seed file (`topics_file`), as the same change through the admin APIs would (a
   thread also looks at the file every `SEED_CHECK_S`, so the doors serve a change without waiting for a
   micro-batch);
2. removes from the segment storage the partitions of topics deleted or re-created since
   (`storage.topic_incarnations`);
3. writes the registry to the checkpoint (`topic-registry.json`), the file the stage's and the sink's tasks
   read (`RegistryWatcher`): every task of the micro-batch decides and appends with the registry step 2 made
   the storage agree with.

A topic created, altered or deleted through any door is thus decided from the next micro-batch on.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from kafka_cluster.registry_store import RegistryError, RegistryStore, seed_from_file
from storage import topic_incarnations
from streaming.config import GatewayConfig
from validators.topic_config import ConfigError

log = logging.getLogger("gateway.registry")

EXECUTOR_REGISTRY_FILE = "topic-registry.json"
SEED_CHECK_S = 1.0


class RegistrySync:
    def __init__(self, store: RegistryStore, seed_file: Path, executor_file: Path, segments_root: Path,
                 owns_store: bool = False) -> None:
        self.store = store
        self.seed_file = Path(seed_file)
        self.executor_file = Path(executor_file)
        self.segments_root = Path(segments_root)
        self._owns_store = owns_store
        self._seed_stamp: tuple[int, int, int] | None = None
        self._synced = -1
        self.last_error: str | None = None
        self._seeding = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> RegistrySync:
        """The seed file applied (ConfigError when it is invalid or unreadable), the executors' file written, and
        the seed file watched."""
        self._apply_seed(strict=True)
        self.before_micro_batch()
        self._watcher = threading.Thread(target=self._watch, name="gateway-registry-seed", daemon=True)
        self._watcher.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(SEED_CHECK_S):
            try:
                self._apply_seed(strict=False)
            except RegistryError as e:  # the cluster did not take it: the next look tries again
                self._seed_stamp = None
                log.warning("Topic registry %s not applied: %s", self.seed_file, e)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.seed_file)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _apply_seed(self, strict: bool) -> None:
        with self._seeding:
            self._apply_seed_once(strict)

    def _apply_seed_once(self, strict: bool) -> None:
        stamp = self._stamp()
        if stamp == self._seed_stamp and not strict:
            return
        self._seed_stamp = stamp
        try:
            try:
                text = self.seed_file.read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"Cannot read topic registry {self.seed_file}: {e}") from None
            self.store.apply_seed(text)
            self.last_error = None
        except ConfigError as e:
            if strict:
                raise
            self.last_error = str(e)
            log.warning("Topic registry %s not applied, keeping the registry as it is: %s", self.seed_file, e)

    def before_micro_batch(self) -> None:
        self._apply_seed(strict=False)
        if self.store.generation == self._synced:
            return
        self._synced = self.store.generation
        document = self.store.file_document()
        ids = {name: spec["id"] for name, spec in document["topics"].items()}
        topic_incarnations.sync(self.segments_root, ids)
        tmp = self.executor_file.with_name(f"{self.executor_file.name}.tmp")
        tmp.write_text(json.dumps(document, indent=1), encoding="utf-8")
        os.replace(tmp, self.executor_file)  # atomic: a task reads the old registry or the new one

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=30)
        if self._owns_store:
            self.store.close()


def open_registry_store(config: GatewayConfig, seed_if_new: bool = False) -> RegistryStore:
    """The registry store of `config`'s cluster: its topic created if missing, loaded and followed; with
    `seed_if_new`, a registry never seeded takes `topics_file` (a door that starts before any query)."""
    store = RegistryStore(config.cluster, config.registry_topic_name, timeout_ms=config.startup_timeout_ms)
    try:
        store.ensure_topic()
        store.load()
        store.start()
        if seed_if_new and not store.seeded:
            seed_from_file(store, str(config.path(config.topics_file)))
    except BaseException:
        store.close()
        raise
    return store
