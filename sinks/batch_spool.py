"""The batch bytes of a micro-batch's decisions, handed from the stage to the sink's task through the
executor's local disk instead of through Spark (DESIGN §5, §6).

The stage's output and the sink's `mapInArrow` are one narrow Spark stage: the same task, on the same
host, runs the stateful function and then the sink over its rows, and a retried task runs both again. So
the stage writes each decision's bytes (stored bytes when accepted, the original when rejected) to a spool
file of its group and emits only where they are (`DecisionRow.spool`, `spool_offset`); the sink's task
reads them back before it appends and publishes, and removes the file when the task is done. The bytes
then cross the JVM/Python boundary once (into the stage) instead of three times (out of the stage, back
into the sink's Python worker). Spool files a failed task left behind are swept after `STALE_AFTER_S`.

Layout of a spool file: per batch, its length (4 bytes, big-endian) then its bytes.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from contract.decision_row import DecisionRow
from sinks.storage.segment import write_at

SPOOL_DIR = Path(tempfile.gettempdir()) / "gateway-spool"
STALE_AFTER_S = 3600.0  # a spool file this old belongs to no running task (micro-batches take seconds)
_SWEEP_EVERY_S = 300.0
_LENGTH = struct.Struct(">I")
_last_sweep = 0.0


def spool_rows(rows: list[DecisionRow], tag: str, directory: Path = SPOOL_DIR) -> list[DecisionRow]:
    """`rows` with their bytes moved to one new spool file (`tag` names it for people: the target partition)."""
    if not rows:
        return rows
    directory.mkdir(parents=True, exist_ok=True)
    _sweep(directory)
    path = directory / f"{_safe(tag)}-{uuid.uuid4().hex}.spool"
    pieces: list[bytes] = []
    out: list[DecisionRow] = []
    position = 0
    for row in rows:
        data = row.batch or b""
        pieces.append(_LENGTH.pack(len(data)))
        pieces.append(data)
        out.append(row._replace(batch=None, spool=str(path), spool_offset=position))
        position += _LENGTH.size + len(data)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_at(fd, pieces, 0)
    finally:
        os.close(fd)
    return out


class Unspooler:
    """Reads rows' bytes back from their spool files as the rows arrive (each file mapped once), and
    remembers the files for `remove_spools` once the task's work is durable and published. Rows not
    spooled pass unchanged. Use it as a context manager: the maps are closed at its end."""

    def __init__(self) -> None:
        self._maps: dict[str, mmap.mmap] = {}

    def read(self, row: DecisionRow) -> DecisionRow:
        if row.spool is None:
            return row
        view = self._maps.get(row.spool)
        if view is None:
            with open(row.spool, "rb") as f:
                view = self._maps[row.spool] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        start = row.spool_offset + _LENGTH.size
        (length,) = _LENGTH.unpack_from(view, row.spool_offset)
        return row._replace(batch=view[start : start + length], spool=None, spool_offset=-1)

    @property
    def paths(self) -> list[Path]:
        return [Path(p) for p in self._maps]

    def close(self) -> None:
        for view in self._maps.values():
            view.close()

    def __enter__(self) -> Unspooler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unspool_rows(rows: list[DecisionRow]) -> tuple[list[DecisionRow], list[Path]]:
    """`rows` with their bytes read back from the spool, and the spool files they came from."""
    with Unspooler() as unspooler:
        return [unspooler.read(row) for row in rows], unspooler.paths


def remove_spools(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _sweep(directory: Path) -> None:
    """Remove spool files older than STALE_AFTER_S (left by tasks that failed before removing theirs),
    at most every _SWEEP_EVERY_S per process."""
    global _last_sweep
    now = time.time()
    if now - _last_sweep < _SWEEP_EVERY_S:
        return
    _last_sweep = now
    for entry in os.scandir(directory):
        try:
            if entry.name.endswith(".spool") and now - entry.stat().st_mtime > STALE_AFTER_S:
                os.unlink(entry.path)
        except OSError:
            pass  # removed meanwhile by its own task or another sweep


def _safe(tag: str) -> str:
    """A file-name-safe rendering of a topic name (hostile names must not escape the directory)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in tag)[:100]
