"""A target partition's log in Kafka's format, made idempotent per micro-batch (docs/design.md: segment storage; docs/design.md: the query).

`PartitionLog` is the one writer's view of `<root>/<topic>-<partition>/` under its lock
(`partition_lock`): committed segments by state (`commit_record`), the active segment open for
appending. Opening it recovers the directory to its commit record (`recovery`, Kafka's `LogLoader`).
A commit makes the `.log` and `.appendtimeindex` durable and then replaces the commit record; like
Kafka, which rebuilds indexes from the log rather than syncing them (Kafka's `LogLoader`, `LogSegment.recover`), it does not fsync
the active segment's `.index`/`.timeindex` — when the active segment is next opened, index bytes that
differ from the recorded CRCs (pages lost with the page cache) are rebuilt from the log.

A micro-batch commit leaves the active segment active, as an uninterrupted Kafka broker does: its
time index gets the final `(maxTimestampSoFar, offset)` entry only when the segment rolls or the log
is closed (`close_logs` at a clean stop: Kafka's `LogManager.shutdown`); until then the commit record
keeps the segment's max timestamp, as Kafka keeps it in memory (`LogSegment.append`; `LogSegment.shouldRoll`).

Exactly-once (docs/design.md: the query): a replayed micro-batch (id <= committed id) writes nothing; anything on disk
beyond the commit record (a torn tail, index entries, whole segments rolled after it) is truncated or
deleted before appending, so the replay writes the same bytes again. The only clock is the batches'
append time (the micro-batch clock), never the host's.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from storage import segment_recovery
from storage.batched_calls import Resumed, ResumeProbe
from storage.commit_record import (
    RECOVERY_MARKER,
    CommitHead,
    SegmentState,
    TmpRecord,
    clear_recovery_mark,
    commit_paths,
    fsync_dir,
    fsync_path,
    mark_for_recovery,
    read_commit_head,
    remove_segment_list,
    sync_record,
    write_head,
    write_segment_list,
)
from storage.crash_point import crash_point
from storage.file_names import delete_segment_files, partition_dir, segment_paths
from storage.file_records import Write, split_batches
from storage.log_config import SegmentConfig, roll_jitter_ms
from storage.partition_lock import PartitionBusyError, PartitionLock
from storage.recovery import recover_partition
from storage.segment import LogSegment, RollParams
from storage.transaction_index import AbortedTxn, TransactionIndex, close_all
from validators.codec.record_batch import parse_header
from validators.topic_config import TopicConfig

log = logging.getLogger("gateway.segments")


@dataclass(frozen=True, slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    size: int
    rolled: str | None  # the roll reason when this append started a new segment


@dataclass
class PartitionLog:
    """The open, locked log of one partition: committed inactive segments (by state only) and the
    active segment (open for appending). Use `PartitionLog.open(...)` as a context manager."""

    root: Path
    topic: str
    partition: int
    config: SegmentConfig
    directory: Path
    commit_record: CommitHead | None  # as `gateway-commit.json` holds it: the inactive segments read on demand
    active: LogSegment | None
    log_end_offset: int
    log_start_offset: int
    recovered_bytes: int = 0
    now_ms: int | None = None
    rebuilt_indexes: bool = False  # the active segment's indexes were rebuilt when it was opened
    _lock: PartitionLock | None = field(default=None, repr=False)
    # the committed active segment, opened only when something is appended (a replay touches nothing)
    _active_state: SegmentState | None = field(default=None, repr=False)
    _new_files: bool = field(default=False, repr=False)
    # the inactive segments, read from the record's segment list only when a roll or a repair needs them
    _inactive: list[SegmentState] | None = field(default=None, repr=False)
    _inactive_changed: bool = field(default=False, repr=False)
    _marked: bool = field(default=False, repr=False)  # this log put the recovery marker down
    _obsolete_list: int = field(default=0, repr=False)  # a segment list to remove once the commit is durable
    first_unstable_offset: int | None = None  # the stage's, recorded at the next commit (`CommitHead`)
    _txn_indexes: list[TransactionIndex] = field(default_factory=list, repr=False)  # written since the commit
    _rolled_unsynced: list[Path] = field(default_factory=list, repr=False)  # rolled segments' files, to sync at commit
    _record_json: bytes | None = field(default=None, repr=False)  # `commit_record` as this log wrote it
    _staged_json: bytes = field(default=b"", repr=False)  # the record `stage_commit` wrote to the tmp file
    _suspended_record: bytes | None = field(default=None, repr=False)  # the commit record as `suspend` left it
    device: int = field(default=-1, repr=False)  # the directory's filesystem (`st_dev`), for `group_commit`
    # A new partition's first (empty) record, not yet durable: made so before the first bytes reach a `.log`
    # or the first commit (`open`), by one sync for many partitions in a group commit
    record_unsynced: bool = field(default=False, repr=False)

    @property
    def inactive(self) -> list[SegmentState]:
        if self._inactive is None:
            assert self.commit_record is not None
            self._inactive = list(self.commit_record.inactive_segments(self.directory))
        return self._inactive

    @inactive.setter
    def inactive(self, segments: list[SegmentState]) -> None:
        self._inactive, self._inactive_changed = segments, True

    def _mark(self) -> None:
        """The recovery marker down before this log makes or removes a file its record does not describe
        (durable with a new partition's first record, `record_unsynced`)."""
        if not self._marked:
            mark_for_recovery(self.directory, sync=not self.record_unsynced)
            self._marked = True

    def make_record_durable(self) -> None:
        """A new partition's first record (and recovery marker) made durable, before any appended byte can reach
        a `.log`: a directory whose record is lost is adopted as Kafka's, its valid batches as committed
        (`recovery`), so uncommitted bytes must never be on disk without it."""
        if self.record_unsynced:
            sync_record(self.directory)
            self.record_made_durable()

    def record_made_durable(self) -> None:
        """The first record is durable (`make_record_durable`, or a sync of the whole filesystem in
        `group_commit`): nothing more to do before the first bytes are written."""
        self.record_unsynced = False
        if self.active is not None:
            self.active.before_first_write = None

    def _open_active(self) -> LogSegment | None:
        if self.active is None and self._active_state is not None:
            last = self._active_state
            segment = LogSegment(
                self.directory, last.base_offset, self.config, created_ms=last.created_ms,
                roll_jitter_ms=roll_jitter_ms(self.topic, self.partition, last.base_offset, self.config),
                committed=last,
            )
            try:
                if not segment.indexes_match(last.index_crc, last.time_index_crc):
                    self._rebuild_active_indexes(segment)
                else:
                    segment.restore_max_timestamp(last.max_timestamp, last.max_timestamp_offset)
            except BaseException:
                segment.close(finalize=False)
                raise
            self.active = segment
            self._active_state = None
        return self.active

    def _rebuild_active_indexes(self, segment: LogSegment) -> None:
        """The active segment's `.index`/`.timeindex` are not what the last commit wrote: they are not
        fsynced at commit, so a machine crash can leave them short, zero-filled or stale. Rebuild them
        from the (fsynced) log as Kafka's recovery does (Kafka's `LogLoader`, `LogSegment.recover`), make them durable and record
        them, before anything is appended after them."""
        log.warning(
            "%s-%d: the indexes of %s differ from the commit record of micro-batch %d (index pages lost in a "
            "crash); rebuilding them from the log", self.topic, self.partition, segment.log_path.name,
            self.committed_batch_id,
        )
        segment_recovery.rebuild_indexes(segment)
        segment.flush()
        self.rebuilt_indexes = True
        assert self.commit_record is not None
        commit = replace(self.commit_record, active=_state_of(segment))
        self._record_json = write_head(self.directory, commit)
        self.commit_record = commit

    @staticmethod
    def open(
        root: Path,
        topic: str,
        partition: int,
        config: TopicConfig | SegmentConfig | None = None,
        *,
        now_ms: int | None = None,
        blocking: bool = True,
    ) -> PartitionLog:
        """Lock the partition and recover it to its commit record (Kafka's `LogLoader`, `LogSegment.recover`; `recovery.py`).
        `now_ms` is the creation time of a first segment; by default the first batch's append time.
        With `blocking=False` a partition locked by someone else raises `PartitionBusyError`."""
        seg_config = segment_config_of(config)
        directory = partition_dir(root, topic, partition)
        directory.mkdir(parents=True, exist_ok=True)
        lock = PartitionLock(directory)
        if not lock.acquire(blocking=blocking):
            raise PartitionBusyError(f"{directory.name}: locked by an append or a retention pass")
        try:
            result = recover_partition(directory, seg_config, read_commit_head(directory))
            commit = result.head
            new = commit is None
            if commit is None:
                # A new partition: an empty commit record first, so that anything written before the
                # first commit is known to be uncommitted (a directory without one is foreign: recovered).
                # Durable only before the first appended bytes are written (`make_record_durable`): a group
                # commit makes a thousand new partitions' records durable with one sync, not two fsyncs each.
                commit = CommitHead(batch_id=-1, log_end_offset=0, inactive=())
                write_head(directory, commit, sync=False)
            return PartitionLog(
                root=Path(root), topic=topic, partition=partition, config=seg_config, directory=directory,
                commit_record=commit, active=None,
                log_end_offset=commit.log_end_offset, log_start_offset=commit.log_start_offset,
                recovered_bytes=result.truncated_bytes, now_ms=now_ms, _lock=lock, _active_state=commit.active,
                _inactive=None if commit.inactive is None else list(commit.inactive),
                first_unstable_offset=commit.first_unstable_offset, record_unsynced=new,
                device=os.stat(directory).st_dev,
            )
        except BaseException:
            lock.release()
            raise

    @property
    def committed_batch_id(self) -> int:
        return self.commit_record.batch_id if self.commit_record else -1

    def append(self, records: bytes, append_time_ms: int) -> AppendInfo:
        """Append one produce's batch(es), offsets already assigned and continuing the log end offset;
        rolls first when the active segment says so."""
        header = parse_header(records)
        if header.base_offset != self.log_end_offset:
            raise ValueError(
                f"{self.topic}-{self.partition}: batch at offset {header.base_offset} does not continue the log "
                f"end offset {self.log_end_offset}"
            )
        if len(records) == header.size_in_bytes:  # one batch: the common case
            batches = [(0, header)]
            last_offset, max_timestamp = header.last_offset, header.max_timestamp
        else:  # several batches in one append
            batches = split_batches(records)
            last_offset = max(h.last_offset for _p, h in batches)
            max_timestamp = max(h.max_timestamp for _p, h in batches)
        rolled = None
        if self._open_active() is None:
            created = self.now_ms if self.now_ms is not None else append_time_ms
            self.active = self._new_segment(header.base_offset, created)
        else:
            self.active.ensure_full_capacity()
            params = RollParams(
                max_segment_ms=self.config.max_segment_ms, max_segment_bytes=self.config.segment_bytes,
                max_timestamp_in_messages=max_timestamp, max_offset_in_messages=last_offset,
                messages_size=len(records), now=append_time_ms,
            )
            rolled = self.active.should_roll(params)
            if rolled and not self._roll(max(header.base_offset, self.log_end_offset), append_time_ms, rolled):
                rolled = None
        if len(records) > self.config.segment_bytes:
            log.warning("%s-%d: batch of %d bytes at offset %d is larger than segment.bytes=%d",
                        self.topic, self.partition, len(records), header.base_offset, self.config.segment_bytes)
        self.active.append(records, append_time_ms, batches)
        self.log_end_offset = last_offset + 1
        crash_point("batch-written")
        return AppendInfo(header.base_offset, last_offset, len(records), rolled)

    def append_run(self, items: Sequence[Sequence], start: int) -> tuple[int, int]:
        """Append `items[start:]` (`append_batches`' items) while each is one v2 batch that rolls nothing,
        in one call to the active segment (`LogSegment.append_run`). Returns the index of the first item not
        appended and the bytes appended; `(start, 0)` when there is no active segment yet."""
        segment = self._open_active()
        if segment is None:
            return start, 0
        size_before = segment.size
        end = segment.append_run(items, start, self.log_end_offset, self.config.segment_bytes,
                                 self.config.max_segment_ms)
        if end > start:
            self.log_end_offset = int(items[end - 1][1]) + 1
        return end, segment.size - size_before

    def _new_segment(self, base_offset: int, created_ms: int) -> LogSegment:
        # A leftover file at this base (never committed) is stale: recovery deleted uncommitted segments.
        self._mark()
        self._new_files = True
        segment = LogSegment(
            self.directory, base_offset, self.config, created_ms=created_ms,
            roll_jitter_ms=roll_jitter_ms(self.topic, self.partition, base_offset, self.config),
        )
        if self.record_unsynced:
            segment.before_first_write = self.make_record_durable
        return segment

    def _roll(self, new_base: int, now_ms: int, reason: str) -> bool:
        """`UnifiedLog.roll`: the old segment becomes inactive (final time-index entry, trimmed indexes), a new
        one starts at `new_base`. The old segment is flushed with the commit, not here (Kafka flushes it on a
        scheduler thread, `UnifiedLog.roll` -> `flushUptoOffsetExclusive`): before the record that lists it,
        by a partition's own commit or by a group commit's sync of the filesystem, so a roll of many partitions
        at once (time-based rolls of partitions made together) costs no fsync of its own."""
        old = self.active
        assert old is not None
        if old.size == 0:  # never roll an empty segment (Kafka's batch-too-large check prevents it)
            return False
        old.on_become_inactive()
        self.inactive.append(_state_of(old))
        self._inactive_changed = True
        old.close()
        self._rolled_unsynced.extend(segment_paths(self.directory, old.base_offset))
        log.info("%s-%d: rolled segment %d -> %d (%s)", self.topic, self.partition, old.base_offset, new_base, reason)
        self.active = self._new_segment(new_base, now_ms)
        crash_point("rolled")
        return True

    def segments(self) -> list[SegmentState]:
        states = list(self.inactive)
        if self.active is not None:
            states.append(_state_of(self.active))
        elif self._active_state is not None:
            states.append(self._active_state)
        return states

    def commit(self, batch_id: int) -> CommitHead:
        """Make everything appended durable, then record it (atomic). The active segment stays active: its
        index files hold their valid entries (`LogSegment.cut_index_files`), so Kafka's tools read the committed
        files as they are, but it gets no final time-index entry — Kafka writes that only when a segment rolls or
        the log is closed (Kafka's `OffsetIndex`, `TimeIndex`; `LogSegment.shouldRoll`; `close_cleanly`)."""
        self.make_record_durable()
        if self.active is not None:
            self.active.cut_index_files()
            self.active.write_pending(writeback=False)
            crash_point("data-written")
            self.active.flush(indexes=False)  # the indexes are rebuilt from the log if lost (module docstring)
        close_all(self._txn_indexes, sync=True)
        self._sync_rolled()
        if self._new_files:  # segment files created since the last commit: make their names durable
            fsync_dir(self.directory)
            self._new_files = False
        crash_point("data-fsynced")
        commit = self._next_commit(batch_id, sync=True)
        record = write_head(self.directory, commit)
        crash_point("committed")
        self._committed(commit, record)
        self.commit_durable()
        return commit

    def _sync_rolled(self) -> None:
        """The segments rolled since the last commit made durable (closed, so each file is opened to be synced)."""
        for path in self._rolled_unsynced:
            with contextlib.suppress(FileNotFoundError):  # an index never written
                fsync_path(path, data_only=True)
        self._rolled_unsynced.clear()

    def _next_commit(self, batch_id: int, sync: bool) -> CommitHead:
        """The next record; a new generation of the segment list first when the inactive segments changed (a
        roll, a repair) or the record is of the earlier format, which listed them itself."""
        head = self.commit_record
        assert head is not None
        generation, count = head.segment_list, head.inactive_count
        if self._inactive_changed or (generation == 0 and count > 0):
            inactive = self.inactive
            generation, count = (head.segment_list + 1 if inactive else 0), len(inactive)
            if inactive:
                self._mark()
                write_segment_list(self.directory, generation, inactive, sync=sync)
        active = _state_of(self.active) if self.active is not None else self._active_state
        return CommitHead(batch_id, self.log_end_offset, self.log_start_offset, active, generation, count,
                          None if self._inactive is None else tuple(self._inactive), self.first_unstable_offset)

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """An aborted transaction's entry in the `.txnindex` of the segment its marker was appended to (Kafka's
        `LogSegment.updateTxnIndex`), after `append` of the marker. An entry left at or past it by an attempt
        that did not commit is dropped first, so a replayed micro-batch writes the same index."""
        segment = self._open_active()
        assert segment is not None and segment.base_offset <= txn.last_offset < self.log_end_offset
        index = TransactionIndex.of_segment(self.directory, segment.base_offset)
        self._new_files = self._new_files or not index.path.exists()
        index.truncate_to(txn.last_offset)
        index.append(txn)
        self._txn_indexes.append(index)

    def _committed(self, commit: CommitHead, record: bytes) -> None:
        old = self.commit_record
        if old is not None and old.segment_list and old.segment_list != commit.segment_list:
            self._obsolete_list = old.segment_list
        self.commit_record, self._record_json = commit, record
        self._inactive_changed = False

    def commit_durable(self) -> None:
        """After the commit is durable: the old segment list removed and the recovery marker lifted (the record
        describes every file again). Neither needs to be durable: a leftover only costs a recovery's listing."""
        if self._obsolete_list:
            remove_segment_list(self.directory, self._obsolete_list)
            self._obsolete_list = 0
        if self._marked:
            clear_recovery_mark(self.directory)
            self._marked = False

    def stage_commit(self, batch_id: int, writes: list[Write], records: list[TmpRecord]) -> CommitHead:
        """A group commit's first half (`group_commit`): everything appended, and then the new commit record to
        its tmp file, added to `writes` and `records` for the group commit to write (`batched_calls.write_all`),
        nothing synced."""
        if self.active is not None:
            self.active.write_pending(writeback=False, into=writes)
            self.active.cut_index_files()  # after: a cut of a longer file goes first, the entries' writes are below it
        close_all(self._txn_indexes, sync=False)
        crash_point("data-written")
        commit = self._next_commit(batch_id, sync=False)
        self._staged_json = commit.to_json().encode()
        records.append((self.commit_paths[0], self._staged_json))
        return commit

    def complete_commit(self, commit: CommitHead) -> None:
        """A group commit's second half, once a sync of the filesystem made the data and the tmp record
        durable and the group commit put the record in place (`batched_calls.exchange_all`; durable at the group's
        next sync, then `commit_durable`)."""
        if self.active is not None:
            self.active.synced_by_filesystem()
        self._new_files = False
        self._rolled_unsynced.clear()
        self._committed(commit, self._staged_json)

    def truncate_to(self, offset: int, batch_id: int | None = None) -> CommitHead:
        """Operator repair (Kafka's `UnifiedLog.truncateTo`): drop every batch at or after `offset` (whole
        batches: a batch holding `offset` is dropped with everything after it), delete the segments above it,
        and commit. `batch_id` defaults to the committed one."""
        if offset < self.log_start_offset:
            raise ValueError(f"cannot truncate below the log start offset {self.log_start_offset}")
        if offset >= self.log_end_offset:
            return self.commit(self.committed_batch_id if batch_id is None else batch_id)
        self._open_active()
        keep = [s for s in self.inactive if s.base_offset < offset]
        dropped = [s.base_offset for s in self.inactive if s.base_offset >= offset]
        if self.active is not None and self.active.base_offset >= offset and keep:
            dropped.append(self.active.base_offset)
            self.active.close(finalize=False)
            self.active = None
        if dropped:
            self._mark()
        for base in dropped:
            delete_segment_files(self.directory, base)
        if self.active is None:
            last = keep.pop()
            self.active = LogSegment(
                self.directory, last.base_offset, self.config, created_ms=last.created_ms,
                roll_jitter_ms=roll_jitter_ms(self.topic, self.partition, last.base_offset, self.config),
                committed=last,
            )
        self.inactive = keep
        segment_recovery.truncate_to(self.active, offset)
        self.log_end_offset = self.active.read_next_offset()
        return self.commit(self.committed_batch_id if batch_id is None else batch_id)

    def close_cleanly(self) -> CommitHead | None:
        """Kafka's `UnifiedLog.close` at a clean shutdown: the active segment gets its final time-index
        entry and trimmed, fsynced indexes (`onBecomeInactiveSegment`, Kafka's `OffsetIndex`, `TimeIndex`), recorded under the
        committed micro-batch. Only for a log with nothing uncommitted (the query has stopped)."""
        if self.log_end_offset != (self.commit_record.log_end_offset if self.commit_record else 0):
            raise ValueError(f"{self.topic}-{self.partition}: uncommitted appends; commit before closing")
        if self._open_active() is None:
            return self.commit_record
        self.active.on_become_inactive()
        self.active.flush()
        return self.commit(self.committed_batch_id)

    def close(self) -> None:
        """Release the lock; the active segment is closed without committing (uncommitted appends stay on
        disk past the commit record and are truncated by the next open)."""
        try:
            close_all(self._txn_indexes, sync=False)
            self._rolled_unsynced.clear()
            if self.active is not None:
                if self.log_end_offset == (self.commit_record.log_end_offset if self.commit_record else 0):
                    self.active.trim_indexes()  # nothing uncommitted: the files as the commit left them
                self.active.close(finalize=False)
                self.active = None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def suspend(self) -> bool:
        """Kafka keeps a partition's log open between appends (`LogManager`'s current logs): a log whose appends
        are all committed releases its lock and keeps its active segment's files and its state, for `resume_with`.
        False, nothing done, when something is not committed or not cleaned up after a commit."""
        head = self.commit_record
        if (self._lock is None or self._suspended_record is not None or head is None
                or self.log_end_offset != head.log_end_offset or self._marked
                or self._txn_indexes or self._obsolete_list or self._inactive_changed):
            return False
        self._suspended_record = self._record_json if self._record_json is not None else head.to_json().encode()
        self._lock.release()  # the object kept for `resume_with`
        return True

    def resume_probe(self) -> ResumeProbe:
        """What `resume_with` looks at, gathered by `batched_calls.resume_all` (many kept logs in one call,
        `OpenLogs.resume_many`)."""
        assert self._lock is not None and self._suspended_record is not None, "a probe of a log not suspended"
        return (*self._probe_paths, -1 if self.active is None else self.active.log_fd)

    @cached_property
    def _probe_paths(self) -> tuple[str, str, str]:
        """The lock file, the commit record and the recovery marker: asked at every take-up."""
        assert self._lock is not None
        return str(self._lock.path), self.commit_paths[1], os.path.join(self.directory, RECOVERY_MARKER)

    @cached_property
    def commit_paths(self) -> tuple[str, str]:
        """The record's tmp file and the record (`commit_record.commit_paths`): asked at every group commit."""
        return commit_paths(self.directory)

    def resume_with(self, config: SegmentConfig, resumed: Resumed) -> bool:
        """The lock taken again and the log's state from `suspend` kept, when nothing changed the partition
        meanwhile: its commit record is still the one this log wrote (a retention pass, a repair, another
        writer's commit or a re-created topic write another), no recovery is pending, the active segment's
        `.log` has the committed length (no other writer's uncommitted tail), and the segment settings are the
        same. `resumed`: what `batched_calls.resume_all` did for this log's probe (the lock's descriptor, held from
        here on, the record, the marker, the `.log`'s length). False, the lock released again, also where a step
        failed (the directory gone with its topic, say): the caller closes this log (`discard`) and opens the
        partition afresh, with recovery, which meets any failure on its own."""
        lock_fd, error, record, marked, log_size = resumed
        assert self._lock is not None
        if lock_fd >= 0:
            self._lock.adopt(lock_fd)
        if lock_fd < 0 or error:
            self._lock.release()
            return False
        return self._resume_locked(config, None if record is None else record.rstrip(b" "), marked,
                                   None if self.active is None else log_size)

    def _resume_locked(self, config: SegmentConfig, record: bytes | None, marked: bool, log_size: int | None) -> bool:
        if (record != self._suspended_record or (config is not self.config and config != self.config) or marked
                or (self.active is not None and log_size != self.active.size)):
            assert self._lock is not None
            self._lock.release()
            return False
        self._suspended_record, self.recovered_bytes, self.rebuilt_indexes = None, 0, False
        return True

    def discard(self) -> None:
        """A suspended log's files closed as they are, nothing written or cut: what is on disk may be another
        writer's by now."""
        if self.active is not None:
            self.active.close_handlers()
            self.active = None
        self._lock = self._suspended_record = None

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _state_of(segment: LogSegment) -> SegmentState:
    log_size, index_size, time_size, append_size = segment.sizes()
    index_crc, time_index_crc = segment.index_checksums()
    max_ts = segment.max_timestamp_and_offset_so_far
    return SegmentState(segment.base_offset, log_size, index_size, time_size, append_size, segment.created_ms,
                        index_crc, time_index_crc, max_ts.timestamp, max_ts.offset,
                        segment.append_time_index.checksum(), *segment.tails)


_last_segment_config: tuple[TopicConfig, SegmentConfig] | None = None


def segment_config_of(config: TopicConfig | SegmentConfig | None) -> SegmentConfig:
    """A topic's segment settings; the last topic's kept, one object for the many partitions a task takes up in
    a row."""
    global _last_segment_config
    if config is None:
        return SegmentConfig()
    if isinstance(config, SegmentConfig):
        return config
    last = _last_segment_config
    if last is not None and last[0] is config:
        return last[1]
    segment_config = SegmentConfig.from_topic(config)
    _last_segment_config = (config, segment_config)
    return segment_config
