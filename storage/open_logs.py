"""The partition logs a process keeps open between micro-batches, as a Kafka broker keeps every log open between
appends (`LogManager`'s current logs) instead of opening and recovering it for each produce.

A sink's Python worker handles the same target partitions micro-batch after micro-batch (Spark reuses its Python
workers), and opening a partition — its lock, its commit record, the active segment's four files and their
state — costs more than appending one batch to it. `OpenLogs.release` keeps a log whose appends are all
committed (`PartitionLog.suspend`: its lock released, its files and state kept); `OpenLogs.open` takes it up again
when nothing changed the partition since (`PartitionLog.resume_with`), and otherwise opens the partition afresh, with
recovery. So whatever the cache holds, a partition is appended to exactly as after a fresh open.

Bounded: at most `max_logs` logs (each keeps four file descriptors: the active segment's `.log`, `.index`,
`.timeindex` and `.appendtimeindex`; by default a sixteenth of the process's descriptor limit, at most 1 024) and
`max_index_bytes` of their indexes' entries in memory; the least recently used are closed first
(docs/deployment.md, sizing).
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from storage.batched_calls import resume_all
from storage.log_config import SegmentConfig
from storage.partition_log import PartitionLog, segment_config_of
from validators.topic_config import TopicConfig

MAX_OPEN_LOGS = 1024
MAX_INDEX_BYTES = 64 * 1024 * 1024
# a kept log's descriptors: four; the rest of the limit stays for the appends, sockets and libraries
_DESCRIPTOR_SHARE = 16


def default_max_logs() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_OPEN_LOGS if soft == resource.RLIM_INFINITY else max(0, min(MAX_OPEN_LOGS, soft // _DESCRIPTOR_SHARE))


def _index_bytes(plog: PartitionLog) -> int:
    segment = plog.active
    return 0 if segment is None else segment.offset_index.size_in_bytes + segment.time_index.size_in_bytes


class OpenLogs:
    """Logs kept open between uses, by (segments root, topic, partition); safe to use from several threads."""

    def __init__(self, max_logs: int | None = None, max_index_bytes: int = MAX_INDEX_BYTES) -> None:
        self.max_logs = default_max_logs() if max_logs is None else max_logs
        self.max_index_bytes = max_index_bytes
        self._kept: OrderedDict[tuple[str, str, int], tuple[PartitionLog, int]] = OrderedDict()
        self._ready: dict[tuple[str, str, int], PartitionLog] = {}  # taken up by `resume_many`, for `open`
        self._index_bytes = 0
        self._guard = threading.Lock()
        self.reused = self.opened = 0  # what `open` did, for tests and figures

    def open(self, root: Path, topic: str, partition: int,
             config: TopicConfig | SegmentConfig | None = None) -> PartitionLog:
        """The partition's log, locked: the kept one where nothing changed the partition since, else opened
        afresh (`PartitionLog.open`, with recovery)."""
        self.resume_many(root, [(topic, partition, config)])  # a kept one not taken up yet: now
        with self._guard:
            ready = self._ready.pop((str(root), topic, partition), None)
        if ready is not None:
            return ready
        self.opened += 1
        return PartitionLog.open(root, topic, partition, config)

    def resume_many(self, root: Path, wanted: Iterable[tuple[str, int, TopicConfig | SegmentConfig | None]]) -> None:
        """The kept logs among `wanted` (topic, partition, config) taken up together, `open` then giving them at
        once: their locks taken and their records, markers and lengths read in one call (`batched_calls
        .resume_all`: one release of the interpreter's lock instead of seven system calls each). A log something
        changed meanwhile, or whose call failed, is closed, and `open` opens its partition afresh. Logs taken up
        and never opened go back with `release_ready`."""
        found: list[tuple[tuple[str, str, int], PartitionLog, TopicConfig | SegmentConfig | None]] = []
        with self._guard:
            for topic, partition, config in wanted:
                key = (str(root), topic, partition)
                kept = self._kept.pop(key, None)
                if kept is not None:
                    self._index_bytes -= kept[1]
                    found.append((key, kept[0], config))
        if not found:
            return
        try:
            results = resume_all([plog.resume_probe() for _key, plog, _config in found])
        except BaseException:
            for _key, plog, _config in found:
                plog.discard()
            raise
        for (key, plog, config), resumed in zip(found, results, strict=True):
            if plog.resume_with(segment_config_of(config), resumed):
                self.reused += 1
                with self._guard:
                    self._ready[key] = plog
            else:
                plog.discard()

    def release_ready(self) -> None:
        """Logs `resume_many` took up that no `open` took (a task that failed first): kept again."""
        with self._guard:
            ready = list(self._ready.values())
            self._ready.clear()
        for plog in ready:
            self.release(plog)

    def release(self, plog: PartitionLog) -> None:
        """Done with `plog` for now: kept when all of it is committed (`PartitionLog.suspend`), else closed."""
        if self.max_logs <= 0 or not plog.suspend():
            plog.close()
            return
        size = _index_bytes(plog)
        evicted: list[PartitionLog] = []
        with self._guard:
            key = (str(plog.root), plog.topic, plog.partition)
            previous = self._kept.pop(key, None)
            if previous is not None:  # not expected (one user of a partition at a time), but never leak it
                self._index_bytes -= previous[1]
                evicted.append(previous[0])
            self._kept[key] = (plog, size)
            self._index_bytes += size
            while self._kept and (len(self._kept) > self.max_logs or self._index_bytes > self.max_index_bytes):
                _key, (old, old_size) = self._kept.popitem(last=False)
                self._index_bytes -= old_size
                evicted.append(old)
        for old in evicted:
            old.discard()

    def close_all(self) -> None:
        self.release_ready()
        with self._guard:
            kept = [plog for plog, _size in self._kept.values()]
            self._kept.clear()
            self._index_bytes = 0
        for plog in kept:
            plog.discard()

    def __len__(self) -> int:
        return len(self._kept)
