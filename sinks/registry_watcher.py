"""The topic registry file, watched: the current `TopicRegistry`, re-read when the file changes (file I/O,
so not in the pure `validators`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from validators.topic_config import ConfigError, TopicRegistry

log = logging.getLogger("gateway.registry")


class RegistryWatcher:
    """The current topic registry from a file, re-read whenever the file changes.

    `current()` stats the file (cheap) and reloads when its (mtime, size, inode) changed. A bad
    reload (unreadable, invalid JSON, invalid config) keeps serving the last good registry, logs why
    once per file version, and exposes it as `last_error`. The first load must succeed (ConfigError).

    A watcher is pickled into every Spark worker. With `last_good_path` (a file on storage all of
    them share), whoever loads a valid version records its text there, and a watcher that meets a
    bad file falls back to that record — so a worker started after the file went bad serves the
    newest valid registry, not the one the driver had at query start.
    """

    def __init__(self, path: str | Path, last_good_path: str | Path | None = None) -> None:
        self.path = Path(path)
        self.last_good_path = None if last_good_path is None else Path(last_good_path)
        self.last_error: str | None = None
        self.generation = 0
        stamp = self._stamp()
        text = self._read(self.path)
        self._registry = TopicRegistry.loads(text)
        self._stamp_seen = stamp
        self._record_last_good(text)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"Cannot read topic registry {path}: {e}") from None

    def _record_last_good(self, text: str) -> None:
        if self.last_good_path is None:
            return
        try:
            if self.last_good_path.exists() and self.last_good_path.read_text(encoding="utf-8") == text:
                return
            tmp = self.last_good_path.with_name(f"{self.last_good_path.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.last_good_path)  # atomic: readers see the old or the new text
        except OSError as e:
            log.warning("Cannot record the last good topic registry in %s: %s", self.last_good_path, e)

    def _fallback(self) -> TopicRegistry:
        if self.last_good_path is not None:
            try:
                return TopicRegistry.loads(self._read(self.last_good_path))
            except ConfigError:
                pass
        return self._registry

    def current(self) -> TopicRegistry:
        stamp = self._stamp()
        if stamp == self._stamp_seen:
            return self._registry
        self._stamp_seen = stamp
        try:
            text = self._read(self.path)
            registry = TopicRegistry.loads(text)
        except ConfigError as e:
            self.last_error = str(e)
            log.warning("Topic registry %s not reloaded, keeping the last good one: %s", self.path, e)
            self._registry = self._fallback()
            return self._registry
        self._registry = registry
        self._record_last_good(text)
        self.last_error = None
        self.generation += 1
        log.debug("Topic registry %s reloaded (%d topics)", self.path, len(registry))  # at every topic change
        return registry
