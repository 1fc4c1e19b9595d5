"""Producer ids for idempotent producers (`ProducerIdManager`, KIP-730): the front door takes blocks of
1 000 ids from an allocation kept beside the segments, so ids stay unique across restarts and across
front doors sharing the segments root (the allocation file is updated under an exclusive lock, then
fsynced and renamed, as a controller commits the next block start to its metadata log).

A restart abandons the rest of its block, as a broker does; ids are 63-bit, so nothing runs out.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from storage.commit_record import fsync_dir
from storage.partition_lock import PartitionLock

BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
STATE_DIR = ".front-door"  # under the segments root; not a partition directory (no "-<n>" suffix)
STATE_FILE = "producer-ids.json"


class ProducerIdManager:
    def __init__(self, segments_root: Path) -> None:
        self.directory = Path(segments_root) / STATE_DIR
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0  # exclusive end of the block in hand

    def generate(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._next = self._allocate_block()
                self._end = self._next + BLOCK_SIZE
            pid = self._next
            self._next += 1
            return pid

    def _allocate_block(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / STATE_FILE
        with PartitionLock(self.directory):
            try:
                start = int(json.loads(path.read_text())["next_block_start"])
            except FileNotFoundError:
                start = 0
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}: unreadable producer id allocation ({e}); it must be "
                                 '{"next_block_start": <n>}') from None
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(json.dumps({"next_block_start": start + BLOCK_SIZE}))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_dir(self.directory)
        return start
