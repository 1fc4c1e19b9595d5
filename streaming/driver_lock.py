"""The lock that lets one driver at a time run the query over a checkpoint and its segment storage.

Every `gateway run` takes it before its query starts; a driver started with `--standby` gets its JVM,
Spark session and Python workers ready first, then waits for it, and starts the query (and the front
door) the moment the active driver is gone. Two queries on one checkpoint would race on its offset log
and on the sink's per-partition commits; the lock keeps that from ever starting.

The lock is the segment storage's lock (`storage/partition_lock.py`: an open-file-description lock,
which NFS carries to the server) on `<checkpoint>.driver.lock`, beside the checkpoint directory (whose
contents are Spark's). The kernel releases it when the process ends, however it ends, so a standby on the
same host takes over as soon as a kill -9 lands. On a shared filesystem the NFS server releases it when the
client host says so or, for a host that crashed, when its lease expires (NFSv4: 90 s by default) — that,
not the gateway, bounds failover across hosts. Who holds it is written to `<checkpoint>.driver.json`.

A driver's Spark JVM exits when its Python process ends (PySpark's gateway server watches its stdin), and
a task still running for a dead driver cannot write what the new one writes: each partition's appends
hold that partition's lock.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from storage.partition_lock import FileLock

# How often a standby tries the lock: its share of the failover time.
POLL_S = 0.05


@dataclass(frozen=True)
class DriverHolder:
    """The driver that holds the lock, as it wrote itself down when it took it."""

    host: str
    pid: int
    since_ms: int
    front_door: str  # its bootstrap address ("" without a front door)

    def describe(self) -> str:
        door = f", front door {self.front_door}" if self.front_door else ""
        return f"pid {self.pid} on {self.host} since {time.strftime('%H:%M:%S', time.localtime(self.since_ms / 1000))}{door}"


class DriverLock:
    """`try_acquire()` or `wait()` for it, `release()` once the query has stopped and the logs are closed."""

    def __init__(self, checkpoint: Path) -> None:
        self.path = checkpoint.with_name(checkpoint.name + ".driver.lock")
        self.holder_path = checkpoint.with_name(checkpoint.name + ".driver.json")
        self._lock = FileLock(self.path)

    @property
    def held(self) -> bool:
        return self._lock.held

    def try_acquire(self) -> bool:
        if self._lock.held:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self._lock.acquire(blocking=False)

    def wait(self, stop: threading.Event, poll_s: float = POLL_S) -> bool:
        """Takes the lock as soon as it is free; False when `stop` was set first."""
        while not stop.is_set():
            if self.try_acquire():
                return True
            stop.wait(poll_s)
        return False

    def record(self, front_door: str) -> DriverHolder:
        """Writes down who holds the lock (only the holder calls this)."""
        assert self._lock.held, "record() without the lock"
        holder = DriverHolder(socket.getfqdn(), os.getpid(), int(time.time() * 1000), front_door)
        tmp = self.holder_path.with_name(f"{self.holder_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(holder)))
        tmp.replace(self.holder_path)
        return holder

    def holder(self) -> DriverHolder | None:
        """Who wrote down that they hold the lock last (None: nobody, or the file is unreadable)."""
        try:
            doc = json.loads(self.holder_path.read_text())
            return DriverHolder(str(doc["host"]), int(doc["pid"]), int(doc["since_ms"]), str(doc.get("front_door", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def release(self) -> None:
        self._lock.release()
