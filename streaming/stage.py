"""The stateful stage: the gateway as partition leader, one group per bucket of target partitions.

`applyInPandasWithState` (PySpark's mapGroupsWithState) calls `run_group` with every ingress batch of one
bucket of target (topic, partition)s in a micro-batch (`bucket_state.STAGE_BUCKETS` buckets: Spark's cost
per group is then bounded however many partitions a micro-batch touches). Each target partition's batches
are sorted by (ingress partition, ingress offset) — Spark gives no order after the shuffle — and decided one
by one by the pure `validators.partition_lane` (`decide_in_lane`: `validate_and_assign` with what depends only
on the partition settled once), threading the partition state through; the bucket's state holds every
partition's (`bucket_state.BucketState`).
The clock is `GroupState.getCurrentProcessingTimeMs()`: the micro-batch timestamp, recorded in the
offset log, so a replayed micro-batch decides the same offsets, append times and bytes.

The function only decides: it emits one typed decision row per ingress batch (`sinks.decisions`) and
writes no file, creates no Kafka client, makes no network call (Spark may run it again; its effects would
not be covered by the state store's commit). The foreachBatch sink (`sinks.micro_batch`) stores and
publishes the decisions. A task retried after a failure decides the same again from the state Spark gives
it: a deterministic stage, an idempotent sink (docs/design.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import StringType, StructField, StructType

from contract.decision_row import DecisionRow
from contract.ingress import HEADER_PARTITION, HEADER_TOPIC, ORIGIN_COORDINATOR
from contract.record_errors import bound_record_errors
from contract.transaction_version import TransactionVersion
from sinks.decisions import DECISION_SCHEMA
from sinks.registry_watcher import RegistryWatcher
from streaming.bucket_state import STAGE_BUCKETS, BucketState
from streaming.logs import ThrottledWarning
from streaming.python_worker import prepare_worker
from validators.append_result import Accepted, AppendResult, PartitionState, Rejected
from validators.errors import Errors
from validators.log_validator import AppendOrigin
from validators.partition_lane import PartitionLane, decide_in_lane, partition_lane
from validators.timestamps import FUTURE_TIMESTAMP_WARN_MS
from validators.topic_config import TopicConfig, TopicRegistry

log = logging.getLogger("gateway.stage")
# KIP-937: Kafka warns about accepted records far ahead of its clock. Per batch, a producer with a
# wrong clock would flood the log: one line per partition, then a summary per minute (the metric
# gateway_future_timestamps_total counts every record).
future_timestamps = ThrottledWarning(
    logging.getLogger("gateway.future_timestamps"), f"with a timestamp more than {FUTURE_TIMESTAMP_WARN_MS} ms ahead"
)

# a bucket's partition states (`BucketState.to_json`)
STATE_SCHEMA = StructType([StructField("partitions", StringType(), False)])
BUCKET_COLUMN = "stage_bucket"
# The ingress fields the stage reads packed in one column (`stage_input`), in this order
PACKED_COLUMN = "ingress_fields"
PACKED_FIELDS = ("ingress_partition", "ingress_offset", "ingress_timestamp_ms", "client_id", "acks",
                 "partition_header", "replay_of", "principal", "transactional_id", "origin", "transaction_version")

class IngressBatch(NamedTuple):
    """One ingress message of a target partition, as the stage reads it (a tuple: one per batch)."""

    ingress_partition: int
    ingress_offset: int
    ingress_timestamp_ms: int
    batch: bytes
    request_id: str
    client_id: str | None
    acks: int
    partition_header: str | None
    replay_of: str | None = None
    principal: str | None = None
    transactional_id: str | None = None  # gw.transactional.id: authorized by the front door
    origin: str | None = None  # gw.origin: `coordinator` for a transaction marker
    transaction_version: int = 0  # gw.transaction.version: a marker's transaction version


class TargetLane(NamedTuple):
    """What `target_lane` settles once for a target partition's batches: Kafka's lane (`lane`), or the answer
    to every batch of the group (`rejected`); neither: the partition header is missing or malformed."""

    lane: PartitionLane | None
    rejected: Rejected | None = None


# The lanes this worker settled, by target partition, with the topic config each was settled with: a lane is a
# function of the partition and its config, so the next micro-batch's takes it as it is while the registry gives
# the same config object (a reload gives new ones). Emptied when full.
LANES_LIMIT = 65_536
_lanes: dict[tuple[str, int], tuple[TopicConfig | None, TargetLane]] = {}


def target_lane(topic: str | None, partition: int | None, registry: TopicRegistry) -> TargetLane:
    """The lane of one target partition for `decide_target`: header problems first (the gateway's own contract,
    docs/design.md: ingress topic), then Kafka's (`validators.partition_lane.partition_lane`). An unexpected
    exception here becomes UNKNOWN_SERVER_ERROR for the group's batches: bad input must never stop the query."""
    if topic is None:
        return TargetLane(None, Rejected(
            Errors.INVALID_TOPIC_EXCEPTION, f"Missing required header {HEADER_TOPIC} (the target topic)"))
    if partition is None:
        return TargetLane(None)
    config = registry.get(topic)
    known = _lanes.get((topic, partition))
    if known is not None and known[0] is config:
        return known[1]
    try:
        lane = TargetLane(partition_lane(topic, partition, config))
    except Exception as e:  # noqa: BLE001 — a hostile key fails its own batches, not the query
        log.exception("validator failed on %s-%s", topic, partition)
        return TargetLane(None, Rejected(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}"))
    if len(_lanes) >= LANES_LIMIT:
        _lanes.clear()
    _lanes[(topic, partition)] = (config, lane)
    return lane


def decide_target(target: TargetLane, item: IngressBatch, state: PartitionState, now_ms: int) -> AppendResult:
    """One batch of the target partition: the lane's answer, or Kafka's decision (`decide_in_lane`). An
    unexpected exception becomes UNKNOWN_SERVER_ERROR for this batch only."""
    lane = target.lane
    if lane is None:
        if target.rejected is not None:
            return target.rejected
        return Rejected(
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            f"Missing or malformed header {HEADER_PARTITION}: {item.partition_header!r} is not a decimal partition number",
        )
    try:
        if item.origin is None and item.transactional_id is None:
            return decide_in_lane(lane, item.batch, state, now_ms)
        return decide_in_lane(lane, item.batch, state, now_ms, _origin(item),
                              TransactionVersion.of_level(item.transaction_version))
    except Exception as e:  # noqa: BLE001 — isolate one hostile batch from the query
        log.exception("validator failed on %s-%s request %s", lane.topic, lane.partition, item.request_id)
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")


def _origin(item: IngressBatch) -> AppendOrigin:
    """Who appends (contract.ingress): the coordinator's marker, a transactional produce, or a client's."""
    if item.origin == ORIGIN_COORDINATOR:
        return AppendOrigin.COORDINATOR
    return AppendOrigin.CLIENT if item.transactional_id is None else AppendOrigin.CLIENT_TRANSACTIONAL


def decide_group(
    topic: str | None, partition: int | None, items: list[IngressBatch], registry: TopicRegistry,
    state: PartitionState, now_ms: int,
) -> tuple[list[DecisionRow], PartitionState]:
    """Decide a target partition's batches of one micro-batch in ingress order."""
    rows: list[DecisionRow] = []
    target = target_lane(topic, partition, registry)
    for item in sorted(items, key=ingress_position):
        result = decide_target(target, item, state, now_ms)
        if type(result) is Accepted:
            state = result.state
            if result.future_timestamp_count:
                future_timestamps.warn(
                    f"{topic}-{partition}", result.future_timestamp_count,
                    f"{topic}-{partition}: accepted {result.future_timestamp_count} record(s) with a timestamp more "
                    f"than {FUTURE_TIMESTAMP_WARN_MS} ms ahead of the broker time {now_ms} (max timestamp "
                    f"{result.producer_max_timestamp}), KIP-937",
                )
        rows.append(_output_row(topic, partition, item, result, state, now_ms))
    return rows, state


def ingress_position(item: IngressBatch) -> tuple[int, int]:
    """The order of a partition's batches: Spark gives none after the shuffle (docs/design.md: ingress topic; docs/design.md: the query)."""
    return item.ingress_partition, item.ingress_offset


def _output_row(
    topic: str | None, partition: int | None, item: IngressBatch, result: AppendResult,
    state: PartitionState, now_ms: int,
) -> DecisionRow:
    head = (item.ingress_partition, item.ingress_offset, item.ingress_timestamp_ms, item.request_id, item.client_id,
            item.acks, topic, partition, item.partition_header, item.replay_of)
    unstable = state.producers.first_unstable_offset() if state.producers else None
    if type(result) is Accepted:
        aborted = result.completed_txn if result.completed_txn is not None and result.completed_txn.aborted else None
        # positional, in DecisionRow's order: keyword binding of 32 fields cost ~2 µs a batch
        return DecisionRow(
            *head,
            0, None, None, "[]", 0,  # error_code, error_name, error_message, record_errors, record_error_count
            result.base_offset, result.last_offset, result.log_append_time_ms, result.append_time_ms,
            result.max_timestamp, result.producer_max_timestamp, state.log_start_offset, result.record_count,
            result.clock_held, result.duplicate, result.future_timestamp_count,
            None, now_ms, result.records, item.principal,  # window, batch_time_ms, batch, principal
            -1 if unstable is None else unstable,
            -1 if aborted is None else aborted.first_offset, -1 if aborted is None else aborted.last_stable_offset,
        )
    # bounded here, where they become a column: a batch of millions of bad records must not make a decision
    # row, a response or a dead letter larger than Arrow, the response topic or the dead-letter topic take
    errors = bound_record_errors(((e.batch_index, e.message) for e in result.record_errors), len(result.record_errors))
    return DecisionRow(
        *head, error_code=result.error.code, error_name=result.error.name,
        error_message=errors.error_message(result.message), record_errors=errors.json, record_error_count=errors.total,
        base_offset=-1, last_offset=-1, log_append_time_ms=-1, append_time_ms=-1, max_timestamp=-1,
        producer_max_timestamp=-1, log_start_offset=result.log_start_offset, record_count=0, clock_held=False,
        duplicate=False, future_timestamps=0,
        window=None if result.window is None else f"[{result.window[0]}, {result.window[1]}]",
        batch_time_ms=now_ms, batch=item.batch, principal=item.principal,
        first_unstable_offset=-1 if unstable is None else unstable,
    )


def _ingress_batches(frame: pd.DataFrame) -> Iterator[IngressBatch]:
    """The frame's rows, read column by column (`tolist`: plain Python values, far cheaper than
    `itertuples` with a null check per cell)."""
    for _target, item in _targeted_batches(frame, with_target=False):
        yield item


Target = tuple[str | None, int | None]


def _targeted_batches(frame: pd.DataFrame, with_target: bool = True) -> Iterator[tuple[Target, IngressBatch]]:
    """The frame's rows (`stage_input`'s columns) with their target (topic, partition) when `with_target` (else
    (None, None)): the packed fields unpacked from their JSON text, the other columns read whole (`tolist`: plain
    Python values, far cheaper than `itertuples` with a null check per cell)."""
    n = len(frame)
    topics = frame["topic"].tolist() if with_target else [None] * n
    partitions = frame["partition"].tolist() if with_target else [None] * n
    loads = json.loads
    for topic, partition, batch, request_id, packed in zip(
            topics, partitions, frame["batch"].tolist(), frame["request_id"].tolist(), frame[PACKED_COLUMN].tolist(),
            strict=True):
        (ingress_partition, ingress_offset, ts, client_id, acks, header, replay_of, principal, transactional_id, origin,
         txn_version) = loads(packed)  # PACKED_FIELDS, in their order
        target = (_opt_str(topic), None if partition is None or pd.isna(partition) else int(partition))
        yield target, IngressBatch(int(ingress_partition), int(ingress_offset), int(ts), bytes(batch), str(request_id),
                                   client_id, int(acks), header, replay_of, principal, transactional_id, origin,
                                   0 if txn_version is None else int(txn_version))


def _opt_str(value: Any) -> str | None:
    """None for Arrow nulls as pandas hands them over (None, NaN or pd.NA)."""
    return None if value is None or value is pd.NA or value != value else str(value)


def _target_order(target: Target) -> tuple[bool, str, bool, int]:
    """A deterministic order of a bucket's targets (missing topic or partition last)."""
    topic, partition = target
    return topic is None, topic or "", partition is None, partition or 0


def stage_function(
    registry: RegistryWatcher,
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    """The function `applyInPandasWithState` runs per bucket of target partitions: the decision rows of each
    partition in turn (in a fixed order of the partitions), each partition's in ingress order."""

    def run_group(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        prepare_worker()
        by_target: dict[Target, list[IngressBatch]] = {}
        for frame in frames:
            for target, item in _targeted_batches(frame):
                items = by_target.get(target)
                if items is None:
                    by_target[target] = [item]
                else:
                    items.append(item)
        now_ms = state.getCurrentProcessingTimeMs()
        bucket = BucketState.from_json(state.get[0] if state.exists else None)
        # The registry file is re-read when it changed: a reload applies from the next group decided
        # (in practice the next micro-batch); a bad reload keeps the previous registry.
        topics = registry.current()
        rows: list[DecisionRow] = []
        topic_ids: dict[str | None, str | None] = {}  # a re-created topic is another incarnation: another id
        for topic, partition in sorted(by_target, key=_target_order):
            if topic not in topic_ids:  # once per topic of the bucket, not per partition
                config = topics.get(topic)
                topic_ids[topic] = str(config.id) if config is not None else None
            topic_id = topic_ids[topic]
            old_state = bucket.get(topic, partition, topic_id)
            decided, new_state = decide_group(topic, partition, by_target[(topic, partition)], topics, old_state, now_ms)
            rows.extend(decided)
            # Only partitions that appended get a state entry: hostile topic names must not grow the state.
            if new_state != old_state and topic is not None and partition is not None:
                bucket.put(topic, partition, new_state, topic_id)
        if bucket.changed:  # (Spark reads the state once the function's frames are exhausted)
            state.update((bucket.to_json(),))
        yield decision_frame(rows)

    return run_group


def decision_frame(rows: list[DecisionRow]) -> pd.DataFrame:
    """The stage's output frame: DECISION_SCHEMA's columns in its order, the rows' values as they are (Python
    numbers, text, bytes, None) in one block of objects, made in one step; pyarrow reads each column as the
    schema's type. PySpark concatenates the groups' frames before converting them to Arrow, and pandas'
    concatenation and PySpark's conversion pay per block: a frame of one block, whose first column is never null,
    is the cheapest to build, join and convert (PySpark's output of 1 000 decisions in 16 groups: ~63 instead of
    ~76 ms with each column a typed array of its own; in 4 groups ~41 instead of ~51 ms)."""
    if not rows:
        return pd.DataFrame(columns=DecisionRow._fields)
    values = np.empty((len(rows), len(DecisionRow._fields)), dtype=object)
    values[:] = rows
    return pd.DataFrame(values, columns=DecisionRow._fields, copy=False)


def apply_stage(ingress: DataFrame, registry: RegistryWatcher) -> DataFrame:
    """The stage over the ingress: one decision row per ingress batch (`sinks.decisions.DECISION_SCHEMA`),
    partitioned by bucket of target partitions (the stateful operator's hash partitioning)."""
    return stage_input(ingress).groupBy(BUCKET_COLUMN).applyInPandasWithState(
        stage_function(registry), DECISION_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )


def stage_input(ingress: DataFrame) -> DataFrame:
    """The ingress as the stage reads it: target, batch, request id and bucket (`with_bucket`) as columns of their
    own, the other fields (`PACKED_FIELDS`) packed into one, Spark's JSON of them as an array of text (a null as
    null). PySpark hands a group to the function column by column, at ~70 µs a column a group: over 16 buckets,
    16 columns cost ~14 ms a micro-batch, these 6 ~8 ms (docs/performance.md, "Scale")."""
    packed = F.to_json(F.array(*[F.col(name).cast("string") for name in PACKED_FIELDS])).alias(PACKED_COLUMN)
    return with_bucket(ingress).select("topic", "partition", "batch", "request_id", packed, BUCKET_COLUMN)


def pack_fields(values: Sequence[Any]) -> str:
    """`PACKED_FIELDS`' values (in their order) as `stage_input` packs them in Spark: for a frame made outside it."""
    return json.dumps([None if v is None else str(v) for v in values], separators=(",", ":"), ensure_ascii=False)


def with_bucket(ingress: DataFrame) -> DataFrame:
    """The ingress with each row's bucket: Spark's Murmur3 hash of (topic, partition), stable across Spark
    versions and runs (a checkpoint's state is keyed by it), modulo `STAGE_BUCKETS`."""
    return ingress.withColumn(BUCKET_COLUMN, F.pmod(F.hash("topic", "partition"), F.lit(STAGE_BUCKETS)))
