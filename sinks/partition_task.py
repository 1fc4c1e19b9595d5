"""The sink's work for the target partitions of one task: append, commit, publish, count (DESIGN §6).

The stateful stage's output is hash-partitioned by target (topic, partition), so every decision of
a target partition is in exactly one task, and there contiguous (`target_groups`). The task appends a
partition's accepted batches in offset order as its decisions arrive, while the stage is still deciding
(`append_partition`); once the partition's last decision is in, it fsyncs and commits them
(`partition_log.append_batches`), and only then sends the partition's produce responses and dead letters
— a response never goes out before its batch is durable (DESIGN §4.3) — and folds its rows into metric
deltas (`batch_metrics`). One wait for every delivery ends the task. What comes back to the driver is one
small `TaskSummary`: one Spark job per micro-batch, no persist, no second shuffle.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contract.decision_row import DECISION_FIELDS, DecisionRow
from sinks.batch_metrics import DecisionAggregates
from sinks.batch_spool import Unspooler, remove_spools
from sinks.dlq.dead_letters import dead_letter
from sinks.kafka_publisher import DEFAULT_PUBLISH_TIMEOUT_MS, OutgoingMessage, Publication
from sinks.responses import encode_row_response
from sinks.storage.commit_record import read_commit
from sinks.storage.file_names import partition_dir
from sinks.storage.file_span import FileSpan
from sinks.storage.partition_log import AppendOutcome, append_batches
from validators.topic_config import TopicRegistry


@dataclass(frozen=True)
class SinkConfig:
    bootstrap_servers: str
    segments_root: Path
    ingress_topic: str
    response_topic: str
    dlq_topic: str
    max_message_bytes: int  # the producer's message.max.bytes: IngressLimits.dead_letter_message_bytes
    publish_timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS  # a response or dead letter not acknowledged by then fails the task


@dataclass(frozen=True)
class TaskSummary:
    """What one task reports to the driver (a JSON string column: a few hundred bytes)."""

    appended_batches: int = 0
    appended_bytes: int = 0
    partitions_appended: int = 0
    replayed_partitions: int = 0
    segments_rolled: int = 0
    recovered_bytes: int = 0
    responses: int = 0
    dead_letters: int = 0
    append_seconds: float = 0.0
    publish_seconds: float = 0.0
    metric_rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> TaskSummary:
        return TaskSummary(**json.loads(text))


def append_partition(
    root: Path, batch_id: int, rows: Iterable[DecisionRow], registry: TopicRegistry, unspooler: Unspooler,
    clock: Callable[[], float],
) -> tuple[list[DecisionRow], AppendOutcome | None, float]:
    """One target partition's decisions, appended as they arrive: each accepted batch (not an idempotent
    duplicate, which is acknowledged with its original offsets and not stored) copied from the spool into
    its segment while the rest are still on their way from the stage, then one fsync and commit, exactly
    once per micro-batch. The stage emits a partition's decisions in offset order; a batch that does not
    continue the log fails the task (`PartitionLog.append`).

    Returns every row — rejected ones with their bytes read back (for dead letters), accepted ones still
    pointing at the spool — the outcome (None when nothing was to be stored: no directory is made for a
    partition that only rejects, such as a hostile topic name's), and the seconds spent appending, without
    the waits for rows."""
    arrived: list[DecisionRow] = []
    waited = 0.0

    def stored_batches() -> Iterator[tuple[int, int, bytes | FileSpan, int]]:
        nonlocal waited
        pending = iter(rows)
        while True:
            started = clock()
            row = next(pending, None)
            waited += clock() - started
            if row is None:
                return
            if row.error_code == 0 and not row.duplicate:
                arrived.append(row)
                stored = row.batch if row.spool is None else unspooler.span(row)
                yield row.base_offset, row.last_offset, stored, row.append_time_ms
            else:
                arrived.append(unspooler.read(row))

    started = clock()
    batches = stored_batches()
    first = next(batches, None)
    if first is None:
        return arrived, None, 0.0
    topic, partition = str(arrived[-1].topic), int(arrived[-1].partition)
    # segment.*, index.* from the topic's config (rolling, index interval, preallocation)
    outcome = append_batches(root, topic, partition, batch_id, itertools.chain([first], batches), registry.get(topic))
    for _ in batches:  # a replayed micro-batch stores nothing; its rows still get their responses
        pass
    return arrived, outcome, clock() - started - waited


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
        # log start offset at the time of the response (ProduceResponse `LogStartOffset`, reference §5.6).
        key = (topic, partition)
        if key not in storage_starts:
            commit = read_commit(partition_dir(config.segments_root, topic, partition))
            storage_starts[key] = commit.log_start_offset if commit is not None else -1
        return storage_starts[key]

    for row in rows:
        if row.acks != 0:
            log_start = row.log_start_offset
            if log_start >= 0 and row.topic in topics and row.partition is not None:
                log_start = max(log_start, storage_log_start(row.topic, row.partition))
            responses.append(OutgoingMessage(row.request_id.encode(), encode_row_response(row, log_start)))
        if row.error_code != 0:
            letters.append(dead_letter(row, config.ingress_topic))
    return responses, letters


def target_groups(rows: Iterable[DecisionRow]) -> Iterator[Iterator[DecisionRow]]:
    """The rows of each target partition as they arrive, one iterator per partition (consume each before
    asking for the next).

    The stateful operator (`FlatMapGroupsInPandasWithStateExec`) requires its input sorted by the
    grouping key and emits each group's output before the next group's, so a partition's decisions are
    contiguous; a partition seen again after its run ended would be appended twice in one micro-batch,
    which this refuses instead."""
    done: set[tuple[str | None, int | None]] = set()
    for key, group in itertools.groupby(rows, key=lambda r: (r.topic, r.partition)):
        if key in done:
            raise ValueError(f"decisions for {key[0]}-{key[1]} are not contiguous in the stage's output")
        done.add(key)
        yield group


def run_partition_task(
    config: SinkConfig, batch_id: int, rows: Iterable[DecisionRow], registry: TopicRegistry, clock: Callable[[], float]
) -> TaskSummary:
    """Everything the sink does for one task's rows, in the order the guarantees need, one target
    partition at a time as its decisions arrive: its batches read back from the spool and appended, once
    its last decision is in fsynced and committed, then its responses and dead letters sent; at the end
    one wait for every delivery, then the spool files removed (a retried task spools again) and the
    metric deltas."""
    topics = frozenset(registry.topics)
    publication: Publication | None = None
    metrics = DecisionAggregates({name: int(cfg.partitions) for name, cfg in registry.topics.items()})
    outcomes: list[AppendOutcome] = []
    n_resp = n_dlq = groups = 0
    append_seconds = 0.0
    with Unspooler() as unspooler:
        for arriving in target_groups(rows):
            groups += 1
            group, appended, seconds = append_partition(
                config.segments_root, batch_id, arriving, registry, unspooler, clock
            )
            append_seconds += seconds
            log_starts: dict[tuple[str, int], int] = {}
            if appended is not None:
                outcomes.append(appended)
                log_starts[(appended.topic, appended.partition)] = appended.log_start_offset
            responses, letters = outgoing_messages(group, config, topics, log_starts)
            if (responses or letters) and publication is None:
                publication = Publication(config.bootstrap_servers, config.max_message_bytes, config.publish_timeout_ms)
            if publication is not None:
                n_resp += publication.send(config.response_topic, responses)
                n_dlq += publication.send(config.dlq_topic, letters)
            metrics.add(group)
        spools = unspooler.paths
    if not groups:
        return TaskSummary()
    started = clock()
    if publication is not None:
        publication.finish()
    published = clock()
    remove_spools(spools)  # durable and published
    return TaskSummary(
        appended_batches=sum(o.batches for o in outcomes),
        appended_bytes=sum(o.bytes_written for o in outcomes),
        partitions_appended=sum(1 for o in outcomes if o.batches),
        replayed_partitions=sum(1 for o in outcomes if o.skipped_replay),
        segments_rolled=sum(o.segments_rolled for o in outcomes),
        recovered_bytes=sum(o.recovered_bytes for o in outcomes),
        responses=n_resp,
        dead_letters=n_dlq,
        append_seconds=append_seconds,
        publish_seconds=published - started,
        metric_rows=metrics.rows(),
    )


def arrow_rows(batches: Iterable[Any]) -> list[DecisionRow]:
    """The decision rows of a task's Arrow record batches (None for null: no pandas dtype coercion)."""
    return [row for rows in arrow_row_batches(batches) for row in rows]


def arrow_row_batches(batches: Iterable[Any]) -> Iterator[list[DecisionRow]]:
    """`arrow_rows` one record batch at a time, as the batches arrive."""
    for batch in batches:
        if tuple(batch.schema.names) != DECISION_FIELDS:
            raise ValueError(f"stage output columns {batch.schema.names} are not the decision row {DECISION_FIELDS}")
        columns = batch.to_pydict()
        yield list(map(DecisionRow._make, zip(*columns.values(), strict=True)))
