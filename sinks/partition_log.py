"""A target partition's log directory: batches appended to the segment file, made idempotent per
micro-batch by a commit record (DESIGN §4.5).

Walking-skeleton storage: one segment, `00000000000000000000.log`. The commit record
(`gateway-commit.json`: last micro-batch id, log end offset, log size) is written after fsync;
a replayed micro-batch (id ≤ committed) writes nothing, and a torn tail left by a crash between the
data write and the commit record is truncated back to the committed size before appending.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

COMMIT_FILE = "gateway-commit.json"


def segment_file_name(base_offset: int, suffix: str = ".log") -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True)
class CommitRecord:
    batch_id: int
    log_end_offset: int
    log_size: int


@dataclass(frozen=True)
class AppendOutcome:
    topic: str
    partition: int
    batch_id: int
    skipped_replay: bool
    batches: int
    bytes_written: int
    log_end_offset: int


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    return root / f"{topic}-{partition}"


def read_commit(directory: Path) -> CommitRecord | None:
    path = directory / COMMIT_FILE
    if not path.exists():
        return None
    return CommitRecord(**json.loads(path.read_text()))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_commit(directory: Path, commit: CommitRecord) -> None:
    tmp = directory / (COMMIT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(asdict(commit), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / COMMIT_FILE)
    _fsync_dir(directory)


def append_batches(
    root: Path, topic: str, partition: int, batch_id: int, batches: Iterable[tuple[int, int, bytes]]
) -> AppendOutcome:
    """Append (base_offset, last_offset, bytes) in offset order for one micro-batch."""
    directory = partition_dir(root, topic, partition)
    directory.mkdir(parents=True, exist_ok=True)
    commit = read_commit(directory)
    if commit is not None and batch_id <= commit.batch_id:
        return AppendOutcome(topic, partition, batch_id, True, 0, 0, commit.log_end_offset)
    log_path = directory / segment_file_name(0)
    committed_size = commit.log_size if commit else 0
    log_end = commit.log_end_offset if commit else 0
    count = written = 0
    with open(log_path, "ab") as f:
        f.truncate(committed_size)  # drop a torn tail from a crash before the commit record
        f.seek(committed_size)
        for base_offset, last_offset, data in batches:
            if base_offset != log_end:
                raise ValueError(
                    f"{topic}-{partition}: batch at offset {base_offset} does not continue the log end offset {log_end}"
                )
            f.write(data)
            log_end = last_offset + 1
            count += 1
            written += len(data)
        f.flush()
        os.fsync(f.fileno())
    _write_commit(directory, CommitRecord(batch_id, log_end, committed_size + written))
    return AppendOutcome(topic, partition, batch_id, False, count, written, log_end)
