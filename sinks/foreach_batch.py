"""The `foreachBatch` sink: segments first, then responses and dead letters (DESIGN §4, §5).

The stage's output is persisted once and read twice; the stateful plan never runs twice in one
micro-batch. Segment writes for a target partition happen in one task, in offset order, and are
fsynced and committed before any response of the micro-batch is published.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from sinks.dead_letters import dead_letter
from sinks.kafka_publisher import OutgoingMessage, publish
from sinks.partition_log import append_batches, partition_dir, read_commit
from sinks.responses import encode_response, response_from_row
from validators.topic_config import RegistryWatcher, TopicRegistry

log = logging.getLogger("gateway.sink")

APPEND_OUTCOME_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("skipped_replay", BooleanType()),
        StructField("batches", LongType()),
        StructField("bytes_written", LongType()),
        StructField("log_end_offset", LongType()),
    ]
)
PUBLISH_OUTCOME_SCHEMA = StructType([StructField("responses", LongType()), StructField("dead_letters", LongType())])


@dataclass(frozen=True)
class SinkConfig:
    bootstrap_servers: str
    segments_root: Path
    ingress_topic: str
    response_topic: str
    dlq_topic: str
    max_message_bytes: int  # for dead letters: as large as the biggest ingress message


@dataclass(frozen=True)
class MicroBatchSummary:
    batch_id: int
    appended_batches: int
    appended_bytes: int
    replayed_partitions: int
    responses: int
    dead_letters: int
    decide_and_append_seconds: float = 0.0
    publish_seconds: float = 0.0


# Called on the driver after a micro-batch is durable and published, with the (still cached)
# decisions: metrics and status read it here instead of re-running the stateful plan.
MicroBatchObserver = Callable[[DataFrame, int, "MicroBatchSummary"], None]


class GatewaySink:
    def __init__(
        self, config: SinkConfig, registry: RegistryWatcher, observers: Sequence[MicroBatchObserver] = ()
    ) -> None:
        self.config = config
        self.registry_watcher = registry
        self.observers = list(observers)
        self.last_summary: MicroBatchSummary | None = None

    @property
    def registry(self) -> TopicRegistry:
        """The topic registry for this micro-batch (reloaded when conf changed)."""
        return self.registry_watcher.current()

    def __call__(self, decided: DataFrame, batch_id: int) -> None:
        decided = decided.persist()
        try:
            started = time.perf_counter()
            appended = self._append_segments(decided, batch_id)  # runs the stage, then writes segments
            durable = time.perf_counter()
            published = self._publish(decided)
            self.last_summary = MicroBatchSummary(
                batch_id=batch_id,
                appended_batches=sum(r.batches for r in appended),
                appended_bytes=sum(r.bytes_written for r in appended),
                replayed_partitions=sum(1 for r in appended if r.skipped_replay),
                responses=sum(r.responses for r in published),
                dead_letters=sum(r.dead_letters for r in published),
                decide_and_append_seconds=durable - started,
                publish_seconds=time.perf_counter() - durable,
            )
            log.info("micro-batch %s: %s", batch_id, self.last_summary)
            for observe in self.observers:
                observe(decided, batch_id, self.last_summary)
        finally:
            decided.unpersist()

    def _append_segments(self, decided: DataFrame, batch_id: int) -> list:
        root = self.config.segments_root
        registry = self.registry

        def write(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            chunks = list(frames)
            rows = pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()
            outcomes = []
            if len(rows):
                for (topic, partition), group in rows.groupby(["topic", "partition"], sort=True):
                    group = group.sort_values("base_offset")
                    batches = zip(
                        group.base_offset.astype(int), group.last_offset.astype(int), group.batch,
                        group.append_time_ms.astype(int), strict=True,
                    )
                    # segment.*, index.* from the topic's config (rolling, index interval, preallocation)
                    o = append_batches(root, str(topic), int(partition), batch_id, batches, registry.get(str(topic)))
                    outcomes.append((o.topic, o.partition, o.skipped_replay, o.batches, o.bytes_written, o.log_end_offset))
            yield pd.DataFrame(outcomes, columns=[f.name for f in APPEND_OUTCOME_SCHEMA.fields])

        # Idempotent duplicates are acknowledged with their original offsets and not stored again.
        accepted = decided.filter("error_code = 0 AND NOT duplicate").select(
            "topic", "partition", "base_offset", "last_offset", "batch", "append_time_ms"
        )
        return (
            accepted.repartition("topic", "partition")
            .sortWithinPartitions("topic", "partition", "base_offset")
            .mapInPandas(write, APPEND_OUTCOME_SCHEMA)
            .collect()
        )

    def _publish(self, decided: DataFrame) -> list:
        config = self.config
        topics = frozenset(self.registry.topics)

        def send(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            responses: list[OutgoingMessage] = []
            letters: list[OutgoingMessage] = []
            log_starts: dict[tuple[str, int], int] = {}

            def storage_log_start(topic: str, partition: int) -> int:
                # Retention moves the log start offset on the driver (streaming.retention_schedule), where the
                # stage's state cannot see it; the commit record has the current one (one small read per
                # partition and task). Kafka answers with the log start offset at the time of the response
                # (ProduceResponse `LogStartOffset`, reference §5.6: it moves to the first retained segment).
                key = (topic, partition)
                if key not in log_starts:
                    commit = read_commit(partition_dir(config.segments_root, topic, partition))
                    log_starts[key] = commit.log_start_offset if commit is not None else -1
                return log_starts[key]

            for frame in frames:
                for row in frame.itertuples(index=False):
                    if int(row.acks) != 0:
                        response = response_from_row(row)
                        if response["log_start_offset"] >= 0 and response["topic"] in topics:
                            response["log_start_offset"] = max(
                                response["log_start_offset"], storage_log_start(response["topic"], response["partition"])
                            )
                        responses.append(OutgoingMessage(row.request_id.encode(), encode_response(response)))
                    if int(row.error_code) != 0:
                        letters.append(dead_letter(row, config.ingress_topic))
            n_resp = publish(config.bootstrap_servers, config.response_topic, responses, config.max_message_bytes)
            n_dlq = publish(config.bootstrap_servers, config.dlq_topic, letters, config.max_message_bytes)
            yield pd.DataFrame([(n_resp, n_dlq)], columns=["responses", "dead_letters"])

        return decided.mapInPandas(send, PUBLISH_OUTCOME_SCHEMA).collect()
