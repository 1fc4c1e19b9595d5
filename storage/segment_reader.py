"""Opening a committed segment for reading, checked against its commit record.

A reader takes no lock and never writes, so it cannot repair files; it must neither crash on them nor
return wrong answers from them. What it finds, file by file (`SegmentState` holds the committed sizes
and checksums; a directory without a commit record gets the sanity checks only):

- `.log` shorter than committed: `KafkaStorageError` naming the file — records are gone, nothing can
  stand in for them. Bytes beyond the committed size (an append in progress, a torn tail) are ignored.
  A batch that fails its CRC or cannot be parsed is reported when it is read (`CorruptRecordError`).
- `.index` / `.timeindex` short, not matching the committed checksum, or failing Kafka's sanity check:
  rebuilt from the log in memory, as Kafka's recovery rebuilds them (Kafka's `LogLoader`, `LogSegment.recover`), with a warning.
- `.appendtimeindex` short, not matching its checksum or insane: rebuilt in memory the way `recover`
  does (the batch's LogAppendTime, else -1 unknown), with a warning.
- `.index` / `.timeindex` without a committed checksum (no commit record, or one written before the
  checksums): rebuilt in memory from the log, silently — nothing vouches for their entries.

The problems found are kept (`CheckedSegment.problems`) for `segments verify` and `segments dump`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage import segment_recovery
from storage.commit_record import SegmentState
from storage.errors import KafkaStorageError
from storage.index import CorruptIndexError
from storage.log_config import SegmentConfig
from storage.segment import LogSegment

log = logging.getLogger("gateway.segments.reader")


@dataclass(frozen=True)
class CheckedSegment:
    segment: LogSegment
    problems: tuple[str, ...]  # each names the file and what is wrong with it


def open_for_reading(
    directory: Path, base_offset: int, state: SegmentState | None, append_times: bool = True,
) -> CheckedSegment:
    """Open segment `base_offset` read-only within its committed sizes (`state`; None: no commit record),
    with damaged indexes rebuilt in memory; `append_times=False` leaves the `.appendtimeindex` unread and
    unchecked (its entries must then not be used). A missing `.log` raises FileNotFoundError (retention may have
    deleted it since the commit record was read: readers treat that as data loss)."""
    segment = LogSegment(directory, base_offset, SegmentConfig(), writable=False, committed=state)
    try:
        problems = _check(segment, state, append_times)
    except BaseException:
        segment.close()
        raise
    return CheckedSegment(segment, problems)


def _file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return -1


def _check(segment: LogSegment, state: SegmentState | None, append_times: bool) -> tuple[str, ...]:
    if state is not None:
        committed = state.log_size
        actual = _file_size(segment.log_path)
        if actual < committed:
            raise KafkaStorageError(
                f"{segment.log_path}: {actual} bytes, shorter than the {committed} bytes the commit record lists "
                "(the file was truncated: committed records are missing)"
            )
    index_problems = []
    checksums = dict(zip(("index", "timeindex"), segment.index_checksums(), strict=True))
    for kind, index, size_field, crc_field, tail in (
        ("index", segment.offset_index, *_committed(state, "index")),
        ("timeindex", segment.time_index, *_committed(state, "time_index")),
    ):
        problem = _index_problem(index.path, size_field, crc_field, tail, checksums[kind], index.sanity_check)
        if problem:
            index_problems.append(problem)
    append_index = segment.append_time_index
    append_problem = None if not append_times else _index_problem(
        append_index.path, *_committed(state, "append_time_index"), append_index.checksum(),
        append_index.sanity_check,
    )
    problems = [*index_problems, *([append_problem] if append_problem else [])]
    for problem in problems:
        log.warning("%s; reading with an index rebuilt from the log in memory", problem)
    # Without a committed checksum nothing vouches for the index entries (a garbage position passes
    # Kafka's sanity check): the reader builds them from the log, which every read checks anyway.
    unchecked = state is None or state.index_crc is None or state.time_index_crc is None
    if problems or unchecked:
        segment_recovery.rebuild_indexes_in_memory(segment, append_times=append_problem is not None)
    return tuple(problems)


def _committed(state: SegmentState | None, kind: str) -> tuple[int | None, int | None, int]:
    """(committed size, committed CRC, bytes of them the record carries as its tail) of an index kind: `index`,
    `time_index` or `append_time_index`."""
    if state is None:
        return None, None, 0
    return getattr(state, f"{kind}_size"), getattr(state, f"{kind}_crc"), len(getattr(state, f"{kind}_tail"))


def _index_problem(
    path: Path, committed: int | None, expected_crc: int | None, tail: int, actual_crc: int,
    sanity_check: Callable[[bool], None],
) -> str | None:
    """What is wrong with one index file (committed size and checksum from the commit record, when known; `tail`
    of those bytes in the record, not in the file yet). Entries that match the committed checksum are the ones
    the writer made in order: only Kafka's own sanity check runs on them, not one over every entry (a reader
    opens the active segment at every Fetch)."""
    if committed is not None and committed - tail > 0:
        actual = _file_size(path)
        if actual < committed - tail:
            what = ("missing" if actual < 0 else
                    f"{actual} bytes, shorter than the {committed - tail} bytes committed to it")
            return f"{path}: {what}"
    if expected_crc is not None and committed is not None and committed >= 0 and expected_crc != actual_crc:
        return f"{path}: its {committed} committed bytes do not match the commit record's checksum"
    try:
        sanity_check(expected_crc is None or committed is None)
    except CorruptIndexError as e:
        return f"{path}: {e}"
    return None
