"""The stateful function (`streaming.stage.stage_function`) emits a partition's decisions in chunks of
`OUTPUT_CHUNK_ROWS` as it makes them, in ingress order across chunks, and updates the partition's state
once, after the last chunk (Spark reads the state when the function's frames are exhausted). Driven with
PySpark's own `GroupState`, as its Python worker builds it; no Spark session is needed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from contract.decision_row import DecisionRow
from sinks import batch_spool
from sinks.batch_spool import unspool_rows
from sinks.registry_watcher import RegistryWatcher
from streaming import stage
from streaming.stage import STATE_SCHEMA, stage_function
from validators.codec.record_batch import build_record_batch

NOW = 1_700_000_000_000


def _frame(offsets: list[int]) -> pd.DataFrame:
    n = len(offsets)
    return pd.DataFrame({
        "ingress_partition": [0] * n, "ingress_offset": offsets, "ingress_timestamp_ms": [NOW] * n,
        "batch": [build_record_batch([(NOW - 10, b"k", b"v" * (o % 7))] * 2) for o in offsets],
        "request_id": [f"r{o}" for o in offsets], "client_id": [None] * n, "acks": [1] * n,
        "partition_header": ["0"] * n, "replay_of": [None] * n,
    })


def _new_state() -> GroupState:
    return GroupState(None, NOW, -1, GroupStateTimeout.NoTimeout, False, False, False, False, False, -1, b"",
                      STATE_SCHEMA)


def test_decisions_leave_in_chunks_in_ingress_order_and_the_state_is_updated_after_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage, "OUTPUT_CHUNK_ROWS", 3)
    monkeypatch.setattr(batch_spool.spool_rows, "__defaults__", (tmp_path,))
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": {"orders": {"partitions": 1}}}')
    run_group = stage_function(RegistryWatcher(topics))
    state = _new_state()
    # two input frames, neither in ingress order: the function sorts before deciding
    frames = iter([_frame([6, 1, 4, 0]), _frame([3, 5, 2])])
    emitted = run_group(("orders", 0), frames, state)

    first = next(emitted)
    assert len(first) == 3 and not state.exists  # a chunk is out before the group is decided, the state is not
    chunks = [first, *emitted]
    assert [len(c) for c in chunks] == [3, 3, 1]
    rows, spools = unspool_rows([DecisionRow(*r) for c in chunks for r in c.itertuples(index=False)])
    assert [r.ingress_offset for r in rows] == list(range(7))
    assert [(r.base_offset, r.last_offset) for r in rows] == [(2 * i, 2 * i + 1) for i in range(7)]
    assert len(spools) == 3  # one spool file per chunk
    log_start, log_end, _last_append, _producers = state.get
    assert (log_start, log_end) == (0, 14)
