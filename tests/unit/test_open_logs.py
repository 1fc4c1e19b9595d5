"""`OpenLogs`: partition logs kept open between micro-batches. A kept log is taken up again only when nothing
changed the partition meanwhile, and then appends exactly what a fresh open would: the same files, byte for byte,
through rolls. Anything else — another writer's commit or uncommitted tail, a pending recovery, other segment
settings, a re-created directory, a log with uncommitted appends — opens the partition afresh, with recovery. The
kept logs hold no lock and stay within their bounds. Every test runs with the logs taken up one by one (`open`)
and together (`resume_many` first, as a sink's task does for a chunk's partitions)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from storage.batch_appender import BatchAppender, append_batches
from storage.commit_record import mark_for_recovery, read_commit_head
from storage.file_names import partition_dir
from storage.log_config import SegmentConfig
from storage.open_logs import OpenLogs
from storage.partition_lock import PartitionBusyError
from storage.partition_log import PartitionLog
from tests.unit.test_append_run import CONFIGS, Item, _files, _micro_batches
from tests.unit.test_segment import T0, make_batch

CONFIG = SegmentConfig()


@pytest.fixture(autouse=True, params=["one by one", "together"])
def taking_up(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "together":
        real_open = OpenLogs.open

        def open_together(self: OpenLogs, root: Path, topic: str, partition: int,
                          config: SegmentConfig | None = None) -> PartitionLog:
            self.resume_many(root, [(topic, partition, config)])
            return real_open(self, root, topic, partition, config)
        monkeypatch.setattr(OpenLogs, "open", open_together)
    return str(request.param)


def _append(logs: OpenLogs | None, root: Path, batch_id: int, items: list[Item],
            config: SegmentConfig = CONFIG, partition: int = 0) -> None:
    with BatchAppender(root, "t", partition, batch_id, config, logs) as appender:
        appender.add(items)
        assert appender.finish() is not None


def _items(base: int, count: int, now: int = T0) -> list[Item]:
    return [(base + i, base + i, make_batch(base + i, [now + i], value=b"v" * 50), now + i) for i in range(count)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_kept_logs_write_the_same_files_as_fresh_opens(tmp_path: Path, name: str) -> None:
    config, several = CONFIGS[name]
    batches = _micro_batches(random.Random(name), 12, several)
    logs = OpenLogs()
    for batch_id, items in enumerate(batches):
        _append(logs, tmp_path / "kept", batch_id, items, config)
        _append(None, tmp_path / "fresh", batch_id, items, config)
        assert _files(tmp_path / "kept") == _files(tmp_path / "fresh")
        assert read_commit_head(partition_dir(tmp_path / "kept", "t", 0)) == read_commit_head(
            partition_dir(tmp_path / "fresh", "t", 0))
    assert (logs.opened, logs.reused) == (1, len(batches) - 1)
    logs.close_all()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_two_workers_taking_turns_write_the_same_files_as_fresh_opens(tmp_path: Path, name: str) -> None:
    """Spark hands a partition's task to either of its Python workers: each keeps its own log, which goes stale
    when the other appends, and is then closed without touching the other's files."""
    config, several = CONFIGS[name]
    batches = _micro_batches(random.Random(name), 12, several)
    workers, turns = (OpenLogs(), OpenLogs()), random.Random(7)
    for batch_id, items in enumerate(batches):
        _append(workers[turns.randint(0, 1)], tmp_path / "kept", batch_id, items, config)
        _append(None, tmp_path / "fresh", batch_id, items, config)
        assert _files(tmp_path / "kept") == _files(tmp_path / "fresh")
    for worker in workers:
        worker.close_all()
    assert _files(tmp_path / "kept") == _files(tmp_path / "fresh")
    assert sum(w.reused for w in workers) > 0 and sum(w.opened for w in workers) > 2


def test_a_kept_log_holds_no_lock(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    assert len(logs) == 1
    with PartitionLog.open(tmp_path, "t", 0, CONFIG, blocking=False) as plog:  # a retention pass gets in
        assert plog.log_end_offset == 3
    logs.close_all()


def test_a_taken_up_log_holds_the_lock(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    plog = logs.open(tmp_path, "t", 0, CONFIG)
    assert logs.reused == 1
    with pytest.raises(PartitionBusyError):
        PartitionLog.open(tmp_path, "t", 0, CONFIG, blocking=False)
    logs.release(plog)
    logs.close_all()


def test_another_writers_commit_opens_the_partition_afresh(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    append_batches(tmp_path, "t", 0, 1, _items(3, 2), CONFIG)  # another worker's micro-batch
    logs.close_all()  # the stale log closed: the other worker's files untouched
    for batch_id, items in enumerate((_items(0, 3), _items(3, 2))):
        append_batches(tmp_path / "fresh", "t", 0, batch_id, items, CONFIG)
    assert _files(tmp_path) == _files(tmp_path / "fresh")
    _append(logs, tmp_path, 2, _items(3 + 2, 2))
    assert read_commit_head(partition_dir(tmp_path, "t", 0)).log_end_offset == 7
    logs.close_all()


def test_another_writers_uncommitted_tail_is_truncated_by_a_fresh_open(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    directory = partition_dir(tmp_path, "t", 0)
    log_file = directory / "00000000000000000000.log"
    committed = log_file.read_bytes()
    with open(log_file, "ab") as f:  # a writer that died before its commit
        f.write(make_batch(3, [T0]))
    _append(logs, tmp_path, 1, _items(3, 1))
    assert (logs.opened, logs.reused) == (2, 0)
    assert log_file.read_bytes() == committed + _items(3, 1)[0][2]
    logs.close_all()


def test_a_pending_recovery_opens_the_partition_afresh(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    mark_for_recovery(partition_dir(tmp_path, "t", 0))
    _append(logs, tmp_path, 1, _items(3, 1))
    assert (logs.opened, logs.reused) == (2, 0)
    logs.close_all()


def test_other_segment_settings_open_the_partition_afresh(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    _append(logs, tmp_path, 1, _items(3, 1), SegmentConfig(segment_bytes=1_000))
    assert (logs.opened, logs.reused) == (2, 0)
    logs.close_all()


def test_a_re_created_partition_never_sees_the_kept_log(tmp_path: Path) -> None:
    logs = OpenLogs()
    _append(logs, tmp_path, 0, _items(0, 3))
    directory = partition_dir(tmp_path, "t", 0)
    for name in os.listdir(directory):  # the topic deleted, and created again
        os.unlink(directory / name)
    os.rmdir(directory)
    _append(logs, tmp_path, 0, _items(0, 1))
    assert (logs.opened, logs.reused) == (2, 0)
    assert read_commit_head(directory).log_end_offset == 1
    logs.close_all()


def test_a_log_with_uncommitted_appends_is_closed_not_kept(tmp_path: Path) -> None:
    logs = OpenLogs()
    with BatchAppender(tmp_path, "t", 0, 0, CONFIG, logs) as appender:
        appender.add(_items(0, 3))  # no finish: the task failed
    assert len(logs) == 0
    _append(logs, tmp_path, 0, _items(0, 3))  # the retry
    assert read_commit_head(partition_dir(tmp_path, "t", 0)).log_end_offset == 3
    logs.close_all()


def test_kept_logs_stay_within_their_count_and_close_the_least_recently_used(tmp_path: Path) -> None:
    logs = OpenLogs(max_logs=2)
    kept = []
    for partition in range(3):
        _append(logs, tmp_path, 0, _items(0, 2), partition=partition)
    assert len(logs) == 2
    for partition in range(3):
        kept.append(logs.open(tmp_path, "t", partition, CONFIG))
    assert (logs.opened, logs.reused) == (4, 2)  # partition 0 was closed when partition 2 came
    for plog in kept:
        logs.release(plog)
    logs.close_all()
    assert len(logs) == 0


def test_kept_logs_stay_within_their_index_bytes(tmp_path: Path) -> None:
    config = SegmentConfig(index_interval_bytes=0)  # an index entry per batch after the first
    logs = OpenLogs(max_index_bytes=150)
    _append(logs, tmp_path, 0, _items(0, 6), config, partition=0)  # 5 entries of 8 and of 12 bytes: 100
    assert len(logs) == 1
    _append(logs, tmp_path, 0, _items(0, 6), config, partition=1)  # 200 with both: the first closed
    assert len(logs) == 1
    plog = logs.open(tmp_path, "t", 1, config)
    assert logs.reused == 1
    logs.release(plog)
    logs.close_all()
    logs.close_all()


def test_no_logs_are_kept_with_a_bound_of_none(tmp_path: Path) -> None:
    logs = OpenLogs(max_logs=0)
    _append(logs, tmp_path, 0, _items(0, 2))
    _append(logs, tmp_path, 1, _items(2, 2))
    assert (len(logs), logs.opened, logs.reused) == (0, 2, 0)


def test_logs_taken_up_together_and_not_opened_are_kept_again(tmp_path: Path) -> None:
    logs = OpenLogs()
    for partition in range(3):
        _append(logs, tmp_path, 0, _items(0, 3), partition=partition)
    logs.resume_many(tmp_path, [("t", p, CONFIG) for p in range(3)] + [("t", 9, CONFIG)])  # 9: never kept
    assert logs.reused == 3 and len(logs) == 0
    with pytest.raises(PartitionBusyError):  # taken up: locked
        PartitionLog.open(tmp_path, "t", 1, CONFIG, blocking=False)
    _append(logs, tmp_path, 1, _items(3, 1), partition=0)  # opened from those taken up
    assert (logs.opened, logs.reused) == (3, 3)
    logs.release_ready()  # a task that failed before opening the others
    assert len(logs) == 3
    with PartitionLog.open(tmp_path, "t", 1, CONFIG, blocking=False) as plog:
        assert plog.log_end_offset == 3
    logs.close_all()
