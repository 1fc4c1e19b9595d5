"""One micro-batch's appends to a partition, exactly once (docs/design.md: the query): `BatchAppender` opens the
partition's log (`PartitionLog`), appends the accepted batches as they are decided, and commits them under the
micro-batch id, or recognises a replay of a committed micro-batch and writes nothing (Kafka's `UnifiedLog.append`
driven by the stage's decisions)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage.log_config import SegmentConfig
from storage.open_logs import OpenLogs
from storage.partition_log import PartitionLog
from storage.recovery import check_log_end_offset
from storage.transaction_index import AbortedTxn
from validators.topic_config import TopicConfig


@dataclass(frozen=True)
class AppendOutcome:
    topic: str
    partition: int
    batch_id: int
    skipped_replay: bool
    batches: int
    bytes_written: int
    log_end_offset: int
    log_start_offset: int = 0
    segments_rolled: int = 0
    recovered_bytes: int = 0  # uncommitted bytes truncated before this append (a crash was repaired)


class BatchAppender:
    """One micro-batch's accepted batches of a partition appended in steps, exactly once: `add` as they
    are decided, in offset order, then `finish` (fsync and commit). Their bytes reach the page cache, and
    the disk (`writeback`), while the rest are still being decided, so the commit's fsync waits for the
    tail only. Items are `(base_offset, last_offset, bytes, append_time_ms)` (`append_time_ms` may be
    left out: -1, unknown). The log is opened (locked, recovered) by the first `add`. A replay of a
    committed micro-batch writes nothing; a torn write of an earlier attempt is truncated first. The
    first batch must continue the committed log end offset, else `recovery.LogStateMismatchError`
    explains the disagreement with the Spark state."""

    def __init__(self, root: Path, topic: str, partition: int, batch_id: int,
                 config: TopicConfig | SegmentConfig | None = None, logs: OpenLogs | None = None) -> None:
        """`logs`: where the log is taken from and given back to, kept open between micro-batches (`OpenLogs`);
        None: opened and closed here."""
        self.root, self.topic, self.partition, self.batch_id, self.config = root, topic, partition, batch_id, config
        self.logs = logs
        self._plog: PartitionLog | None = None
        self._replay = False
        self.count = self.written = self.rolled = 0

    def open(self) -> PartitionLog:
        if self._plog is None:
            self._plog = (PartitionLog.open(self.root, self.topic, self.partition, self.config) if self.logs is None
                          else self.logs.open(self.root, self.topic, self.partition, self.config))
            commit = self._plog.commit_record
            self._replay = commit is not None and self.batch_id <= commit.batch_id
        return self._plog

    @property
    def log_start_offset(self) -> int:
        return self.open().log_start_offset

    def add(self, items: Sequence[Sequence]) -> None:
        if not items:
            return
        plog = self.open()
        if self._replay:
            return
        if self.count == 0:
            check_log_end_offset(plog.directory, plog.commit_record, int(items[0][0]), self.batch_id)
        done = 0
        while done < len(items):
            # Runs of single v2 batches that roll nothing go through in one call; the item that stops a
            # run (a roll, several batches, a legacy format, a mismatch) goes through `append` alone.
            end, run_bytes = plog.append_run(items, done)
            if end > done:
                self.written += run_bytes
                done = end
                continue
            item = items[done]
            base_offset, last_offset, data = int(item[0]), int(item[1]), item[2]
            append_time = int(item[3]) if len(item) > 3 else -1
            info = plog.append(bytes(data), append_time)
            if info.last_offset != last_offset:
                raise ValueError(
                    f"{self.topic}-{self.partition}: batch at offset {base_offset} ends at {info.last_offset}, "
                    f"the stage said {last_offset}"
                )
            done += 1
            self.written += info.size
            self.rolled += info.rolled is not None
        self.count += done

    def add_aborted(self, txn: AbortedTxn) -> None:
        """After `add` of its marker: an aborted transaction's `.txnindex` entry (`PartitionLog.append_aborted_txn`)."""
        if not self._replay:
            self.open().append_aborted_txn(txn)

    def set_first_unstable_offset(self, offset: int | None) -> None:
        """The stage's first unstable offset after this micro-batch, recorded by the commit."""
        if not self._replay:
            self.open().first_unstable_offset = offset

    def finish(self) -> AppendOutcome | None:
        """Commit what was added (nothing on a replay) and release the log; None when nothing was added."""
        plog = self._plog
        if plog is None:
            return None
        try:
            if self.count and not self._replay:
                plog.commit(self.batch_id)
            return self.outcome()
        finally:
            self.close()

    @property
    def to_commit(self) -> bool:
        """Something was added and is to be committed (not a replay)."""
        return self._plog is not None and self.count > 0 and not self._replay

    def outcome(self) -> AppendOutcome | None:
        """What this appender did; None when the log was never opened."""
        plog = self._plog
        if plog is None:
            return None
        if self._replay:
            return AppendOutcome(self.topic, self.partition, self.batch_id, True, 0, 0, plog.log_end_offset,
                                 plog.log_start_offset, 0, plog.recovered_bytes)
        return AppendOutcome(self.topic, self.partition, self.batch_id, False, self.count, self.written,
                             plog.log_end_offset, plog.log_start_offset, self.rolled, plog.recovered_bytes)

    @property
    def log(self) -> PartitionLog:
        """The open log (after the first `add`)."""
        assert self._plog is not None
        return self._plog

    def close(self) -> None:
        """Release the log without committing (what `finish` did not commit is truncated by the next open)."""
        if self._plog is not None:
            plog, self._plog = self._plog, None
            if self.logs is None:
                plog.close()
            else:
                self.logs.release(plog)

    def __enter__(self) -> BatchAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def append_batches(
    root: Path,
    topic: str,
    partition: int,
    batch_id: int,
    batches: Iterable[Sequence],
    config: TopicConfig | SegmentConfig | None = None,
) -> AppendOutcome:
    """Append one micro-batch's accepted batches of a partition, in offset order, exactly once, and
    commit them (`BatchAppender` in one step)."""
    with BatchAppender(root, topic, partition, batch_id, config) as appender:
        appender.open()
        appender.add(batches if isinstance(batches, list) else list(batches))
        outcome = appender.finish()
        assert outcome is not None  # the log was opened
        return outcome
