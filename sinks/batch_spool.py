"""The batch bytes of a micro-batch's decisions, handed from the stage to the sink's task through the
executor's local disk instead of through Spark (DESIGN §5, §6).

The stage's output and the sink's `mapInArrow` are one narrow Spark stage: the same task, on the same
host, runs the stateful function and then the sink over its rows, and a retried task runs both again. So
the stage writes each decision's bytes (stored bytes when accepted, the original when rejected) to a spool
file of its group and emits only where they are (`DecisionRow.spool`, `spool_offset`, `spool_length`); the
sink's task copies accepted batches from there into their segment inside the kernel (`FileSpan`: they never
come back into Python), reads rejected ones back for their dead letters, and removes the file when the
task is done. The bytes then cross the JVM/Python boundary once (into the stage) instead of three times
(out of the stage, back into the sink's Python worker). Spool files a failed task left behind are swept
after `STALE_AFTER_S`.

Layout of a spool file: the batches back to back, in the order of the stage's rows.
"""

from __future__ import annotations

import itertools
import mmap
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from contract.decision_row import DecisionRow
from sinks.storage.file_span import FileSpan, write_at
from validators.codec.record_batch import RECORD_BATCH_OVERHEAD

SPOOL_DIR = Path(tempfile.gettempdir()) / "gateway-spool"
STALE_AFTER_S = 3600.0  # a spool file this old belongs to no running task (micro-batches take seconds)
_SWEEP_EVERY_S = 300.0
_last_sweep = 0.0


@dataclass(frozen=True)
class Spooled:
    """Where `spool_batches` put each batch: its file, and per batch its offset and length there."""

    path: str
    offsets: list[int]
    lengths: list[int]


def spool_batches(batches: Sequence[bytes | None], tag: str, directory: Path = SPOOL_DIR) -> Spooled:
    """`batches` back to back in one new spool file (`tag` names it for people: the target partition), so
    that consecutive accepted batches are one span the sink copies into its segment at once."""
    directory.mkdir(parents=True, exist_ok=True)
    _sweep(directory)
    path = directory / f"{_safe(tag)}-{uuid.uuid4().hex}.spool"
    pieces = [b or b"" for b in batches]
    lengths = [len(p) for p in pieces]
    offsets = list(itertools.accumulate(lengths, initial=0))[:-1]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_at(fd, pieces, 0)  # type: ignore[arg-type]
    finally:
        os.close(fd)
    return Spooled(str(path), offsets, lengths)


def spool_rows(rows: list[DecisionRow], tag: str, directory: Path = SPOOL_DIR) -> list[DecisionRow]:
    """`rows` with their bytes moved to one new spool file."""
    if not rows:
        return rows
    spooled = spool_batches([row.batch for row in rows], tag, directory)
    return [
        row._replace(batch=None, spool=spooled.path, spool_offset=offset, spool_length=length)
        for row, offset, length in zip(rows, spooled.offsets, spooled.lengths, strict=True)
    ]


class Unspooler:
    """Reads rows' bytes back from their spool files as the rows arrive (each file opened and mapped once),
    or hands them on as spans of the file for the segment to copy (`span`), and remembers the files for
    `remove_spools` once the task's work is durable and published. Rows not spooled pass unchanged. Use it
    as a context manager: the files are closed at its end."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[BinaryIO, mmap.mmap | bytes]] = {}

    def _open(self, path: str) -> tuple[BinaryIO, mmap.mmap | bytes]:
        opened = self._files.get(path)
        if opened is None:
            f = open(path, "rb")  # noqa: SIM115 — held until close()
            size = os.fstat(f.fileno()).st_size
            opened = self._files[path] = (f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b"")
        return opened

    def read(self, row: DecisionRow) -> DecisionRow:
        """The row with its bytes back in `batch`."""
        if row.spool is None:
            return row
        _, view = self._open(row.spool)
        data = view[row.spool_offset : row.spool_offset + row.spool_length]
        if len(data) != row.spool_length:
            raise EOFError(f"spool {row.spool} ends before the {row.spool_length} bytes at {row.spool_offset}")
        return row._replace(batch=data, spool=None, spool_offset=-1, spool_length=-1)

    def span(self, row: DecisionRow) -> FileSpan:
        """The row's spooled bytes as a span of its spool file, with the batch header read."""
        if row.spool is None:
            raise ValueError(f"row {row.request_id} is not spooled")
        f, view = self._open(row.spool)
        if row.spool_offset + row.spool_length > len(view):
            raise EOFError(f"spool {row.spool} ends before the {row.spool_length} bytes at {row.spool_offset}")
        head = view[row.spool_offset : row.spool_offset + min(row.spool_length, RECORD_BATCH_OVERHEAD)]
        return FileSpan(f.fileno(), row.spool_offset, row.spool_length, head)

    @property
    def paths(self) -> list[Path]:
        return [Path(p) for p in self._files]

    def close(self) -> None:
        for f, view in self._files.values():
            if isinstance(view, mmap.mmap):
                view.close()
            f.close()

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
