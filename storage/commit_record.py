"""The per-partition commit record `gateway-commit.json` (docs/design.md): the last applied micro-batch, the log
start and end offset, the active segment's committed file sizes, checksums and max timestamp, and which list of
the older (inactive) segments belongs to it. Replaced atomically (write, fsync, rename, fsync the directory)
only after the data it describes is durable.

Both files carry a CRC-32 of their content (`crc32`, first, over the rest of the text as written): a damaged record
or list is a clear error naming the file, never another valid record whose sizes would cut the log. Files of an
earlier release, without one, are read as they are.

The inactive segments never change until a roll, a retention pass or a repair, so they are kept apart, in
`gateway-segments.<generation>.json`, written once per change under a new generation and named by the record:
a micro-batch's commit writes and reads a record of the same size however many segments the partition retains.
`RECOVERY_MARKER` is on disk while the directory may hold files its record does not describe (a roll, a
retention pass or a repair under way); only then does opening the partition list the directory.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from storage.crash_point import crash_point
from storage.errors import KafkaStorageError
from storage.linux_calls import exchange

COMMIT_FILE = "gateway-commit.json"
COMMIT_TMP_FILE = COMMIT_FILE + ".tmp"
SEGMENT_LIST_PREFIX = "gateway-segments."  # + "<generation>.json": the inactive segments of a commit record
RECOVERY_MARKER = "gateway-recover"  # files the commit record does not describe may exist (module docstring)

COMMIT_FORMAT_VERSION = 3
_INLINE_SEGMENTS_VERSION = 2  # every segment in the record itself: read, and rewritten at the next commit


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
    # maxTimestampAndOffsetSoFar (`LogSegment.append`): Kafka keeps it in memory for the active segment, whose
    # time index lacks the final entry until a roll or close. None: unknown (an older record), scanned.
    max_timestamp: int | None = None
    max_timestamp_offset: int | None = None
    append_time_index_crc: int | None = None  # CRC-32 of the valid `.appendtimeindex` bytes (readers check it)
    # The last valid entries of each index that are not in its file yet, as the file would hold them: a group
    # commit writes an active segment's index entries once they fill `INDEX_TAIL_LIMIT` bytes, and the record
    # carries them until then (docs/design.md, "Index entries in the record"). The sizes and CRCs above count
    # them; a file holds `size - len(tail)` bytes of its own.
    index_tail: bytes = b""
    time_index_tail: bytes = b""
    append_time_index_tail: bytes = b""

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return (self.log_size, self.index_size, self.time_index_size, self.append_time_index_size)

    @property
    def tails(self) -> tuple[bytes, bytes, bytes]:
        """The `.index`, `.timeindex` and `.appendtimeindex` entries the record carries for their files."""
        return (self.index_tail, self.time_index_tail, self.append_time_index_tail)


@dataclass(frozen=True, slots=True)
class CommitRecord:
    batch_id: int
    log_end_offset: int
    log_start_offset: int = 0
    segments: tuple[SegmentState, ...] = ()  # every segment, oldest first; the last is the active one
    version: int = COMMIT_FORMAT_VERSION
    segment_list: int = 0  # the generation of `gateway-segments.<n>.json` holding segments[:-1] (0: none)
    first_unstable_offset: int | None = None  # the first open transaction's first offset (None: none open)

    @property
    def log_size(self) -> int:
        return sum(s.log_size for s in self.segments)

    def to_json(self) -> str:
        """The whole record as one document (what `segments dump` shows)."""
        doc: dict[str, Any] = {name: getattr(self, name) for name in ("version", "batch_id", "log_end_offset",
                                                                      "log_start_offset", "segment_list")}
        doc["segments"] = [_segment_doc(s) for s in self.segments]
        if self.first_unstable_offset is not None:
            doc["first_unstable_offset"] = self.first_unstable_offset
        return json.dumps(doc, sort_keys=True)

    def head(self, segment_list: int | None = None) -> CommitHead:
        return CommitHead(self.batch_id, self.log_end_offset, self.log_start_offset,
                          self.segments[-1] if self.segments else None,
                          self.segment_list if segment_list is None else segment_list,
                          max(len(self.segments) - 1, 0), self.segments[:-1], self.first_unstable_offset)


@dataclass(frozen=True, slots=True)
class CommitHead:
    """What `gateway-commit.json` itself holds: the commit without the inactive segments' list, which
    `inactive_segments` reads on demand (`inactive` when it is already known)."""

    batch_id: int
    log_end_offset: int
    log_start_offset: int = 0
    active: SegmentState | None = None
    segment_list: int = 0
    inactive_count: int = 0
    inactive: tuple[SegmentState, ...] | None = None
    # the first open transaction's first offset (None: none open): read_committed reads stop below it. Kafka
    # keeps it in memory, rebuilt from its producer snapshots; the gateway's stage keeps the transactions
    first_unstable_offset: int | None = None

    @property
    def segment_count(self) -> int:
        return self.inactive_count + (self.active is not None)

    def to_json(self) -> str:
        """The record's JSON: its CRC-32 first, then its fields in key order (`with_crc`), as
        `json.dumps(..., sort_keys=True)` writes them. Formatted directly, every field an integer or null: a third
        of `json.dumps`'s cost, once per partition per micro-batch."""
        unstable = self.first_unstable_offset
        return with_crc(
            f'{{"active": {"null" if self.active is None else _segment_json(self.active)}, "batch_id": {self.batch_id:d}, '
            + ("" if unstable is None else f'"first_unstable_offset": {unstable:d}, ')
            + f'"inactive_count": {self.inactive_count:d}, "log_end_offset": {self.log_end_offset:d}, '
            f'"log_start_offset": {self.log_start_offset:d}, "segment_list": {self.segment_list:d}, '
            f'"version": {COMMIT_FORMAT_VERSION:d}}}'
        )

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (Kafka's `lastStableOffset`)."""
        return self.log_end_offset if self.first_unstable_offset is None else self.first_unstable_offset

    @staticmethod
    def from_json(text: str) -> CommitHead:
        doc = json.loads(without_crc(text))
        version = doc.get("version")
        if version == _INLINE_SEGMENTS_VERSION:
            segments = tuple(segment_state(s) for s in doc["segments"])
            return CommitRecord(doc["batch_id"], doc["log_end_offset"], doc.get("log_start_offset", 0), segments,
                                segment_list=0).head()
        if version != COMMIT_FORMAT_VERSION:
            raise ValueError(f"commit record format {version}, this gateway reads {COMMIT_FORMAT_VERSION}")
        active = doc["active"]
        unstable = doc.get("first_unstable_offset")
        return CommitHead(int(doc["batch_id"]), int(doc["log_end_offset"]), int(doc["log_start_offset"]),
                          None if active is None else segment_state(active), int(doc["segment_list"]),
                          int(doc["inactive_count"]), () if int(doc["inactive_count"]) == 0 else None,
                          None if unstable is None else int(unstable))

    def inactive_segments(self, directory: Path) -> tuple[SegmentState, ...]:
        if self.inactive is not None:
            return self.inactive
        path = Path(directory) / segment_list_name(self.segment_list)
        try:
            doc = json.loads(without_crc(path.read_text()))
            listed = doc if isinstance(doc, list) else doc["segments"]  # a bare list: an earlier release's
            segments = tuple(segment_state(s) for s in listed)
        except FileNotFoundError:
            raise KafkaStorageError(f"{path}: the segment list of the commit record is missing") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise KafkaStorageError(f"{path}: not a valid segment list ({type(e).__name__}: {e})") from None
        if len(segments) != self.inactive_count:
            raise KafkaStorageError(f"{path}: {len(segments)} segments, the commit record says {self.inactive_count}")
        return segments

    def record(self, directory: Path) -> CommitRecord:
        """The whole commit record (the inactive segments read when not known)."""
        inactive = self.inactive_segments(directory)
        segments = inactive if self.active is None else (*inactive, self.active)
        return CommitRecord(self.batch_id, self.log_end_offset, self.log_start_offset, segments,
                            segment_list=self.segment_list, first_unstable_offset=self.first_unstable_offset)


_CRC_PREFIX = '{"crc32": '


def with_crc(body: str) -> str:
    """A JSON object with the CRC-32 of its text put first: `{"crc32": <CRC-32 of body>, <body's fields>}`."""
    assert body.startswith("{") and body != "{}", body
    return f"{_CRC_PREFIX}{zlib.crc32(body.encode())}, {body[1:]}"


def without_crc(text: str) -> str:
    """The object `with_crc` wrote, its CRC-32 checked and taken off; one without a CRC (an earlier release's)
    as it is. A mismatch raises ValueError."""
    if not text.startswith(_CRC_PREFIX):
        return text
    comma = text.find(", ", len(_CRC_PREFIX))
    body = "{" + text[comma + 2:].rstrip() if comma >= 0 else ""
    if not body or zlib.crc32(body.encode()) != int(text[len(_CRC_PREFIX):comma]):
        raise ValueError("its CRC-32 does not match its content (the file is damaged)")
    return body


def segment_list_name(generation: int) -> str:
    return f"{SEGMENT_LIST_PREFIX}{generation}.json"


_TAIL_FIELDS = ("index_tail", "time_index_tail", "append_time_index_tail")
_SEGMENT_FIELDS = tuple(f.name for f in fields(SegmentState))
_NUMBER_KEYS = tuple(sorted(name for name in _SEGMENT_FIELDS if name not in _TAIL_FIELDS))
_SEGMENT_JSON = "{" + ", ".join(f'"{name}": %s' for name in _NUMBER_KEYS) + "}"


def _segment_json(state: SegmentState) -> str:
    """`json.dumps(_segment_doc(state), sort_keys=True)`: every field an integer or null, the tails hex strings
    (only those not empty)."""
    if not (state.index_tail or state.time_index_tail or state.append_time_index_tail):
        return _SEGMENT_JSON % tuple("null" if (v := getattr(state, name)) is None else f"{v:d}"
                                     for name in _NUMBER_KEYS)
    pairs = [(name, "null" if (v := getattr(state, name)) is None else f"{v:d}") for name in _NUMBER_KEYS]
    pairs.extend((name, f'"{tail.hex()}"') for name in _TAIL_FIELDS if (tail := getattr(state, name)))
    pairs.sort()
    return "{" + ", ".join(f'"{name}": {value}' for name, value in pairs) + "}"


@lru_cache(maxsize=65_536)
def _segment_doc(state: SegmentState) -> dict[str, Any]:
    """A segment's JSON object (its state is immutable: built once per state, not at every commit); a tail only
    when not empty, as hex."""
    doc: dict[str, Any] = {name: getattr(state, name) for name in _NUMBER_KEYS}
    for name in _TAIL_FIELDS:
        tail = getattr(state, name)
        if tail:
            doc[name] = tail.hex()
    return doc


def segment_state(doc: dict[str, Any]) -> SegmentState:
    """A segment's state from its JSON object (`_segment_doc`; `doc` is left as it is)."""
    return SegmentState(**{name: bytes.fromhex(value) if name in _TAIL_FIELDS else value
                           for name, value in doc.items()})


def read_commit(directory: Path) -> CommitRecord | None:
    """The partition's whole commit record; None when there is none (a new or foreign directory)."""
    head = read_commit_head(directory)
    return None if head is None else head.record(directory)


def read_commit_head(directory: Path) -> CommitHead | None:
    """The partition's commit record without its inactive segments (read on demand); None when there is none."""
    path = Path(directory) / COMMIT_FILE
    try:
        return CommitHead.from_json(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSON errors are ValueErrors
        raise KafkaStorageError(f"{path}: not a valid commit record ({type(e).__name__}: {e})") from None


RecordVersion = tuple[int, int, int, int]


def record_version(directory: str | Path) -> RecordVersion | None:
    """What tells a partition's commit record from its next one without reading it: the file's inode, size and
    modification and change times (a commit exchanges or renames another file into its place, which changes
    the inode and the change time); None without one. A reader that saw a version and finds it again knows
    the partition's committed log is as it read it."""
    try:
        st = os.stat(os.path.join(directory, COMMIT_FILE))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def fsync_path(path: Path | str, data_only: bool = False) -> None:
    """A file or directory made durable by its path (`data_only`: `fdatasync`, its data and size)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        (os.fdatasync if data_only else os.fsync)(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    fsync_path(directory)


def write_commit(directory: Path, commit: CommitRecord) -> None:
    """The whole record: its inactive segments under a new list generation, then the record (`write_head`), then
    the old list removed. For the rare changes of the segments (retention, recovery, repair)."""
    with recovery_marked(directory):
        generation = commit.segment_list + 1 if len(commit.segments) > 1 else 0
        if generation:
            write_segment_list(directory, generation, commit.segments[:-1], sync=True)
        write_head(directory, commit.head(generation))
        if commit.segment_list and commit.segment_list != generation:
            remove_segment_list(directory, commit.segment_list)


def write_head(directory: Path, head: CommitHead, sync: bool = True) -> bytes:
    """Atomic replace: tmp file written and fsynced, renamed over the record, directory fsynced (`sync` False:
    neither fsync; the caller makes the record durable, `sync_record`). Returns the record's JSON as written
    (without the padding)."""
    data = head.to_json().encode()
    tmp, record = commit_paths(directory)
    write_tmp_record(tmp, data, sync)
    crash_point("commit-tmp-written")
    put_in_place(tmp, record)
    if sync:
        fsync_dir(directory)
    return data


def sync_record(directory: Path) -> None:
    """A record `write_head` left unsynced made durable: its file, then its directory (the rename, and a
    recovery marker made beside it)."""
    fsync_path(os.path.join(directory, COMMIT_FILE))
    fsync_dir(directory)


TmpRecord = tuple[str, bytes]  # a tmp file's path (`commit_paths`) and the record to write to it


def write_tmp_record(path: str, record: bytes, sync: bool = False) -> None:
    """`record` written over the tmp file at `path` (made when missing), fsynced when `sync` (a group commit's are
    written together, `storage.batched_calls`, and synced with the filesystem). Where the record is exchanged in
    place (`put_in_place`), the tmp file is the previous record and is overwritten, padded with spaces to its
    length (JSON allows them): no file is created or truncated at a commit."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        os.pwrite(fd, record.ljust(size) if len(record) < size else record, 0)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_segment_list(directory: Path, generation: int, segments: tuple[SegmentState, ...] | list[SegmentState],
                       sync: bool) -> None:
    """A new generation of the inactive segments' list (a new file, named by the next record)."""
    with open(os.path.join(directory, segment_list_name(generation)), "w") as f:
        f.write(with_crc(json.dumps({"segments": [_segment_doc(s) for s in segments]})))
        if sync:
            f.flush()
            os.fsync(f.fileno())


def remove_segment_list(directory: Path, generation: int) -> None:
    """An old generation, once no durable record names it (a leftover is removed by the next recovery)."""
    try:
        os.unlink(os.path.join(directory, segment_list_name(generation)))
    except FileNotFoundError:
        pass


def mark_for_recovery(directory: Path, sync: bool = True) -> None:
    """`RECOVERY_MARKER` made durable before files the record does not describe are made or removed (`sync`
    False: the caller makes it durable before any such file holds data)."""
    path = os.path.join(directory, RECOVERY_MARKER)
    if not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        if sync:
            fsync_dir(directory)


def clear_recovery_mark(directory: Path) -> None:
    """Once the durable record describes every file again."""
    try:
        os.unlink(os.path.join(directory, RECOVERY_MARKER))
    except FileNotFoundError:
        pass


def marked_for_recovery(directory: Path) -> bool:
    return os.path.exists(os.path.join(directory, RECOVERY_MARKER))


@contextmanager
def recovery_marked(directory: Path) -> Iterator[None]:
    """The marker on disk while the body makes or removes files; removed when it returns (kept on an error)."""
    was_marked = marked_for_recovery(directory)
    mark_for_recovery(directory)
    yield
    if not was_marked:
        clear_recovery_mark(directory)


def commit_paths(directory: Path | str) -> tuple[str, str]:
    """The record's tmp file and the record."""
    return os.path.join(directory, COMMIT_TMP_FILE), os.path.join(directory, COMMIT_FILE)


def put_in_place(tmp: str, record: str) -> None:
    """The durable tmp file put in the record's place: the commit (durable once the directory is). Exchanged
    with the record atomically where the system can (`linux_calls.exchange`), so the previous record stays as
    the next tmp file; else renamed over it (a group commit's are put in place together, `storage.batched_calls`)."""
    if not exchange(tmp, record):
        os.replace(tmp, record)

