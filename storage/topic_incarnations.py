"""Which incarnation of each topic the segment storage holds, and the partitions of deleted topics removed
(Kafka's `LogManager.asyncDelete`: a deleted partition's directory renamed `<topic>-<partition>.<id>-delete`,
then removed).

`<root>/gateway-topics.json` maps each stored topic's name to its topic id. When the registry no longer has the
name, or has it with another id (deleted and re-created), the name's partition directories are removed before
the new incarnation appends, so its offsets start at 0 and none of the old records leak into it. The query's
driver calls `sync` between micro-batches, when no task of the sink writes (`streaming/registry_sync.py`); the
front doors read the map (`stored_id`) to serve a re-created topic's partitions as empty until then.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from storage.file_names import list_partitions, partition_dir

log = logging.getLogger("gateway.storage")

INCARNATIONS_FILE = "gateway-topics.json"
DELETE_SUFFIX = "-delete"  # Kafka's `LogFileUtils.DELETE_DIR_SUFFIX`


def read_incarnations(root: Path) -> dict[str, str] | None:
    """Topic name -> id of what the storage holds; None before the first `sync`."""
    try:
        doc = json.loads((Path(root) / INCARNATIONS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("%s unreadable (%s); taken as absent", Path(root) / INCARNATIONS_FILE, e)
        return None
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else None


def _write(root: Path, ids: Mapping[str, str]) -> None:
    path = Path(root) / INCARNATIONS_FILE
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(sorted(ids.items())), indent=1), encoding="utf-8")
    os.replace(tmp, path)


def delete_topic_partitions(root: Path, topic: str, topic_id: str) -> int:
    """Every partition directory of `topic` renamed aside and removed; how many there were."""
    removed = 0
    for name, partition in list_partitions(root):
        if name != topic:
            continue
        directory = partition_dir(root, name, partition)
        aside = directory.with_name(f"{directory.name}.{topic_id.replace('-', '')}{DELETE_SUFFIX}")
        os.replace(directory, aside)  # atomic: a reader sees the partition or nothing
        shutil.rmtree(aside, ignore_errors=True)
        removed += 1
    return removed


def sync(root: Path, current: Mapping[str, str]) -> dict[str, int]:
    """Make the storage hold only `current`'s incarnations (name -> topic id): the partitions of every stored
    topic that is gone or has another id removed. The first sync takes what is stored as `current`'s (storage
    from before topics had ids). Returns partitions removed by topic."""
    root = Path(root)
    stored = read_incarnations(root)
    if stored is None:
        root.mkdir(parents=True, exist_ok=True)
        _write(root, current)
        return {}
    removed: dict[str, int] = {}
    for name, topic_id in stored.items():
        if current.get(name) != topic_id:
            removed[name] = delete_topic_partitions(root, name, topic_id)
            log.info("topic %s (id %s) deleted: %d partition directories removed", name, topic_id, removed[name])
    if stored != current:
        _write(root, current)
    return removed


def stored_id(root: Path, topic: str) -> str | None:
    """The id of the incarnation of `topic` the storage holds (None: unknown, or not stored)."""
    ids = read_incarnations(root)
    return None if ids is None else ids.get(topic)


class IncarnationView:
    """`stored_id` for the front doors' reads, the map re-read only when its file changed (one stat a call)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / INCARNATIONS_FILE
        self._stamp: tuple[int, int, int] | None = None
        self._ids: dict[str, str] | None = None

    def holds(self, topic: str, topic_id: str) -> bool:
        """Whether the storage's partitions of `topic` (if any) are of incarnation `topic_id`: False while a
        re-created topic's old partitions wait for the query's next micro-batch to remove them."""
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            self._ids = read_incarnations(self.path.parent) if stamp is not None else None
        held = None if self._ids is None else self._ids.get(topic)
        return held is None or held == topic_id
