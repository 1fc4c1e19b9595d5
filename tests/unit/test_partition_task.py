"""The sink's task (`sinks.partition_task`) appends each target partition's decisions as they arrive:
every partition appended once, in offset order, spool files removed at the end, metric deltas for all;
no directory for a partition that only rejects; decisions of a partition that are not contiguous are
refused rather than appended twice in one micro-batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.decision_row import DecisionRow
from sinks.batch_spool import Unspooler, spool_rows
from sinks.partition_task import SinkConfig, append_partition, run_partition_task, target_groups
from sinks.storage.log_reader import read
from streaming.stage import IngressBatch, decide_group
from tests.decision_rows import decision_row
from validators.append_result import PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000
REGISTRY = TopicRegistry({"orders": topic_config("orders", 3, {}, {})})


def _decided(partition: int, count: int, spool: Path) -> list[DecisionRow]:
    """`count` accepted acks=0 batches of `orders-<partition>`, spooled as the stage leaves them."""
    items = [
        IngressBatch(ingress_partition=0, ingress_offset=partition * 1000 + i, ingress_timestamp_ms=NOW,
                     batch=build_record_batch([(NOW - 10, b"k%d" % i, b"v" * 50)] * 3), request_id=f"r{partition}-{i}",
                     client_id=None, acks=0, partition_header=str(partition))
        for i in range(count)
    ]
    rows, _ = decide_group("orders", partition, items, REGISTRY, PartitionState(), NOW)
    assert all(r.error_code == 0 for r in rows)
    return spool_rows(rows, f"orders-{partition}", spool)


def _config(root: Path) -> SinkConfig:
    # no message is sent (acks=0, nothing rejected): the task never needs this broker
    return SinkConfig("127.0.0.1:1", root, "ingress", "responses", "dlq", 1 << 20)


def test_target_groups_one_list_per_partition_in_arrival_order() -> None:
    rows = [decision_row(topic=t, partition=p, base_offset=o) for t, p, o in
            [("a", 0, 0), ("a", 0, 3), ("a", 1, 0), ("b", 0, 0), (None, None, -1), (None, None, -1)]]
    groups = [[(r.topic, r.partition, r.base_offset) for r in g] for g in target_groups(iter(rows))]
    assert groups == [
        [("a", 0, 0), ("a", 0, 3)], [("a", 1, 0)], [("b", 0, 0)], [(None, None, -1), (None, None, -1)]]


def test_target_groups_refuses_a_partition_seen_again() -> None:
    rows = [decision_row(topic="a", partition=0), decision_row(topic="a", partition=1),
            decision_row(topic="a", partition=0)]
    groups = target_groups(iter(rows))
    assert len(list(next(groups))) == 1
    assert len(list(next(groups))) == 1
    with pytest.raises(ValueError, match="decisions for a-0 are not contiguous"):
        next(groups)


def test_each_partition_appended_then_spools_removed(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    rows = _decided(0, 5, spool) + _decided(2, 3, spool)
    assert len(list(spool.iterdir())) == 2
    summary = run_partition_task(_config(tmp_path / "segments"), 7, iter(rows), REGISTRY, time.perf_counter)
    assert (summary.appended_batches, summary.partitions_appended, summary.responses) == (8, 2, 0)
    for partition, count in ((0, 5), (2, 3)):
        stored = read(tmp_path / "segments", "orders", partition, 0, max_records=100)
        assert [r.offset for r in stored] == list(range(3 * count))
    assert list(spool.iterdir()) == []
    by_partition = {m["p"]: m["batches"] for m in summary.metric_rows}
    assert by_partition == {0: 5, 2: 3}


def test_a_replayed_task_writes_nothing_twice(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    config = _config(tmp_path / "segments")
    run_partition_task(config, 7, iter(_decided(1, 4, spool)), REGISTRY, time.perf_counter)
    again = run_partition_task(config, 7, iter(_decided(1, 4, spool)), REGISTRY, time.perf_counter)
    assert (again.appended_batches, again.replayed_partitions) == (0, 1)
    assert len(read(tmp_path / "segments", "orders", 1, 0, max_records=100)) == 12


def test_no_rows_no_work(tmp_path: Path) -> None:
    summary = run_partition_task(_config(tmp_path), 1, iter([]), REGISTRY, time.perf_counter)
    assert summary.appended_batches == 0 and summary.metric_rows == []


def test_a_partition_is_appended_while_its_decisions_arrive(tmp_path: Path) -> None:
    # the task asks for the next decision only after it has taken the one before: the first partition's
    # bytes were read and written (and the second partition's first batch read) before the last row came
    spool = tmp_path / "spool"
    rows = _decided(0, 4, spool) + _decided(1, 2, spool)
    taken: list[int] = []

    def arriving() -> Iterator[DecisionRow]:
        for i, row in enumerate(rows):
            taken.append(i)
            yield row

    summary = run_partition_task(_config(tmp_path / "segments"), 3, arriving(), REGISTRY, time.perf_counter)
    assert taken == list(range(6)) and summary.appended_batches == 6
    assert len(read(tmp_path / "segments", "orders", 0, 0, max_records=100)) == 12


def test_a_partition_that_only_rejects_gets_no_directory(tmp_path: Path) -> None:
    # rejected batches and idempotent duplicates are not stored: such a partition is never opened
    rejected = decision_row(topic="orders", partition=1, error_code=87, error_name="INVALID_RECORD",
                            error_message="bad", base_offset=-1, last_offset=-1)
    duplicate = decision_row(topic="orders", partition=1, duplicate=True)
    with Unspooler() as unspooler:
        rows, outcome, _ = append_partition(tmp_path / "segments", 3, iter([rejected, duplicate]), REGISTRY,
                                            unspooler, time.perf_counter)
    assert rows == [rejected, duplicate] and outcome is None
    assert not (tmp_path / "segments").exists()


def test_a_batch_that_does_not_continue_the_log_fails_the_task(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    rows = _decided(0, 3, spool)
    with pytest.raises(ValueError, match="does not continue the log end offset"):
        run_partition_task(_config(tmp_path / "segments"), 3, iter([rows[0], rows[2], rows[1]]), REGISTRY,
                           time.perf_counter)


def test_batches_copied_from_the_spool_store_the_same_files_as_batches_in_memory(tmp_path: Path) -> None:
    spooled = _decided(1, 40, tmp_path / "spool")
    with Unspooler() as unspooler:
        in_memory = [unspooler.read(r) for r in spooled]
    assert all(r.batch and r.spool is None for r in in_memory)
    for name, rows in (("copied", spooled), ("written", in_memory)):
        summary = run_partition_task(_config(tmp_path / name), 3, iter(rows), REGISTRY, time.perf_counter)
        assert summary.appended_bytes == sum(len(r.batch or b"") for r in in_memory)
    copied, written = tmp_path / "copied" / "orders-1", tmp_path / "written" / "orders-1"
    names = sorted(p.name for p in copied.iterdir())
    assert names == sorted(p.name for p in written.iterdir()) and any(n.endswith(".log") for n in names)
    for name in names:
        assert (copied / name).read_bytes() == (written / name).read_bytes(), name
