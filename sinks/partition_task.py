"""The sink's work for one task's decisions of a micro-batch: append, commit, publish, count (docs/design.md).

The foreachBatch sink runs it in the tasks of the decisions' own partitions (`sinks.micro_batch`: the
stateful operator's output is already partitioned by target partition, so one Spark job per micro-batch
decides, appends and publishes). It appends each target partition's accepted batches in offset order
(`PartitionAppend`), then makes them durable and commits them exactly once per micro-batch id, the `batch_id`
foreachBatch gives (`batch_appender.BatchAppender`; from `GROUP_COMMIT_PARTITIONS` partitions one group commit,
`storage.group_commit`; from `EARLY_COMMIT_PARTITIONS` partitions whose rows are all in, a commit of them while the
task reads the rest, their responses and dead letters sent as soon as it is done), and only then sends the produce
responses and dead letters (a response never goes out before its batch is durable) and waits for their delivery.
The commits run on threads of their own while this one encodes the responses and folds the rows into metric deltas
(`batch_metrics`), work that needs the decisions but not their durability. What reaches the driver is one small
`TaskSummary` per task.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_all
from contextlib import suppress
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any

from contract.decision_row import DecisionRow
from kafka_cluster.publisher import DEFAULT_PUBLISH_TIMEOUT_MS, OutgoingMessage, Publication
from kafka_cluster.security import KafkaCluster
from sinks.batch_metrics import DecisionAggregates
from sinks.dlq.dead_letters import dead_letter
from sinks.responses import encode_row_response
from storage.batch_appender import AppendOutcome, BatchAppender
from storage.commit_record import read_commit_head
from storage.file_names import partition_dir
from storage.group_commit import group_commit, group_commit_available
from storage.open_logs import OpenLogs, default_max_logs
from storage.transaction_index import AbortedTxn
from validators.codec.record_batch import parse_header
from validators.topic_config import TopicRegistry

# From this many rows (or more than one partition) the commits run on the committer's threads while the responses
# and metric deltas are built: a thread costs more than it saves below (measured: 4 partitions x 100 rows even,
# x 25 rows 2 ms slower, x 500 rows 20 ms faster).
THREADED_COMMIT_ROWS = 100
# Commits in flight at once: past ~8 the disk of a 2-core machine gives no more (measured: 0.28 ms a commit
# with 8 threads, 0.27 with 32, 0.61 one by one); more only costs threads.
COMMIT_THREADS = 16
# From this many partitions to commit, one group commit (two syncs of the filesystem) costs less than their
# fsyncs on the committer's threads (`storage.group_commit`; measured in docs/performance.md).
GROUP_COMMIT_PARTITIONS = 8
# From this many partitions whose rows are all in, a task commits them (one group commit) while it reads the rows
# still to come: the commit's syncs and record writes overlap the stage deciding the rest. Measured, `run_task`
# over 100 and 250 partitions of one batch each, rows in 250-row chunks: 50 ms apart, the end's commit 38 -> 20 ms
# and 85 -> 54 ms; all at once (no stage between them), 10-14 ms more in all for the second commit's syncs.
EARLY_COMMIT_PARTITIONS = 64
# Partitions a task keeps open at once (each holds its lock and active segment: ~6 file descriptors); past
# this, the earlier ones are committed while the task goes on, a group commit more (docs/deployment.md, sizing).
# As many as the worker keeps open between micro-batches, so a task over every partition the worker keeps
# commits once.
MAX_OPEN_PARTITIONS = max(1, default_max_logs())
# The partition logs this Python worker keeps open from one micro-batch to the next (Spark reuses its workers, and
# a worker sees the same partitions again): a partition nothing else changed meanwhile is appended to without
# being opened and recovered again (`storage.open_logs`).
OPEN_LOGS = OpenLogs()


@dataclass(frozen=True)
class SinkConfig:
    cluster: KafkaCluster
    segments_root: Path
    ingress_topic: str
    response_topic: str
    dlq_topic: str
    max_message_bytes: int  # the producer's message.max.bytes: IngressLimits.dead_letter_message_bytes
    publish_timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS  # a response or dead letter not acknowledged by then fails the task


@dataclass(frozen=True)
class TaskSummary:
    """What the sink's work for one task reports to the driver (a JSON string: a few hundred bytes)."""

    appended_batches: int = 0
    appended_bytes: int = 0
    partitions: int = 0  # target partitions decided
    partitions_appended: int = 0
    replayed_partitions: int = 0
    logs_opened: int = 0  # partition logs opened afresh, with recovery
    logs_kept: int = 0  # partition logs taken up as this worker kept them open (`OPEN_LOGS`)
    segments_rolled: int = 0
    recovered_bytes: int = 0
    responses: int = 0
    dead_letters: int = 0
    append_seconds: float = 0.0
    publish_seconds: float = 0.0
    metric_rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        # shallow: `asdict` deep-copies every metric row, ~17 µs a partition
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> TaskSummary:
        return TaskSummary(**json.loads(text))


class PartitionAppend:
    """A target partition's accepted batches (not idempotent duplicates, which are acknowledged with their
    original offsets and not stored) appended as they arrive (`add`), in offset order, then one
    fsync and commit (`finish`), exactly once per micro-batch (`batch_appender.BatchAppender`); a batch that
    does not continue the log fails the task. No directory is made for a partition that only rejects, such
    as a hostile topic name's. `seconds` is the time spent in it."""

    def __init__(self, root: Path, batch_id: int, registry: TopicRegistry, clock: Callable[[], float]) -> None:
        self.root, self.batch_id, self.registry, self.clock = root, batch_id, registry, clock
        self.appender: BatchAppender | None = None
        self.seconds = 0.0

    def add(self, rows: Sequence[DecisionRow]) -> None:
        accepted = [r for r in rows if r.error_code == 0 and not r.duplicate]
        if not accepted:
            return
        started = self.clock()
        if self.appender is None:
            topic, partition = str(rows[0].topic), int(rows[0].partition)  # type: ignore[arg-type]
            # segment.*, index.* from the topic's config (rolling, index interval, preallocation)
            self.appender = BatchAppender(self.root, topic, partition, self.batch_id, self.registry.get(topic),
                                          OPEN_LOGS)
        done = 0
        # an abort marker's `.txnindex` entry goes to the segment the marker lands in, right after it
        for i in (i for i, r in enumerate(accepted) if r.aborted_txn_first_offset >= 0):
            self.appender.add([_stored(r) for r in accepted[done:i + 1]])
            self.appender.add_aborted(aborted_txn(accepted[i]))
            done = i + 1
        self.appender.add([_stored(r) for r in accepted[done:]])
        self.appender.set_first_unstable_offset(_first_unstable(rows[-1]))
        self.seconds += self.clock() - started

    @property
    def log_starts(self) -> dict[tuple[str, int], int]:
        """The stored log's start offset by (topic, partition) once something was added (a commit does not
        move it); empty before."""
        a = self.appender
        return {} if a is None else {(a.topic, a.partition): a.log_start_offset}

    @property
    def to_commit(self) -> bool:
        return self.appender is not None and self.appender.to_commit

    def commit(self) -> AppendOutcome | None:
        """Make the appended batches durable and commit them (`BatchAppender.finish`); None when nothing was
        to be stored. Safe on a thread of its own: it touches only this partition's files."""
        if self.appender is None:
            return None
        started = self.clock()
        try:
            return self.appender.finish()
        finally:
            self.seconds += self.clock() - started

    def close(self) -> None:
        if self.appender is not None:
            self.appender.close()


def _stored(row: DecisionRow) -> tuple[int, int, bytes, int]:
    return row.base_offset, row.last_offset, row.batch, row.append_time_ms


def _first_unstable(row: DecisionRow) -> int | None:
    return None if row.first_unstable_offset < 0 else row.first_unstable_offset


def aborted_txn(row: DecisionRow) -> AbortedTxn:
    """The `.txnindex` entry of an abort marker's row: its producer (the marker's header), the transaction's
    first offset, the marker's offset and the last stable offset the stage gave."""
    return AbortedTxn(parse_header(row.batch).producer_id, row.aborted_txn_first_offset, row.base_offset,
                      row.aborted_txn_last_stable_offset)


def append_partition(
    root: Path, batch_id: int, rows: Sequence[DecisionRow], registry: TopicRegistry,
) -> AppendOutcome | None:
    """`PartitionAppend` in one step: all of a partition's rows appended and committed."""
    append = PartitionAppend(root, batch_id, registry, time.perf_counter)
    try:
        append.add(rows)
        return append.commit()
    finally:
        append.close()


def outgoing_messages(
    rows: Iterable[DecisionRow], config: SinkConfig, topics: frozenset[str], log_starts: Mapping[tuple[str, int], int]
) -> tuple[list[OutgoingMessage], list[OutgoingMessage]]:
    """The produce responses (none for acks=0) and dead letters of `rows`."""
    responses: list[OutgoingMessage] = []
    letters: list[OutgoingMessage] = []
    storage_starts = dict(log_starts)

    def storage_log_start(topic: str, partition: int) -> int:
        # Retention moves the log start offset on the driver (streaming.retention_schedule), where the
        # stage's state cannot see it; the commit record has the current one. Kafka answers with the
        # log start offset at the time of the response (ProduceResponse `LogStartOffset`, `UnifiedLog.deleteRetentionMsBreachedSegments`).
        key = (topic, partition)
        if key not in storage_starts:
            commit = read_commit_head(partition_dir(config.segments_root, topic, partition))
            storage_starts[key] = commit.log_start_offset if commit is not None else -1
        return storage_starts[key]

    respond = responses.append
    for row in rows:
        if row.acks != 0:
            log_start = row.log_start_offset
            if log_start >= 0 and row.topic in topics and row.partition is not None:
                log_start = max(log_start, storage_log_start(row.topic, row.partition))
            respond(OutgoingMessage(row.request_id.encode(), encode_row_response(row, log_start)))
        if row.error_code != 0:
            letters.append(dead_letter(row, config.ingress_topic))
    return responses, letters


def _commit(
    committer: _Committer, root: Path, appends: Iterable[PartitionAppend]
) -> list[Future[_Committed]]:
    """The partitions' commits handed to the committer: one group commit from `GROUP_COMMIT_PARTITIONS`
    partitions to commit (where the system has it), else one commit per partition."""
    appends = list(appends)
    if sum(a.to_commit for a in appends) >= GROUP_COMMIT_PARTITIONS and group_commit_available(root):
        return [committer.submit(partial(_commit_group, root, appends))]
    return [committer.submit(a.commit) for a in appends]


def _commit_group(root: Path, appends: Sequence[PartitionAppend]) -> list[AppendOutcome]:
    """Every partition's appends made durable and committed by one group commit (`storage.group_commit`); its
    time counted to the first partition's."""
    started = appends[0].clock()
    try:
        group_commit(root, [a.appender for a in appends if a.appender is not None])
        outcomes = [a.appender.outcome() for a in appends if a.appender is not None]
    finally:
        appends[0].seconds += appends[0].clock() - started
    return [o for o in outcomes if o is not None]


_Committed = AppendOutcome | list[AppendOutcome] | None


def _outcomes(result: AppendOutcome | list[AppendOutcome] | None) -> list[AppendOutcome]:
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


class _Committer:
    """Runs the partitions' commits: on the worker's commit threads when `threaded` (`_commit_pool`), else inline
    (one small partition: a thread costs more than it saves). Each commit is mostly fdatasync and fsync calls,
    which release the GIL, so the disk sees them together and the filesystem's journal groups them. Leaving waits
    for every commit it ran (a file descriptor stays open until its call has returned)."""

    def __init__(self, threaded: bool) -> None:
        self._pool = _commit_pool() if threaded else None
        self._futures: list[Future[_Committed]] = []

    def submit(self, fn: Callable[[], _Committed]) -> Future[_Committed]:
        if self._pool is not None:
            future = self._pool.submit(fn)
            self._futures.append(future)
            return future
        inline: Future[_Committed] = Future()
        try:
            inline.set_result(fn())
        except BaseException as e:  # handed to the caller's result(), raised there
            inline.set_exception(e)
        return inline

    def __enter__(self) -> _Committer:
        return self

    def __exit__(self, *exc: object) -> None:
        wait_for_all(self._futures)


_pool: tuple[int, ThreadPoolExecutor] | None = None  # the process that made it, and the pool


def _commit_pool() -> ThreadPoolExecutor:
    """The worker's `COMMIT_THREADS` commit threads, made at its first threaded commit and kept for its later tasks
    (a Spark Python worker runs one task after another). A thread made for a commit cost its task up to the
    interpreter's switch interval (5 ms) while another thread held the GIL, three times a task over 1 000
    partitions. A process forked from one that has them makes its own: threads do not survive a fork."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(COMMIT_THREADS, "gateway-commit"))
    return _pool[1]


_Key = tuple[str | None, int | None]  # a target partition, as the decision rows name it


class _TaskPublication:
    """A task's produce responses and dead letters, sent in parts as their partitions are committed (an early
    commit's from its commit thread, the rest at the task's end; never two parts at once), then one wait for every
    delivery (`finish`). The producer is taken at the first message."""

    def __init__(self, config: SinkConfig, topics: frozenset[str]) -> None:
        self.config, self.topics = config, topics
        self.responses = self.dead_letters = 0
        self._publication: Publication | None = None

    def messages(
        self, rows: Iterable[DecisionRow], log_starts: Mapping[tuple[str, int], int]
    ) -> tuple[list[OutgoingMessage], list[OutgoingMessage]]:
        return outgoing_messages(rows, self.config, self.topics, log_starts)

    def send(self, responses: Sequence[OutgoingMessage], letters: Sequence[OutgoingMessage]) -> None:
        if not (responses or letters):
            return
        if self._publication is None:
            c = self.config
            self._publication = Publication(c.cluster, c.max_message_bytes, c.publish_timeout_ms)
        self.responses += self._publication.send(self.config.response_topic, responses)
        self.dead_letters += self._publication.send(self.config.dlq_topic, letters)

    def finish(self) -> None:
        if self._publication is not None:
            self._publication.finish()


class _EarlyCommits:
    """A task's partitions committed before its last rows are in (`run_task`): one commit in flight at a time, on
    a committer of its own, while the task reads and appends the rows that follow; their responses and dead letters
    sent as soon as it is done (a lone producer's answer does not wait for the task's other partitions).
    `committed`: every partition handed to it (rows of one of them after that fail the task: they would be taken
    for a replay)."""

    def __init__(self, root: Path, publication: _TaskPublication) -> None:
        self.root, self.publication = root, publication
        self.committed: dict[_Key, PartitionAppend] = {}
        self.outcomes: list[AppendOutcome] = []
        self._flight: tuple[_Committer, list[Future[_Committed]], list[PartitionAppend]] | None = None

    @property
    def in_flight(self) -> int:
        """Partitions of the commit in flight (each holds its descriptors until it is settled)."""
        return 0 if self._flight is None else len(self._flight[2])

    def start(self, appends: Mapping[_Key, PartitionAppend], rows: Sequence[DecisionRow],
              log_starts: Mapping[tuple[str, int], int]) -> None:
        """`appends` committed on a thread, then `rows`' responses and dead letters sent; the commit in flight
        before it settled first."""
        self.settle()
        self.committed.update(appends)
        committer = _Committer(True)
        commits = _commit(committer, self.root, appends.values())
        # queued behind the commits on the worker's threads, so it never holds a thread one of them waits for
        sent = committer.submit(partial(self._send_when_committed, commits, rows, log_starts))
        self._flight = (committer, [*commits, sent], list(appends.values()))

    def _send_when_committed(self, commits: Sequence[Future[_Committed]], rows: Sequence[DecisionRow],
                             log_starts: Mapping[tuple[str, int], int]) -> None:
        for commit in commits:
            commit.result()  # a failed commit sends nothing; its error is raised where the flight is settled
        self.publication.send(*self.publication.messages(rows, log_starts))

    def settle(self, wait: bool = True) -> None:
        """The commit in flight waited for (`wait`, else only when it is done): its outcomes taken, its partitions
        closed; its failure raised."""
        if self._flight is None or (not wait and not all(f.done() for f in self._flight[1])):
            return
        committer, futures, appends = self._flight
        self._flight = None
        try:
            with committer:
                for future in futures:
                    self.outcomes += _outcomes(future.result())
        finally:
            for append in appends:
                append.close()

    def close(self) -> None:
        """On the way out of a failed task: the commit in flight settled, its own failure left aside (the task's
        failure is the one raised)."""
        with suppress(Exception):
            self.settle()


def run_task(
    config: SinkConfig, batch_id: int, registry: TopicRegistry, chunks: Iterable[Sequence[DecisionRow]],
    clock: Callable[[], float] = time.perf_counter,
) -> TaskSummary:
    """Everything the sink does for one task's decisions (its target partitions' rows, each partition's in
    ingress order, in chunks as Arrow hands them over), in the order the guarantees need: each partition's
    accepted batches appended as they arrive; many partitions whose rows are all in committed while the next
    rows come, and their responses and dead letters sent once that commit is done (`_EarlyCommits`); every
    other partition's fdatasync started at once and the responses, dead letters and metric deltas built
    meanwhile; each partition committed; then the rest of the task's responses and dead letters sent, and one
    wait for the delivery of all. Durability is grouped across the task's partitions; no response leaves before
    its own partition's commit."""
    opened, kept = OPEN_LOGS.opened, OPEN_LOGS.reused  # this task's own: a worker runs one task at a time
    appends: dict[_Key, PartitionAppend] = {}
    publication = _TaskPublication(config, frozenset(registry.topics))
    early = _EarlyCommits(config.segments_root, publication)
    rows: list[DecisionRow] = []
    unsent: list[DecisionRow] = []  # the rows of `appends`' partitions: their responses not yet sent
    outcomes: list[AppendOutcome] = []
    try:
        for chunk in chunks:
            _add_by_partition(chunk, appends, early.committed, config.segments_root, batch_id, registry, clock)
            rows.extend(chunk)
            unsent.extend(chunk)
            if not chunk:
                continue
            early.settle(wait=False)
            # The partitions before the chunk's last (whose rows may go on in the next chunk) have all their rows:
            # committed now when they are many (their commit overlaps the rows still to come), or when the task
            # would hold too many open (bounded descriptors: then waited for); their responses and dead letters
            # sent once that commit is done, while the task goes on.
            last = _partition_of(chunk[-1])
            complete = len(appends) - (last in appends)
            bounded = len(appends) + early.in_flight > MAX_OPEN_PARTITIONS
            if bounded or (complete >= EARLY_COMMIT_PARTITIONS and not early.in_flight):
                done = {k: a for k, a in appends.items() if k != last}
                # a partition's rows are together (`streaming.stage`), so the last partition's are the tail
                cut = next((i for i in range(len(unsent) - 1, -1, -1) if _partition_of(unsent[i]) != last), -1) + 1
                early.start(done, unsent[:cut], _log_starts(done.values()))
                appends = {last: appends[last]} if last in appends else {}
                unsent = unsent[cut:]
                if bounded:
                    early.settle()
        if not rows:
            early.settle()
            return TaskSummary()
        log_starts = _log_starts(appends.values())  # read before the commit, which lets the logs go
        threaded = len(appends) > 1 or len(rows) >= THREADED_COMMIT_ROWS
        with _Committer(threaded) as committer:
            # the commits in flight on the committer's threads (one group commit, or every partition's
            # fdatasyncs and commit record at once), beside the early commit still in flight (other partitions:
            # its syncs are mostly the filesystem's wait), while this one builds the responses, dead letters and
            # metric deltas
            committing = _commit(committer, config.segments_root, appends.values())
            messages = publication.messages(unsent, log_starts)
            metrics = DecisionAggregates({name: int(cfg.partitions) for name, cfg in registry.topics.items()})
            metrics.add(rows)
            early.settle()
            outcomes += early.outcomes
            outcomes += [o for c in committing for o in _outcomes(c.result())]
    finally:
        early.close()
        for append in appends.values():
            append.close()
        OPEN_LOGS.release_ready()  # none, unless the task failed between taking logs up and opening them
    every = [*early.committed.values(), *appends.values()]
    started = clock()
    publication.send(*messages)
    publication.finish()
    published = clock()
    return TaskSummary(
        appended_batches=sum(o.batches for o in outcomes),
        appended_bytes=sum(o.bytes_written for o in outcomes),
        partitions=len(every),
        partitions_appended=sum(1 for o in outcomes if o.batches),
        replayed_partitions=sum(1 for o in outcomes if o.skipped_replay),
        logs_opened=OPEN_LOGS.opened - opened,
        logs_kept=OPEN_LOGS.reused - kept,
        segments_rolled=sum(o.segments_rolled for o in outcomes),
        recovered_bytes=sum(o.recovered_bytes for o in outcomes),
        responses=publication.responses,
        dead_letters=publication.dead_letters,
        append_seconds=sum(a.seconds for a in every),
        publish_seconds=published - started,
        metric_rows=metrics.rows(),
    )


def _add_by_partition(
    chunk: Sequence[DecisionRow], appends: dict[_Key, PartitionAppend], committed: Mapping[_Key, PartitionAppend],
    root: Path,
    batch_id: int, registry: TopicRegistry, clock: Callable[[], float],
) -> None:
    """A chunk's rows handed to their partitions' appends, each partition's run of rows in one call; the kept logs
    of the partitions it starts appending to taken up together first (`OpenLogs.resume_many`), their locks in the
    rows' order, as one by one: a task's retry and a zombie attempt of it wait for each other's locks in the same
    order, never each holding one the other waits for."""
    starting = dict.fromkeys(_partition_of(r) for r in chunk if r.error_code == 0 and not r.duplicate)
    OPEN_LOGS.resume_many(root, [(str(topic), int(partition), registry.get(str(topic)))  # type: ignore[arg-type]
                                 for topic, partition in starting if (topic, partition) not in appends])
    for key, run in groupby(chunk, key=_partition_of):
        append = appends.get(key)
        if append is None and key in committed:
            # The stage emits each partition's rows together (`streaming.stage`); rows after its commit would
            # be taken for a replay of this micro-batch and skipped
            raise RuntimeError(f"{key[0]}-{key[1]}: decision rows after the partition was committed in this task")
        if append is None:
            append = appends[key] = PartitionAppend(root, batch_id, registry, clock)
        append.add(list(run))


_partition_of = attrgetter("topic", "partition")


def _log_starts(appends: Iterable[PartitionAppend]) -> dict[tuple[str, int], int]:
    return {key: start for append in appends for key, start in append.log_starts.items()}
