"""The sink's work for one task's target partitions (`sinks.partition_task`): accepted batches appended in
offset order and committed once per micro-batch, metric deltas for every row; a replayed micro-batch
stores nothing twice; no directory for a partition that only rejects; a batch that does not continue the
log fails the task; the log's fdatasync ahead of the commit, on its own thread, stores the same bytes and
commit record as the commit alone, and its failure fails the task before anything is committed."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, wait
from pathlib import Path

import pytest

import sinks.partition_task as partition_task
from contract.decision_row import DecisionRow
from kafka_cluster.security import KafkaCluster
from sinks.partition_task import THREADED_COMMIT_ROWS, SinkConfig, append_partition, run_task
from storage.commit_record import read_commit
from storage.file_names import partition_dir
from storage.log_reader import read
from storage.open_logs import OpenLogs
from streaming.stage import IngressBatch, decide_group
from tests.decision_rows import decision_row
from validators.append_result import PartitionState
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000
REGISTRY = TopicRegistry({"orders": topic_config("orders", 3, {}, {})})


def _decided(partition: int, count: int, state: PartitionState | None = None,
             registry: TopicRegistry = REGISTRY) -> list[DecisionRow]:
    """`count` accepted acks=0 batches of `orders-<partition>`, as the stage decides them (after `state`)."""
    items = [
        IngressBatch(ingress_partition=0, ingress_offset=partition * 1000 + i, ingress_timestamp_ms=NOW,
                     batch=build_record_batch([(NOW - 10, b"k%d" % i, b"v" * 50)] * 3), request_id=f"r{partition}-{i}",
                     client_id=None, acks=0, partition_header=str(partition))
        for i in range(count)
    ]
    rows, _ = decide_group("orders", partition, items, registry, state or PartitionState(), NOW)
    assert all(r.error_code == 0 for r in rows)
    return rows


def _config(root: Path) -> SinkConfig:
    # no message is sent (acks=0, nothing rejected): the task never needs this broker
    return SinkConfig(KafkaCluster("127.0.0.1:1"), root, "ingress", "responses", "dlq", 1 << 20)


def test_a_partition_appended_committed_and_counted(tmp_path: Path) -> None:
    rows = _decided(2, 5)
    summary = run_task(_config(tmp_path / "segments"), 7, REGISTRY, [rows], time.perf_counter)
    assert (summary.appended_batches, summary.partitions_appended, summary.responses) == (5, 1, 0)
    assert summary.appended_bytes == sum(len(r.batch) for r in rows)
    stored = read(tmp_path / "segments", "orders", 2, 0, max_records=100)
    assert [r.offset for r in stored] == list(range(15))
    assert {m["p"]: m["batches"] for m in summary.metric_rows} == {2: 5}


def test_a_replayed_micro_batch_writes_nothing_twice(tmp_path: Path) -> None:
    config = _config(tmp_path / "segments")
    run_task(config, 7, REGISTRY, [_decided(1, 4)], time.perf_counter)
    again = run_task(config, 7, REGISTRY, [_decided(1, 4)], time.perf_counter)
    assert (again.appended_batches, again.replayed_partitions) == (0, 1)
    assert len(read(tmp_path / "segments", "orders", 1, 0, max_records=100)) == 12
    assert {m["p"]: m["batches"] for m in again.metric_rows} == {1: 4}  # its rows still count


def test_a_workers_next_micro_batch_appends_to_the_logs_it_kept_open(tmp_path: Path) -> None:
    config = _config(tmp_path / "segments")
    first = run_task(config, 7, REGISTRY, [_decided(0, 2) + _decided(1, 2)], time.perf_counter)
    assert (first.logs_opened, first.logs_kept) == (2, 0)
    rows = _decided(1, 2, PartitionState(log_end_offset=6, last_append_time_ms=NOW))
    second = run_task(config, 8, REGISTRY, [rows], time.perf_counter)
    assert (second.logs_opened, second.logs_kept, second.appended_batches) == (0, 1, 2)
    assert [r.offset for r in read(tmp_path / "segments", "orders", 1, 0, max_records=100)] == list(range(12))


def test_no_rows_no_work(tmp_path: Path) -> None:
    summary = run_task(_config(tmp_path), 1, REGISTRY, [[]], time.perf_counter)
    assert summary.appended_batches == 0 and summary.metric_rows == []


def test_a_partition_that_only_rejects_gets_no_directory(tmp_path: Path) -> None:
    # rejected batches and idempotent duplicates are not stored: such a partition is never opened
    rejected = decision_row(topic="orders", partition=1, error_code=87, error_name="INVALID_RECORD",
                            error_message="bad", base_offset=-1, last_offset=-1)
    duplicate = decision_row(topic="orders", partition=1, duplicate=True)
    assert append_partition(tmp_path / "segments", 3, [rejected, duplicate], REGISTRY) is None
    assert not (tmp_path / "segments").exists()


def test_a_batch_that_does_not_continue_the_log_fails_the_task(tmp_path: Path) -> None:
    rows = _decided(0, 3)
    with pytest.raises(ValueError, match="does not continue the log end offset"):
        run_task(_config(tmp_path / "segments"), 3, REGISTRY, [[rows[0], rows[2], rows[1]]], time.perf_counter)


def test_a_task_of_several_partitions_in_chunks_appends_each_in_order(tmp_path: Path) -> None:
    """Arrow hands a task its rows in chunks that split a partition's run: each partition's batches still land
    in offset order, once, and the task's summary counts every partition."""
    first, second = _decided(0, 5), _decided(2, 4)
    chunks = [first[:2], first[2:] + second[:1], second[1:]]
    summary = run_task(_config(tmp_path / "segments"), 9, REGISTRY, chunks, time.perf_counter)
    assert (summary.partitions, summary.partitions_appended, summary.appended_batches) == (2, 2, 9)
    assert [r.offset for r in read(tmp_path / "segments", "orders", 0, 0, max_records=100)] == list(range(15))
    assert [r.offset for r in read(tmp_path / "segments", "orders", 2, 0, max_records=100)] == list(range(12))
    assert {m["p"]: m["batches"] for m in summary.metric_rows} == {0: 5, 2: 4}


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize("rows", [THREADED_COMMIT_ROWS - 1, THREADED_COMMIT_ROWS, 3 * THREADED_COMMIT_ROWS])
def test_commits_on_the_committer_threads_store_what_inline_commits_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """Several partitions (or one large one) commit on the committer's threads; one small partition inline.
    Either way the same files and commit records."""
    decided = [_decided(p, rows) for p in (0, 1, 2)]
    threads: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        import threading
        threads.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    threaded = run_task(_config(tmp_path / "threaded"), 4, REGISTRY, decided, time.perf_counter)
    on_threads, threads[:] = list(threads), []
    lone = run_task(_config(tmp_path / "lone"), 4, REGISTRY, decided[:1], time.perf_counter)
    assert on_threads and all(t.startswith("gateway-commit") for t in on_threads)
    assert all(t.startswith("gateway-commit") for t in threads) == (rows >= THREADED_COMMIT_ROWS)
    monkeypatch.setattr(partition_task, "THREADED_COMMIT_ROWS", 10**9)
    inline = [run_task(_config(tmp_path / f"inline{p}"), 4, REGISTRY, [d], time.perf_counter)
              for p, d in enumerate(decided)]
    assert threaded.appended_batches == sum(s.appended_batches for s in inline) == 3 * rows
    assert threaded.partitions_appended == 3 and lone.appended_batches == rows
    for p in (0, 1, 2):
        a, b = partition_dir(tmp_path / "threaded", "orders", p), partition_dir(tmp_path / f"inline{p}", "orders", p)
        assert _files(a) == _files(b)
        assert read_commit(a) == read_commit(b) and read_commit(a).log_end_offset == 3 * rows  # type: ignore[union-attr]


def test_a_failed_fdatasync_on_a_commit_thread_fails_the_task_uncommitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path / "segments")
    run_task(config, 1, REGISTRY, [_decided(0, 2)], time.perf_counter)
    directory = partition_dir(tmp_path / "segments", "orders", 0)
    before = read_commit(directory)

    def fdatasync(fd: int) -> None:
        import threading
        if threading.current_thread().name.startswith("gateway-commit"):
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    rows, _ = decide_group("orders", 0, [
        IngressBatch(0, 5000 + i, NOW, build_record_batch([(NOW - 10, b"k", b"v")]), f"x{i}", None, 0, "0")
        for i in range(THREADED_COMMIT_ROWS)
    ], REGISTRY, PartitionState(0, 6, NOW), NOW)
    with pytest.raises(OSError, match="Input/output error"):
        run_task(config, 2, REGISTRY, [rows], time.perf_counter)
    assert read_commit(directory) == before


def test_a_task_keeps_a_bounded_number_of_partitions_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `MAX_OPEN_PARTITIONS` the partitions before a chunk's last are committed while the task goes on
    (their descriptors closed); every partition is still appended once, in order; a partition's rows after its
    early commit fail the task rather than be taken for a replay."""
    monkeypatch.setattr(partition_task, "MAX_OPEN_PARTITIONS", 1)
    monkeypatch.setattr(partition_task, "OPEN_LOGS", OpenLogs(max_logs=0))  # committed logs closed, not kept
    opened: list[int] = []
    real_open = partition_task.PartitionAppend.add

    def counting_add(self: partition_task.PartitionAppend, rows: list[DecisionRow]) -> None:
        real_open(self, rows)
        opened.append(sum(1 for f in os.listdir("/proc/self/fd")))

    monkeypatch.setattr(partition_task.PartitionAppend, "add", counting_add)
    decided = [_decided(p, 3) for p in range(3)]
    chunks = [decided[0] + decided[1][:1], decided[1][1:], decided[2]]
    summary = run_task(_config(tmp_path / "segments"), 3, REGISTRY, chunks, time.perf_counter)
    assert (summary.partitions, summary.partitions_appended, summary.appended_batches) == (3, 3, 9)
    for p in range(3):
        assert [r.offset for r in read(tmp_path / "segments", "orders", p, 0, max_records=100)] == list(range(9))
    assert opened[-1] - opened[0] < 9  # at the last add, two partitions open (the first committed), not three
    with pytest.raises(RuntimeError, match="orders-0: decision rows after the partition was committed"):
        run_task(_config(tmp_path / "again"), 3, REGISTRY, [decided[0], decided[1], decided[0]], time.perf_counter)


def test_partitions_whose_rows_are_in_are_committed_while_the_task_reads_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `EARLY_COMMIT_PARTITIONS` partitions whose rows are all in (all but a chunk's last), their commit starts
    before the next chunk is read; the files and records are those of one commit at the end."""
    registry = TopicRegistry({"orders": topic_config("orders", 6, {}, {})})
    decided = [_decided(p, 2, registry=registry) for p in range(6)]
    chunks = [decided[0] + decided[1] + decided[2][:1], decided[2][1:] + decided[3] + decided[4], decided[5]]
    events: list[str] = []
    flights: list[list[Future]] = []

    def reading(parts: list[list[DecisionRow]]) -> Iterator[list[DecisionRow]]:
        for i, part in enumerate(parts):
            if flights:  # the stage deciding on while the commit runs: done by the time the next rows come
                wait(flights[-1])
            events.append(f"chunk {i}")
            yield part

    real_start = partition_task._EarlyCommits.start

    def start(self: partition_task._EarlyCommits, appends: dict, *rest: object) -> None:
        events.append("commit " + ",".join(str(p) for _t, p in appends))
        real_start(self, appends, *rest)  # type: ignore[arg-type]
        assert self._flight is not None
        flights.append(self._flight[1])

    monkeypatch.setattr(partition_task._EarlyCommits, "start", start)
    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 2)
    early = run_task(_config(tmp_path / "early"), 5, registry, reading(chunks), time.perf_counter)
    assert events == ["chunk 0", "commit 0,1", "chunk 1", "commit 2,3", "chunk 2"]
    events.clear()
    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 10**9)
    at_end = run_task(_config(tmp_path / "at-end"), 5, registry, reading(chunks), time.perf_counter)
    assert events == ["chunk 0", "chunk 1", "chunk 2"]
    assert (early.partitions, early.appended_batches) == (at_end.partitions, at_end.appended_batches) == (6, 12)
    for p in range(6):
        a, b = partition_dir(tmp_path / "early", "orders", p), partition_dir(tmp_path / "at-end", "orders", p)
        assert _files(a) == _files(b) and read_commit(a).batch_id == 5  # type: ignore[union-attr]
    # a task failing while an early commit is in flight: that commit completes, nothing after it is committed
    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 2)
    with pytest.raises(RuntimeError, match="orders-0: decision rows after the partition was committed"):
        run_task(_config(tmp_path / "failed"), 5, registry, reading([chunks[0], decided[0]]), time.perf_counter)
    assert [read_commit(partition_dir(tmp_path / "failed", "orders", p)).batch_id  # type: ignore[union-attr]
            for p in range(3)] == [5, 5, -1]



def test_a_tasks_last_partitions_are_committed_beside_its_early_commit_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the rows are all in, the partitions not yet committed start their commit at once, while the early
    commit of the others is still in flight (its syncs are mostly the filesystem's wait); the responses leave
    only after both."""
    import threading

    registry = TopicRegistry({"orders": topic_config("orders", 4, {}, {})})
    decided = [_decided(p, 2, registry=registry) for p in range(4)]
    final_committed = threading.Event()
    order: list[str] = []
    real_commit = partition_task.PartitionAppend.commit

    def commit(self: partition_task.PartitionAppend) -> object:
        partition = self.appender.partition if self.appender is not None else None
        if partition in (0, 1):  # the early commit: held until the last partitions' commit is done
            order.append(f"early {partition} waits: " + str(final_committed.wait(timeout=10)))
        outcome = real_commit(self)
        if partition in (2, 3):
            order.append(f"final {partition}")
            if all(f"final {p}" in order for p in (2, 3)):
                final_committed.set()
        return outcome

    monkeypatch.setattr(partition_task.PartitionAppend, "commit", commit)
    monkeypatch.setattr(partition_task, "EARLY_COMMIT_PARTITIONS", 2)
    summary = run_task(_config(tmp_path), 5, registry, [decided[0] + decided[1] + decided[2], decided[3]],
                       time.perf_counter)
    assert sorted(order) == ["early 0 waits: True", "early 1 waits: True", "final 2", "final 3"]
    assert (summary.partitions, summary.appended_batches) == (4, 8)
    assert all(read_commit(partition_dir(tmp_path, "orders", p)).batch_id == 5  # type: ignore[union-attr]
               for p in range(4))


def test_a_workers_commit_threads_are_kept_for_its_next_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The threads that run a task's commits are the worker's, kept for its next tasks (a thread made per commit
    cost the task its start); a process forked from the worker makes its own."""
    registry = TopicRegistry({"orders": topic_config("orders", 4, {}, {})})
    names: list[str] = []
    real_commit = partition_task.PartitionAppend.commit

    def commit(self: partition_task.PartitionAppend) -> object:
        names.append(threading.current_thread().name)
        return real_commit(self)

    monkeypatch.setattr(partition_task.PartitionAppend, "commit", commit)
    states = [PartitionState()] * 4
    for batch_id in (1, 2):
        rows: list[DecisionRow] = []
        for p in range(4):
            item = IngressBatch(0, batch_id * 10 + p, NOW, build_record_batch([(NOW - 10, b"k", b"v")]),
                                f"r{batch_id}-{p}", None, 0, str(p))
            decided, states[p] = decide_group("orders", p, [item], registry, states[p], NOW)
            rows += decided
        assert run_task(_config(tmp_path), batch_id, registry, [rows], time.perf_counter).appended_batches == 4
    assert len(names) == 8 and all(n.startswith("gateway-commit") for n in names)
    pool = partition_task._commit_pool()
    assert partition_task._commit_pool() is pool
    assert len({t for t in threading.enumerate() if t.name.startswith("gateway-commit")}) <= partition_task.COMMIT_THREADS
    real_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real_pid + 1)  # as in a forked child
    assert partition_task._commit_pool() is not pool
