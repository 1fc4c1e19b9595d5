"""The sink's work for the target partitions of one task: append, commit, publish, count (DESIGN §6).

The stateful stage's output is hash-partitioned by target (topic, partition), so every decision of
a target partition is in exactly one task, and there contiguous (`target_groups`). The task takes each
partition as soon as its decisions have arrived, while the stage decides the next: appends its accepted
batches in offset order, fsyncs and commits them (`partition_log.append_batches`), and only then sends
its produce responses and dead letters — a response never goes out before its batch is durable (DESIGN
§4.3) — and folds its rows into metric deltas (`batch_metrics`). One wait for every delivery ends the
task. What comes back to the driver is one small `TaskSummary`: one Spark job per micro-batch, no
persist, no second shuffle.
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
from sinks.batch_spool import remove_spools, unspool_rows
from sinks.dlq.dead_letters import dead_letter
from sinks.kafka_publisher import DEFAULT_PUBLISH_TIMEOUT_MS, OutgoingMessage, Publication
from sinks.responses import encode_row_response
from sinks.storage.commit_record import read_commit
from sinks.storage.file_names import partition_dir
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


def append_partitions(
    root: Path, batch_id: int, rows: Iterable[DecisionRow], registry: TopicRegistry
) -> list[AppendOutcome]:
    """Append the accepted, non-duplicate rows of each target partition in offset order, exactly once
    per micro-batch. Idempotent duplicates are acknowledged with their original offsets and not stored."""
    by_partition: dict[tuple[str, int], list[DecisionRow]] = {}
    for row in rows:
        if row.error_code == 0 and not row.duplicate:
            by_partition.setdefault((str(row.topic), int(row.partition)), []).append(row)
    outcomes = []
    for (topic, partition), group in sorted(by_partition.items()):
        group.sort(key=lambda r: r.base_offset)
        batches = ((r.base_offset, r.last_offset, r.batch, r.append_time_ms) for r in group)
        # segment.*, index.* from the topic's config (rolling, index interval, preallocation)
        outcomes.append(append_batches(root, topic, partition, batch_id, batches, registry.get(topic)))
    return outcomes


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


def target_groups(rows: Iterable[DecisionRow]) -> Iterator[list[DecisionRow]]:
    """The rows of each target partition, one list per partition as soon as its last row has arrived.

    The stateful operator (`FlatMapGroupsInPandasWithStateExec`) requires its input sorted by the
    grouping key and emits each group's output before the next group's, so a partition's decisions are
    contiguous; a partition seen again after its run ended would be appended twice in one micro-batch,
    which this refuses instead."""
    done: set[tuple[str | None, int | None]] = set()
    for key, group in itertools.groupby(rows, key=lambda r: (r.topic, r.partition)):
        if key in done:
            raise ValueError(f"decisions for {key[0]}-{key[1]} are not contiguous in the stage's output")
        done.add(key)
        yield list(group)


def run_partition_task(
    config: SinkConfig, batch_id: int, rows: Iterable[DecisionRow], registry: TopicRegistry, clock: Callable[[], float]
) -> TaskSummary:
    """Everything the sink does for one task's rows, in the order the guarantees need, one target
    partition at a time while the stage still decides the next: its batches read back from the spool,
    appended (fsync + commit), then its responses and dead letters sent; at the end one wait for every
    delivery, then the spool files removed (a retried task spools again) and the metric deltas."""
    topics = frozenset(registry.topics)
    publication: Publication | None = None
    metrics = DecisionAggregates({name: int(cfg.partitions) for name, cfg in registry.topics.items()})
    outcomes: list[AppendOutcome] = []
    spools: list[Path] = []
    n_resp = n_dlq = groups = 0
    append_seconds = 0.0
    for spooled in target_groups(rows):
        groups += 1
        group, files = unspool_rows(spooled)
        spools.extend(files)
        started = clock()
        appended = append_partitions(config.segments_root, batch_id, group, registry)
        append_seconds += clock() - started
        outcomes.extend(appended)
        log_starts = {(o.topic, o.partition): o.log_start_offset for o in appended}
        responses, letters = outgoing_messages(group, config, topics, log_starts)
        if (responses or letters) and publication is None:
            publication = Publication(config.bootstrap_servers, config.max_message_bytes, config.publish_timeout_ms)
        if publication is not None:
            n_resp += publication.send(config.response_topic, responses)
            n_dlq += publication.send(config.dlq_topic, letters)
        metrics.add(group)
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
