"""The per-partition commit record `gateway-commit.json` (DESIGN §4.5, §5): the last applied micro-batch,
log start and end offset, and per live segment its committed file sizes, checksums and max timestamp.
Replaced atomically (write, fsync, rename, fsync the directory) only after the data it describes is
durable.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from sinks.storage.crash_point import crash_point
from sinks.storage.errors import KafkaStorageError

COMMIT_FILE = "gateway-commit.json"
COMMIT_TMP_FILE = COMMIT_FILE + ".tmp"


COMMIT_FORMAT_VERSION = 2


@dataclass(frozen=True, slots=True)
class SegmentState:
    """Committed valid sizes of one segment's files."""

    base_offset: int
    log_size: int
    index_size: int
    time_index_size: int
    append_time_index_size: int
    created_ms: int = -1
    # CRC-32 of the valid bytes of `.index` / `.timeindex` (None: unknown, e.g. a record written before them)
    index_crc: int | None = None
    time_index_crc: int | None = None
    # maxTimestampAndOffsetSoFar (reference §5.2): Kafka keeps it in memory for the active segment, whose
    # time index lacks the final entry until a roll or close. None: unknown (an older record), scanned.
    max_timestamp: int | None = None
    max_timestamp_offset: int | None = None
    append_time_index_crc: int | None = None  # CRC-32 of the valid `.appendtimeindex` bytes (readers check it)

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return (self.log_size, self.index_size, self.time_index_size, self.append_time_index_size)


@dataclass(frozen=True, slots=True)
class CommitRecord:
    batch_id: int
    log_end_offset: int
    log_start_offset: int = 0
    segments: tuple[SegmentState, ...] = ()
    version: int = COMMIT_FORMAT_VERSION

    @property
    def log_size(self) -> int:
        return sum(s.log_size for s in self.segments)

    def to_json(self) -> str:
        # field by field, not `asdict` (a deep copy): a partition may list hundreds of segments, and the
        # record is written at every micro-batch
        doc: dict[str, Any] = {name: getattr(self, name) for name in _COMMIT_FIELDS}
        doc["segments"] = [_segment_doc(s) for s in self.segments]
        return json.dumps(doc, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> CommitRecord:
        doc = json.loads(text)
        if doc.get("version") != COMMIT_FORMAT_VERSION:
            raise ValueError(f"commit record format {doc.get('version')}, this gateway reads {COMMIT_FORMAT_VERSION}")
        segments = tuple(SegmentState(**s) for s in doc.pop("segments"))
        return CommitRecord(segments=segments, **doc)


_COMMIT_FIELDS = tuple(f.name for f in fields(CommitRecord) if f.name != "segments")
_SEGMENT_FIELDS = tuple(f.name for f in fields(SegmentState))


@lru_cache(maxsize=65_536)
def _segment_doc(state: SegmentState) -> dict[str, Any]:
    """A segment's JSON object (its state is immutable: built once per state, not at every commit)."""
    return {name: getattr(state, name) for name in _SEGMENT_FIELDS}


def read_commit(directory: Path) -> CommitRecord | None:
    """The partition's commit record; None when there is none (a new or foreign directory)."""
    path = Path(directory) / COMMIT_FILE
    try:
        return CommitRecord.from_json(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSON errors are ValueErrors
        raise KafkaStorageError(f"{path}: not a valid commit record ({type(e).__name__}: {e})") from None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_commit(directory: Path, commit: CommitRecord) -> None:
    """Atomic replace: tmp file written and fsynced, renamed over the record, directory fsynced."""
    write_commit_tmp(directory, commit, sync=True)
    crash_point("commit-tmp-written")
    replace_commit(directory)
    fsync_dir(directory)


def write_commit_tmp(directory: Path, commit: CommitRecord, sync: bool) -> None:
    """The record's tmp file, fsynced when `sync` (a group commit syncs the filesystem instead)."""
    with open(os.path.join(directory, COMMIT_TMP_FILE), "w") as f:
        f.write(commit.to_json())
        if sync:
            f.flush()
            os.fsync(f.fileno())


def replace_commit(directory: Path) -> None:
    """The durable tmp file renamed over the record: the commit (durable once the directory is)."""
    os.replace(os.path.join(directory, COMMIT_TMP_FILE), os.path.join(directory, COMMIT_FILE))

