"""Recovery of a partition directory at open, and the check against the Spark state.

Two situations (docs/design.md: segment storage, Kafka's `LogLoader`, `LogSegment.recover`):
- **a commit record exists**: it is the truth. Segments not listed in it (rolled after it, or already
  removed from it by retention) are deleted; every file of a listed segment is truncated back to its
  committed size. The bytes left are exactly those the commit record describes, so a replayed
  micro-batch writes the same bytes again. A file *shorter* than committed means durable data was lost:
  `StorageCorruptionError` (the gateway cannot invent the bytes).
- **no commit record** (a directory written by Kafka, or the record was lost): Kafka's `LogLoader` after an
  unclean shutdown without a recovery point: orphan index files are deleted, each segment's indexes are
  sanity-checked and rebuilt when missing or corrupt, the active (last) segment is always recovered —
  scanned batch by batch (size, CRC, offsets in range and in order) and truncated at the first invalid
  batch with its indexes rebuilt; if a non-active segment had to be truncated, every later segment is
  deleted. A commit record with micro-batch id -1 is then written.

`check_log_end_offset` compares the committed log end offset with the one the stage's state expects.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from storage import segment_recovery
from storage.commit_record import (
    SEGMENT_LIST_PREFIX,
    CommitHead,
    CommitRecord,
    SegmentState,
    clear_recovery_mark,
    marked_for_recovery,
    read_commit_head,
    segment_list_name,
    write_commit,
    write_head,
)
from storage.errors import KafkaStorageError
from storage.file_names import (
    LOG_FILE_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    TXN_INDEX_FILE_SUFFIX,
    delete_segment_files,
    is_segment_file,
    segment_bases,
    segment_file_name,
)
from storage.file_records import write_at
from storage.index import CorruptIndexError
from storage.log_config import SegmentConfig
from storage.segment import LogSegment

log = logging.getLogger("gateway.segments")


class StorageCorruptionError(KafkaStorageError):
    """Committed (fsynced) data is missing: the files are shorter than the commit record says."""


class LogStateMismatchError(RuntimeError):
    """The segment storage and the Spark state disagree on the log end offset and cannot be reconciled."""


@dataclass(frozen=True)
class RecoveryResult:
    head: CommitHead | None
    truncated_bytes: int = 0  # .log bytes cut or deleted (uncommitted tail and segments, invalid batches)
    deleted_segments: tuple[int, ...] = ()
    rebuilt_segments: tuple[int, ...] = ()
    deleted_files: tuple[str, ...] = ()
    actions: tuple[str, ...] = field(default=())


def _delete_orphan_indexes(directory: Path, names: list[str] | None = None) -> list[str]:
    """Index files with no `.log` beside them (Kafka: "Found an orphaned index file ...", deleted). `names`:
    the directory's listing, when the caller has it."""
    names = sorted(os.listdir(directory)) if names is None else names
    present = set(names)
    removed = []
    index_suffixes = frozenset((*SEGMENT_FILE_SUFFIXES[1:], TXN_INDEX_FILE_SUFFIX))
    for name in names:
        if (name[20:] in index_suffixes and is_segment_file(name, name[20:])
                and name[:20] + LOG_FILE_SUFFIX not in present):
            path = directory / name
            log.warning("Found an orphaned index file %s, with no corresponding log file.", path)
            path.unlink()
            removed.append(name)
    return removed


# Inactive segments found as committed by this process: (directory, the segment's committed state). A
# micro-batch can only touch the last committed segment and segments above it (a failed one may have
# appended to the one and rolled into the others), so an inactive segment checked once is not checked at
# every open again: with hundreds of retained segments (segment.ms of an hour, a month's retention) that
# check cost ~0.2 s per micro-batch and partition. Readers and `segments verify` still check every file.
_VERIFIED_INACTIVE: set[tuple[str, SegmentState]] = set()
_VERIFIED_LIMIT = 100_000
# Partition directories this process has loaded (listed and checked whole, like Kafka's `LogLoader` at start-up):
# later opens check only the active segment's files unless the recovery marker says a roll, a retention pass or
# a repair was under way.
_LOADED: set[str] = set()


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def recover_partition(directory: Path, config: SegmentConfig, head: CommitHead | None) -> RecoveryResult:
    """Bring a partition directory back to a consistent state before appending (module docstring). With a
    commit record and no recovery marker (`commit_record.RECOVERY_MARKER`) every file but the active segment's
    is as the record describes, so only those are checked: opening costs the same however many segments the
    partition retains. With the marker, or a record of the earlier format, the directory is listed and
    every segment checked."""
    directory = Path(directory)
    if head is None:
        return _recover_without_commit(directory, config)
    folder = str(directory)
    if (folder not in _LOADED or marked_for_recovery(directory)
            or (head.segment_list == 0 and head.inactive_count > 0)):
        result = _restore_to_commit(directory, config, head.record(directory))
        clear_recovery_mark(directory)
        if len(_LOADED) >= _VERIFIED_LIMIT:
            _LOADED.clear()
        _LOADED.add(folder)
        return result
    if head.active is None:
        return RecoveryResult(head)
    state, cut, rebuilt, action = _restore_segment(directory, config, head.active, head.batch_id)
    if rebuilt:
        head = replace(head, active=state)
        write_head(directory, head)
    if action:
        log.warning("%s: repaired to the commit of micro-batch %d: %s", directory.name, head.batch_id, action)
    return RecoveryResult(head, cut, (), (head.active.base_offset,) if rebuilt else (), (),
                          (action,) if action else ())


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return -1


def _restore_to_commit(directory: Path, config: SegmentConfig, commit: CommitRecord) -> RecoveryResult:
    committed = {s.base_offset: s for s in commit.segments}
    actions: list[str] = []
    deleted = []
    truncated = 0
    names = sorted(os.listdir(directory))
    for base in sorted(int(n[:20]) for n in names if is_segment_file(n, LOG_FILE_SUFFIX)):
        if base not in committed:
            truncated += max(_file_size(directory / segment_file_name(base)), 0)
            delete_segment_files(directory, base)
            deleted.append(base)
            actions.append(f"deleted uncommitted segment {segment_file_name(base)}")
    current_list = segment_list_name(commit.segment_list)
    for name in names:  # segment lists no durable record names (a crash during a roll or retention)
        if name.startswith(SEGMENT_LIST_PREFIX) and name != current_list:
            os.unlink(directory / name)
    if deleted:
        names = sorted(os.listdir(directory))
    orphans = _delete_orphan_indexes(directory, names)
    rebuilt = []
    new_states = []
    last = commit.segments[-1] if commit.segments else None
    for state in commit.segments:
        if state is not last and (str(directory), state) in _VERIFIED_INACTIVE:
            new_states.append(state)
            continue
        state, cut, was_rebuilt, action = _restore_segment(directory, config, state, commit.batch_id)
        truncated += cut
        if was_rebuilt:
            rebuilt.append(state.base_offset)
        if action:
            actions.append(action)
        elif state is not last:
            if len(_VERIFIED_INACTIVE) >= _VERIFIED_LIMIT:
                _VERIFIED_INACTIVE.clear()
            _VERIFIED_INACTIVE.add((str(directory), state))
        new_states.append(state)
    head = commit.head()
    if rebuilt:
        write_commit(directory, replace(commit, segments=tuple(new_states)))
        head = read_commit_head(directory)
    if truncated or deleted:
        log.warning("%s: repaired to the commit of micro-batch %d: %s", directory.name, commit.batch_id, "; ".join(actions))
    return RecoveryResult(head, truncated, tuple(deleted), tuple(rebuilt), tuple(orphans), tuple(actions))


def _restore_segment(
    directory: Path, config: SegmentConfig, state: SegmentState, batch_id: int
) -> tuple[SegmentState, int, bool, str | None]:
    """One committed segment's files back to their committed sizes: (its state, `.log` bytes cut, whether its
    indexes were rebuilt, what was done or None)."""
    folder = str(directory)
    log_path = directory / segment_file_name(state.base_offset, LOG_FILE_SUFFIX)
    log_size = _size(os.path.join(folder, segment_file_name(state.base_offset, LOG_FILE_SUFFIX)))
    if log_size < state.log_size:
        raise StorageCorruptionError(
            f"{directory.name}: {log_path.name} has {max(log_size, 0)} bytes but the commit record of micro-batch "
            f"{batch_id} says {state.log_size} were fsynced. Committed data is lost (disk fault or the "
            "file was edited). Restore the partition directory from a backup, or remove it and reset the "
            "Spark checkpoint to rebuild the partition from the ingress topic."
        )
    index_sizes = [_size(os.path.join(folder, segment_file_name(state.base_offset, suffix)))
                   for suffix in SEGMENT_FILE_SUFFIXES[1:]]
    committed_index_sizes = [state.index_size, state.time_index_size, state.append_time_index_size]
    # the entries the record carries as tails are not in the files yet (`SegmentState.tails`)
    in_files = [c - len(t) for c, t in zip(committed_index_sizes, state.tails, strict=True)]
    needs_rebuild = any(c < 0 or s < c for s, c in zip(index_sizes, in_files, strict=True))
    longer = log_size > state.log_size or any(s > c for s, c in zip(index_sizes, committed_index_sizes, strict=True))
    if not (needs_rebuild or longer):
        return state, 0, False, None
    if needs_rebuild:  # the rebuild keeps the `.appendtimeindex` it finds: the record's tail belongs in it
        _put_tails_in_files(directory, state, index_sizes)
    segment = LogSegment(directory, state.base_offset, config, created_ms=state.created_ms, full_capacity=False)
    try:
        if needs_rebuild:
            os.truncate(log_path, state.log_size)
            segment = _reopen(segment, directory, state.base_offset, config, state.created_ms)
            segment_recovery.recover(segment)
            sizes = segment.sizes()
            state = replace(state, index_size=sizes[1], time_index_size=sizes[2], append_time_index_size=sizes[3],
                            index_tail=b"", time_index_tail=b"", append_time_index_tail=b"")
            return state, 0, True, f"rebuilt the indexes of {log_path.name} (an index file was missing or short)"
        cut = segment_recovery.truncate_files_to(segment, *state.sizes)
        return state, cut, False, f"truncated {log_path.name} and its indexes to the commit ({cut} log bytes)"
    finally:
        segment.close(finalize=False)


def _put_tails_in_files(directory: Path, state: SegmentState, sizes: list[int]) -> None:
    """The index entries the record carries (`SegmentState.tails`) written into their files, where a file holds
    the bytes before them (`sizes`: the files' lengths now)."""
    for suffix, committed, tail, size in zip(SEGMENT_FILE_SUFFIXES[1:], state.sizes[1:], state.tails, sizes,
                                             strict=True):
        if tail and size >= committed - len(tail):
            fd = os.open(directory / segment_file_name(state.base_offset, suffix), os.O_WRONLY)
            try:
                write_at(fd, [tail], committed - len(tail))
            finally:
                os.close(fd)


def _reopen(segment: LogSegment, directory: Path, base: int, config: SegmentConfig, created_ms: int) -> LogSegment:
    segment.close(finalize=False)
    return LogSegment(directory, base, config, created_ms=created_ms, full_capacity=False)


def _created_ms(segment: LogSegment) -> int:
    """Creation time of a segment found without a commit record: its first append time when the
    append-time index has one, else the `.log` file's mtime (Kafka resets it to the load time)."""
    if segment.append_time_index.entries and segment.append_time_index.entry(0).append_time >= 0:
        return segment.append_time_index.entry(0).append_time
    return int(segment.log_path.stat().st_mtime * 1000)


def _recover_without_commit(directory: Path, config: SegmentConfig) -> RecoveryResult:
    actions: list[str] = []
    orphans = _delete_orphan_indexes(directory) if directory.exists() else []
    bases = segment_bases(directory)
    if not bases:
        return RecoveryResult(None, deleted_files=tuple(orphans))
    truncated = 0
    rebuilt: list[int] = []
    deleted: list[int] = []
    states: list[SegmentState] = []
    log_end_offset = 0
    for i, base in enumerate(bases):
        is_last = i == len(bases) - 1
        segment = LogSegment(directory, base, config, full_capacity=False)
        cut = 0
        try:
            need_recovery = is_last
            reason = "unclean shutdown: the active segment is always recovered"
            try:
                segment.sanity_check()
            except CorruptIndexError as e:
                need_recovery = True
                reason = str(e)
                log.warning(
                    "Found a corrupted index file corresponding to log file %s due to %s, recovering segment and "
                    "rebuilding index files...", segment.log_path, e,
                )
            if need_recovery:
                cut = segment_recovery.recover(segment)
                truncated += cut
                rebuilt.append(base)
                actions.append(f"recovered {segment.log_path.name} ({reason}); {cut} invalid bytes truncated")
            segment.created_ms = _created_ms(segment)
            log_end_offset = segment.read_next_offset()
            log_size, index_size, time_size, append_size = segment.sizes()
            states.append(SegmentState(base, log_size, index_size, time_size, append_size, segment.created_ms))
        finally:
            segment.close(finalize=False)
        if cut > 0 and not is_last:
            for later in bases[i + 1 :]:
                delete_segment_files(directory, later)
                deleted.append(later)
            actions.append(f"Corruption found in segment {base}, truncating to offset {log_end_offset}")
            break
    new_commit = CommitRecord(
        batch_id=-1, log_end_offset=log_end_offset,
        log_start_offset=states[0].base_offset if states else 0, segments=tuple(states),
    )
    write_commit(directory, new_commit)
    log.warning("%s: recovered without a commit record: %s", directory.name, "; ".join(actions) or "no change")
    return RecoveryResult(read_commit_head(directory), truncated, tuple(deleted), tuple(rebuilt), tuple(orphans), tuple(actions))


def check_log_end_offset(
    directory: Path, commit: CommitHead | None, expected_log_end_offset: int, batch_id: int
) -> None:
    """Raise `LogStateMismatchError` unless the committed log end offset equals the one the Spark state
    expects for micro-batch `batch_id` (the base offset of its first accepted batch)."""
    committed = commit.log_end_offset if commit else 0
    if committed == expected_log_end_offset:
        return
    name = Path(directory).name
    last = f"micro-batch {commit.batch_id}" if commit else "no micro-batch"
    if committed > expected_log_end_offset:
        raise LogStateMismatchError(
            f"{name}: segment storage is ahead of the Spark state. Storage holds offsets up to "
            f"{committed - 1} (commit record of {last}) but micro-batch {batch_id} starts at offset "
            f"{expected_log_end_offset}: offsets [{expected_log_end_offset}, {committed}) were written by "
            "micro-batches this checkpoint does not remember, so appending would reuse them. The checkpoint is "
            "older than the storage (restored from a backup, or another checkpoint directory wrote this root). "
            "Restart with the checkpoint that wrote this storage; or, to discard the newer data, run "
            f"`python -m sinks segments truncate <root> {name.rsplit('-', 1)[0]} {name.rsplit('-', 1)[1]} "
            f"--to {expected_log_end_offset}` (its responses were already published) and restart."
        )
    raise LogStateMismatchError(
        f"{name}: segment storage is behind the Spark state. Storage ends at offset {committed} "
        f"(commit record of {last}) but micro-batch {batch_id} starts at offset {expected_log_end_offset}: offsets "
        f"[{committed}, {expected_log_end_offset}) were acknowledged but are not in storage (the storage root "
        "was replaced or emptied, or restored from an older backup). Restore the storage that belongs to this "
        "checkpoint; the data cannot be recreated from here. To start over, use a fresh checkpoint and an empty "
        "storage root."
    )



