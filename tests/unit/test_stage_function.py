"""The stateful function (`streaming.stage.stage_function`) decides a partition's batches in ingress order and
only decides: it emits one decision row per batch and writes no file, makes no Kafka client, no network call —
with the segments root unwritable and Kafka unreachable it decides the same. The sink's task
(`sinks.partition_task.run_task`) then appends, commits and counts the rows of each target partition, once per
micro-batch id. Driven with PySpark's own `GroupState`, as its Python worker builds it."""

from __future__ import annotations

import builtins
import io
import os
import socket
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from contract.decision_row import DecisionRow
from kafka_cluster.security import KafkaCluster
from sinks.decisions import DECISION_SCHEMA, arrow_decisions
from sinks.partition_task import SinkConfig, run_task
from sinks.registry_watcher import RegistryWatcher
from storage.log_reader import read
from streaming import bucket_state, stage
from streaming.bucket_state import BucketState
from streaming.stage import (
    PACKED_COLUMN,
    STATE_SCHEMA,
    IngressBatch,
    _ingress_batches,
    decide_group,
    decide_target,
    pack_fields,
    stage_function,
    target_lane,
)
from validators.append_result import Accepted, PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000


def _frame(offsets: list[int]) -> pd.DataFrame:
    """A group's frame as the stage reads it (`stage_input`'s columns)."""
    n = len(offsets)
    return pd.DataFrame({
        "topic": ["orders"] * n, "partition": [0] * n,
        "batch": [build_record_batch([(NOW - 10, b"k", b"v" * (o % 7))] * 2) for o in offsets],
        "request_id": [f"r{o}" for o in offsets],
        # ingress partition, offset and timestamp, client id, acks (0: every batch accepted, no response or dead
        # letter, so no broker is needed), partition header, replay of, principal, transactional id, origin,
        # transaction version
        PACKED_COLUMN: [pack_fields([0, o, NOW, None, 0, "0", None, None, None, None, 0]) for o in offsets],
    })


def _state(row: tuple | None = None) -> GroupState:
    return GroupState(row, NOW, -1, GroupStateTimeout.NoTimeout, False, False, False, False, False, -1, b"",
                      STATE_SCHEMA)


def _registry(tmp_path: Path) -> RegistryWatcher:
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": {"orders": {"partitions": 1}}}')
    return RegistryWatcher(topics)


def _sink(root: Path) -> SinkConfig:
    return SinkConfig(KafkaCluster("127.0.0.1:1"), root, "ingress", "responses", "dlq", 1 << 20)


def _decide(run_group, state: GroupState) -> list[DecisionRow]:  # type: ignore[no-untyped-def]
    """The stage's output, through Arrow with the decisions' Spark schema, as the sink's task reads it."""
    # two input frames, neither in ingress order: the function sorts before deciding
    frames = list(run_group((3,), iter([_frame([6, 1, 4, 0]), _frame([3, 5, 2])]), state))
    arrow = pa.Schema.from_pandas(frames[0], preserve_index=False)
    assert arrow.names == [f.name for f in DECISION_SCHEMA.fields]
    return list(arrow_decisions(pa.RecordBatch.from_pandas(f, preserve_index=False) for f in frames))


def test_the_stage_decides_in_ingress_order_and_only_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every file write and every network connection refused (the segments root unwritable, Kafka
    unreachable), the stage decides exactly what it decides without them: it does neither."""
    registry = _registry(tmp_path)
    free = _decide(stage_function(registry), _state())

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the stage touched the outside world: {args!r}")

    real_open = builtins.open

    def read_only_open(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if any(c in mode for c in "wax+"):
            refused(file, mode)
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(builtins, "open", read_only_open)
    monkeypatch.setattr(io, "open", read_only_open)  # pathlib's
    monkeypatch.setattr(os, "open", refused)
    state = _state()
    rows = _decide(stage_function(registry), state)
    monkeypatch.undo()
    assert rows == free
    assert [r.ingress_offset for r in rows] == list(range(7))
    assert [(r.base_offset, r.last_offset) for r in rows] == [(2 * o, 2 * o + 1) for o in range(7)]
    # the log end offset, for the next micro-batch
    assert state.exists and BucketState.from_json(state.get[0]).get("orders", 0).log_end_offset == 14
    again = _state()  # the same input again (a retried task): the same decisions, byte for byte
    assert _decide(stage_function(registry), again) == rows and again.get == state.get


def test_the_sink_task_appends_each_partition_once_per_batch_id(tmp_path: Path) -> None:
    root = tmp_path / "segments"
    rows = _decide(stage_function(_registry(tmp_path)), _state())
    registry = _registry(tmp_path).current()
    summary = run_task(_sink(root), 5, registry, [rows[:3], rows[3:]], time.perf_counter)
    assert (summary.appended_batches, summary.partitions_appended, summary.responses) == (7, 1, 0)
    stored = read(root, "orders", 0, 0, max_records=100)
    assert [r.offset for r in stored] == list(range(14))
    assert [r.value for r in stored[::2]] == [b"v" * (o % 7) for o in range(7)]
    assert {m["p"]: m["batches"] for m in summary.metric_rows} == {0: 7}
    log_file = next((root / "orders-0").glob("*.log"))
    written = log_file.read_bytes()
    replayed = run_task(_sink(root), 5, registry, [rows], time.perf_counter)  # same batch id
    assert (replayed.appended_batches, replayed.replayed_partitions) == (0, 1)
    assert log_file.read_bytes() == written


def test_an_accepted_row_carries_the_decision_field_by_field(tmp_path: Path) -> None:
    """The accepted row is built positionally (`_output_row`): every field where `DecisionRow` names it."""
    registry = _registry(tmp_path).current()
    (item,) = list(_ingress_batches(_frame([9])))
    state = PartitionState(log_start_offset=3, log_end_offset=40, last_append_time_ms=NOW + 5)
    result = decide_target(target_lane("orders", 0, registry), item, state, NOW)
    assert isinstance(result, Accepted)
    (row,), _ = decide_group("orders", 0, [item], registry, state, NOW)
    assert row._asdict() == {
        "ingress_partition": 0, "ingress_offset": 9, "ingress_timestamp_ms": NOW, "request_id": "r9", "client_id": None,
        "acks": 0, "topic": "orders", "partition": 0, "partition_header": "0", "replay_of": None, "principal": None,
        "error_code": 0, "error_name": None, "error_message": None, "record_errors": "[]", "record_error_count": 0,
        "base_offset": 40, "last_offset": 41, "log_append_time_ms": -1, "append_time_ms": NOW + 5,
        "max_timestamp": NOW - 10, "producer_max_timestamp": NOW - 10, "log_start_offset": 3, "record_count": 2,
        "clock_held": True, "duplicate": False, "future_timestamps": 0, "window": None, "batch_time_ms": NOW,
        "batch": result.records, "first_unstable_offset": -1, "aborted_txn_first_offset": -1,
        "aborted_txn_last_stable_offset": -1,
    }


def test_a_decision_that_raises_rejects_its_own_batches_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input never stops the query: an exception in Kafka's decision is UNKNOWN_SERVER_ERROR for the batch
    it was deciding (the rest decided as usual), or for the group's batches when it comes while the partition's
    decision is being set up."""
    registry = _registry(tmp_path).current()
    items = list(_ingress_batches(_frame([0, 1, 2])))
    real = stage.decide_in_lane

    def fails_on_second(lane, data, state, now_ms):  # noqa: ANN001, ANN202
        if data == items[1].batch:
            raise ValueError("hostile")
        return real(lane, data, state, now_ms)

    monkeypatch.setattr(stage, "decide_in_lane", fails_on_second)
    rows, state = decide_group("orders", 0, items, registry, PartitionState(), NOW)
    assert [r.error_name for r in rows] == [None, "UNKNOWN_SERVER_ERROR", None]
    assert rows[1].error_message == "ValueError: hostile" and state.log_end_offset == 4

    def fails_at_setup(topic, partition, config):  # noqa: ANN001, ANN202
        raise KeyError(topic)

    monkeypatch.setattr(stage, "partition_lane", fails_at_setup)
    stage._lanes.clear()  # a worker that has not settled this partition's lane yet
    rows, state = decide_group("orders", 0, items, registry, PartitionState(), NOW)
    assert [r.error_name for r in rows] == ["UNKNOWN_SERVER_ERROR"] * 3 and state == PartitionState()


def test_the_stage_frame_carries_every_row_through_arrow_as_it_was(tmp_path: Path) -> None:
    """`decision_frame` holds the rows' values as objects in one block: through Arrow with the decisions' Spark
    schema, converted by PySpark's own conversion of a stateful group's output, the sink reads back the same rows —
    nulls where a hostile header left no topic or partition — as pandas' own frame of the rows gives."""
    from pyspark.sql.conversion import PandasToArrowConversion
    from pyspark.sql.pandas.types import to_arrow_schema

    registry = _registry(tmp_path).current()
    items = list(_ingress_batches(_frame([7, 8])))
    accepted, _ = decide_group("orders", 0, items, registry, PartitionState(), NOW)
    no_partition, _ = decide_group("orders", None, items[:1], registry, PartitionState(), NOW)
    no_topic, _ = decide_group(None, None, items[1:], registry, PartitionState(), NOW)
    unknown, _ = decide_group("orders", 5, items[:1], registry, PartitionState(), NOW)
    rows = accepted + no_partition + no_topic + unknown
    assert {r.error_code for r in rows} == {0, 3, 17} and rows[2].partition is None and rows[3].topic is None
    ours = stage.decision_frame(rows)
    assert ours._mgr.nblocks == 1  # what makes it cheap to join and convert (the function's docstring)
    for frame in (ours, pd.DataFrame(rows, columns=DecisionRow._fields)):
        batch = PandasToArrowConversion.convert(frame, DECISION_SCHEMA, timezone="UTC", arrow_cast=True,
                                                assign_cols_by_name=True)
        assert batch.schema.types == to_arrow_schema(DECISION_SCHEMA).types
        assert list(arrow_decisions([batch])) == rows
    assert stage.decision_frame([]).columns.tolist() == list(DecisionRow._fields)


def test_a_partitions_producer_table_is_taken_from_the_worker_as_it_last_wrote_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bucket's state read back in the next micro-batch gives each partition the producer table this worker
    encoded into it, without decoding the text again; a text it never saw is decoded; the worker keeps at most
    `DECODED_PRODUCERS_LIMIT` tables."""
    registry = TopicRegistry({"orders": topic_config("orders", 2, {}, {})})
    idempotent = build_record_batch([(NOW - 10, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0)
    item = IngressBatch(0, 0, NOW, idempotent, "r0", None, 1, "0")
    _rows, decided = decide_group("orders", 0, [item], registry, PartitionState(), NOW)
    assert len(decided.producers) == 1
    bucket = BucketState()
    bucket.put("orders", 0, decided)
    text = bucket.to_json()

    def no_decoding(text: object) -> None:
        raise AssertionError(f"decoded again: {text!r}")

    monkeypatch.setattr(bucket_state, "producers_from_state", no_decoding)
    assert BucketState.from_json(text).get("orders", 0).producers is decided.producers
    monkeypatch.undo()
    bucket_state._decoded_producers.clear()  # another worker: decodes it, to an equal table
    fresh = BucketState.from_json(text).get("orders", 0)
    assert fresh.producers is not decided.producers and fresh == decided
    monkeypatch.setattr(bucket_state, "DECODED_PRODUCERS_LIMIT", 2)
    for p in range(3):
        bucket.put("orders", p, decide_group("orders", 0, [item._replace(request_id=f"r{p}")], registry,
                                             PartitionState(log_end_offset=p), NOW)[1])
    assert 0 < len(bucket_state._decoded_producers) <= 2


def test_a_partitions_lane_is_settled_again_when_the_registry_gives_another_config() -> None:
    """The lane a worker settled for a partition is taken as it is while the registry gives the same topic config,
    and settled again from a reloaded registry's: a changed `max.message.bytes` applies from that batch on."""
    before = TopicRegistry({"orders": topic_config("orders", 2, {}, {})})
    lane = target_lane("orders", 1, before)
    assert target_lane("orders", 1, before) is lane
    after = TopicRegistry({"orders": topic_config("orders", 2, {"max.message.bytes": 100}, {})})
    changed = target_lane("orders", 1, after)
    assert changed is not lane and changed.lane is not None and changed.lane.max_message_bytes == 100
    assert lane.lane is not None and lane.lane.max_message_bytes != 100
    big = IngressBatch(0, 0, NOW, build_record_batch([(NOW, b"k", b"v" * 200)]), "r0", None, 1, "1")
    assert decide_target(changed, big, PartitionState(), NOW).error.name == "MESSAGE_TOO_LARGE"  # type: ignore[union-attr]
    assert type(decide_target(lane, big, PartitionState(), NOW)) is Accepted
