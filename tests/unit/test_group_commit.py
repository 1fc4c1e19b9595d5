"""Group commit (`storage.group_commit`): many partitions made durable by two syncs of the filesystem,
exactly once through a crash at every step, and a micro-batch's commit that costs the same however many
segments a partition retains (`commit_record`: the record names its segment list, written only on a change)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import recovery
from storage.commit_record import (
    COMMIT_FILE,
    COMMIT_TMP_FILE,
    RECOVERY_MARKER,
    SEGMENT_LIST_PREFIX,
    read_commit,
)
from storage.crash_point import CRASH_ENV
from storage.file_names import partition_dir
from storage.partition_lock import LOCK_FILE

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 10
MICRO_BATCHES = 5


def writer(root: str, micro_batches: int) -> None:
    """Run in a subprocess: `micro_batches` deterministic micro-batches over `PARTITIONS` partitions, each
    committed by one group commit (segments rolling in some partitions)."""
    from storage.batch_appender import BatchAppender
    from storage.group_commit import group_commit
    from storage.log_config import SegmentConfig
    from tests.unit.test_segment import T0, make_batch

    cfg = SegmentConfig(segment_bytes=700, index_interval_bytes=150, segment_index_bytes=240)
    offsets = [0] * PARTITIONS
    outcomes = []
    for mb in range(micro_batches):
        appenders = [BatchAppender(Path(root), "t", p, mb, cfg) for p in range(PARTITIONS)]
        for p, appender in enumerate(appenders):
            items = []
            for j in range(1 + p % 3):
                o = offsets[p]
                data = make_batch(o, [T0 + mb * 100 + j * 10 + k for k in range(3)], value=b"x" * (20 + p + j))
                items.append((o, o + 2, data, T0 + mb * 1000 + j))
                offsets[p] += 3
            appender.add(items)
        group_commit(Path(root), appenders)
        outcomes.append([[o.skipped_replay, o.log_end_offset] for a in appenders if (o := a.outcome())])
        for appender in appenders:
            appender.close()
    print(json.dumps(outcomes))


def run_writer(root: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    code = f"from tests.unit.test_group_commit import writer; writer({str(root)!r}, {MICRO_BATCHES})"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def snapshot(root: Path) -> dict[str, bytes]:
    return {f"{p}/{f.name}": f.read_bytes() for p in range(PARTITIONS)
            for f in sorted(partition_dir(root, "t", p).iterdir()) if f.name != LOCK_FILE}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("reference")
    done = run_writer(root)
    assert done.returncode == 0, done.stderr
    files = snapshot(root)
    assert sum(name.endswith(".log") for name in files) > PARTITIONS, "the workload must roll segments"
    assert not any(name.endswith(RECOVERY_MARKER) for name in files)
    return files


@pytest.mark.parametrize("crash_at", [
    "batch-written:7",  # in the middle of the first micro-batch's appends
    "data-written:13",  # the second micro-batch staged in part: nothing written yet (written together), nothing synced
    "commit-tmp-written:3",  # the third staged and written whole, not synced
    "data-fsynced:3",  # synced, no record renamed yet
    "committed:4",  # every record renamed and synced: the process dies before it returns
])
def test_a_crash_anywhere_in_a_group_commit_then_the_replay_is_byte_identical(
    tmp_path: Path, reference: dict[str, bytes], crash_at: str
) -> None:
    crashed = run_writer(tmp_path, crash_at)
    assert crashed.returncode == 86, crashed.stderr
    committed = [read_commit(partition_dir(tmp_path, "t", p)) for p in range(PARTITIONS)]
    # all or nothing per micro-batch: every partition's record names the same micro-batch
    assert len({c.batch_id if c else -1 for c in committed}) == 1
    resumed = run_writer(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot(tmp_path) == reference


def test_a_commit_reads_and_writes_the_same_however_many_segments_are_retained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the partition is loaded, a micro-batch's open and commit touch the active segment and the record
    only: no older segment's file, no segment list; the record keeps its size as segments are added."""
    from storage.batch_appender import append_batches
    from storage.log_config import SegmentConfig
    from tests.unit.test_segment import T0, make_batch

    cfg = SegmentConfig(segment_bytes=1, index_interval_bytes=0)  # a segment per batch
    directory = partition_dir(tmp_path, "t", 0)
    sizes = []
    for mb in range(40):
        append_batches(tmp_path, "t", 0, mb, [(mb, mb, make_batch(mb, [T0 + mb]), T0 + mb)], cfg)
        sizes.append(len((directory / COMMIT_FILE).read_bytes()))
    assert len(read_commit(directory).segments) == 40  # type: ignore[union-attr]
    assert max(sizes[10:]) - min(sizes[10:]) < 10  # the record does not grow with the segments (digits aside)
    touched: list[str] = []
    real_open, real_size, real_listdir = os.open, recovery._size, os.listdir
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (touched.append(str(path)), real_open(path, *a, **k))[1])
    monkeypatch.setattr(recovery, "_size", lambda path: (touched.append(str(path)), real_size(path))[1])
    monkeypatch.setattr(os, "listdir", lambda path=".": (touched.append(f"listdir {path}"), real_listdir(path))[1])
    no_roll = SegmentConfig(index_interval_bytes=0)
    append_batches(tmp_path, "t", 0, 40, [(40, 40, make_batch(40, [T0 + 40]), T0 + 40)], no_roll)
    last = f"{39:020d}"
    older = [p for p in touched if "listdir" in p or SEGMENT_LIST_PREFIX in p
             or (p.rsplit("/", 1)[-1][:20].isdigit() and not p.rsplit("/", 1)[-1].startswith(last))]
    assert touched and not older
    assert read_commit(directory).log_end_offset == 41  # type: ignore[union-attr]


def test_a_group_commit_only_where_syncfs_makes_everything_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filesystem's type decides (`/proc/self/mounts`); elsewhere (NFS, FUSE, ...) the task's partitions
    commit one by one, to the same committed bytes (the group commit's record carrying the index entries it has
    not written to their files yet)."""
    import time

    from sinks import partition_task
    from storage import group_commit
    from tests.unit.test_partition_task import REGISTRY, _config, _decided

    assert group_commit.filesystem_type(Path("/proc")) == "proc"
    assert not group_commit.group_commit_available(Path("/proc/self"))
    decided = [_decided(p, 4) for p in range(3)]
    monkeypatch.setattr(partition_task, "GROUP_COMMIT_PARTITIONS", 2)
    calls: list[int] = []
    real = partition_task.group_commit
    monkeypatch.setattr(partition_task, "group_commit", lambda root, appenders: (calls.append(len(appenders)),
                                                                                  real(root, appenders))[1])
    partition_task.run_task(_config(tmp_path / "grouped"), 1, REGISTRY, decided, time.perf_counter)
    assert calls == ([3] if group_commit.group_commit_available(tmp_path) else [])
    monkeypatch.setattr(partition_task, "group_commit_available", lambda root: False)
    partition_task.run_task(_config(tmp_path / "alone"), 1, REGISTRY, decided, time.perf_counter)
    assert len(calls) <= 1
    for p in range(3):
        grouped = _committed_files(partition_dir(tmp_path / "grouped", "orders", p))
        assert grouped == _committed_files(partition_dir(tmp_path / "alone", "orders", p))
    tails = read_commit(partition_dir(tmp_path / "grouped", "orders", 0)).segments[-1].tails  # type: ignore[union-attr]
    assert bool(tails[2]) == group_commit.group_commit_available(tmp_path)  # below INDEX_TAIL_LIMIT: in the record


def _committed_files(directory: Path) -> dict[str, object]:
    """A partition's files as readers take them: each index file's committed prefix and the tail its commit record
    carries, the record's state without the tails (the record's tmp file, the previous record, left out)."""
    record = read_commit(directory)
    assert record is not None
    state = record.segments[-1]
    files: dict[str, object] = {f.name: f.read_bytes() for f in directory.iterdir()
                                if f.name not in (LOCK_FILE, COMMIT_FILE, COMMIT_TMP_FILE)}
    for suffix, size, tail in zip((".index", ".timeindex", ".appendtimeindex"), state.sizes[1:], state.tails,
                                  strict=True):
        name = f"{state.base_offset:020d}{suffix}"
        files[name] = files[name][:size - len(tail)] + tail  # type: ignore[index]
    no_tails = dataclasses.replace(state, index_tail=b"", time_index_tail=b"", append_time_index_tail=b"")
    files[COMMIT_FILE] = dataclasses.replace(record, segments=(*record.segments[:-1], no_tails))
    return files


def _durability_events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fsync/fdatasync (by file name), syncfs, and write of appended bytes to a `.log`, in order."""
    import storage.group_commit as group_commit_module
    import storage.segment as segment_module

    events: list[str] = []
    real_fsync, real_fdatasync, real_write_at = os.fsync, os.fdatasync, segment_module.write_at
    real_sync = group_commit_module.sync_filesystem

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(f"fsync {name(fd)}"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "fdatasync", lambda fd: (events.append(f"fsync {name(fd)}"), real_fdatasync(fd))[1])
    monkeypatch.setattr(group_commit_module, "sync_filesystem",
                        lambda root: (events.append("syncfs"), real_sync(root))[1])
    monkeypatch.setattr(segment_module, "write_at",
                        lambda fd, data, at: (events.append(f"write {name(fd)}"), real_write_at(fd, data, at))[1])
    real_write_all = group_commit_module.write_all  # a group commit's writes, all in one call

    def write_all(writes: list[tuple[int, list[bytes], int]], records: list[tuple[str, bytes]]) -> None:
        events.extend(f"write {name(fd)}" for fd, _buffers, _at in writes)
        real_write_all(writes, records)
    monkeypatch.setattr(group_commit_module, "write_all", write_all)
    return events


@pytest.mark.parametrize("batches", [1, 3])
def test_new_partitions_records_are_made_durable_by_one_sync_before_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: int
) -> None:
    """A new partition's first commit record, which tells its uncommitted bytes from a foreign directory's, is
    durable before any of its bytes is written: in a group commit by one syncfs for all new partitions, not two
    fsyncs each, however many batches each takes (a segment's roll check reads its first batch's timestamp)."""
    from storage.batch_appender import BatchAppender
    from storage.group_commit import group_commit
    from storage.log_config import SegmentConfig
    from tests.unit.test_segment import T0, make_batch

    events = _durability_events(monkeypatch)
    appenders = [BatchAppender(tmp_path, "t", p, 0, SegmentConfig()) for p in range(PARTITIONS)]
    for appender in appenders:
        appender.add([(o, o, make_batch(o, [T0 + o]), T0) for o in range(batches)])
    assert not any(e.startswith("write") for e in events)  # appended bytes wait for the commit
    group_commit(tmp_path, appenders)
    for appender in appenders:
        appender.close()
    first_write = next(i for i, e in enumerate(events) if e.startswith("write"))
    assert events[:first_write] == ["syncfs"], events[:first_write]
    assert events.count("syncfs") == 3 and not any(e.startswith("fsync") for e in events), events
    assert all(read_commit(partition_dir(tmp_path, "t", p)).batch_id == 0 for p in range(PARTITIONS))  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["commit", "bytes written before the commit"])
def test_a_new_partitions_record_is_durable_before_its_first_bytes_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Outside a group commit: the record and its directory fsynced before the first write of the `.log`,
    whether that is the commit's or an append's that filled the pending buffer."""
    from storage.log_config import SegmentConfig
    from storage.partition_log import PartitionLog
    from storage.segment import PENDING_LIMIT
    from tests.unit.test_segment import T0, make_batch

    events = _durability_events(monkeypatch)
    with PartitionLog.open(tmp_path, "t", 0, SegmentConfig()) as plog:
        assert plog.record_unsynced and events == []
        value = b"x" * (PENDING_LIMIT if how != "commit" else 10)
        plog.append(make_batch(0, [T0], value=value), T0)
        if how == "commit":
            plog.commit(0)
    first_write = events.index("write 00000000000000000000.log")
    assert events[:first_write] == [f"fsync {COMMIT_FILE}", "fsync t-0"], events
    assert events.count(f"fsync {COMMIT_FILE}") == 1  # the first record once; a commit's own goes through its tmp


@pytest.mark.parametrize("how", ["group commit", "own commit"])
def test_a_rolled_segment_is_made_durable_by_the_commit_that_lists_it_not_by_the_roll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A roll syncs nothing itself (Kafka flushes the old segment off the append path): its bytes are durable
    before the commit record that lists it as inactive, by the group's syncfs or by the partition's own fsyncs,
    so a micro-batch in which many partitions roll costs no fsync per roll."""
    from storage.batch_appender import BatchAppender
    from storage.group_commit import group_commit
    from storage.log_config import SegmentConfig
    from tests.unit.test_segment import T0, make_batch

    cfg = SegmentConfig(segment_bytes=len(make_batch(0, [T0])) + 10)  # one batch a segment: the next rolls
    first = [BatchAppender(tmp_path, "t", p, 0, cfg) for p in range(PARTITIONS)]
    for appender in first:
        appender.add([(0, 0, make_batch(0, [T0]), T0)])
    group_commit(tmp_path, first)
    for appender in first:
        appender.close()
    events = _durability_events(monkeypatch)
    second = [BatchAppender(tmp_path, "t", p, 1, cfg) for p in range(PARTITIONS)]
    for appender in second:
        appender.add([(1, 1, make_batch(1, [T0 + 1]), T0 + 1)])
    assert not any(e.startswith("fsync 0") for e in events), events  # every partition rolled, no segment synced
    if how == "group commit":
        group_commit(tmp_path, second)
        assert not any(e.startswith("fsync 0") for e in events), events
    else:
        for appender in second:
            appender.log.commit(1)
        synced = [e for e in events if e.startswith("fsync 00000000000000000000.")]
        assert sorted(synced) == sorted(f"fsync 00000000000000000000.{s}" for s in
                                        ("log", "index", "timeindex", "appendtimeindex") for _ in range(PARTITIONS))
        records = [i for i, e in enumerate(events) if e == f"fsync {COMMIT_FILE}.tmp"]  # one per partition, in order
        assert len(records) == PARTITIONS
        for k, i in enumerate(records, 1):  # each partition's old segment synced before its record
            assert sum(e.startswith("fsync 00000000000000000000.") for e in events[:i]) == 4 * k, events
    for appender in second:
        appender.close()
    for p in range(PARTITIONS):
        record = read_commit(partition_dir(tmp_path, "t", p))
        assert record is not None and [s.base_offset for s in record.segments] == [0, 1]


def _group_committed(root: Path, logs: object, micro_batch: int, offset: int, config: object) -> int:
    """One group commit of one 3-record batch to each of two partitions of topic `t` (the second one a
    partner: a group commit is for many partitions); returns the next offset."""
    from storage.batch_appender import BatchAppender
    from storage.group_commit import group_commit
    from tests.unit.test_segment import T0, make_batch

    appenders = [BatchAppender(root, "t", p, micro_batch, config, logs) for p in (0, 1)]  # type: ignore[arg-type]
    for appender in appenders:
        appender.add([(offset, offset + 2, make_batch(offset, [T0 + offset + k for k in range(3)]),
                       T0 + 1_000 + micro_batch)])
    group_commit(root, appenders)
    for appender in appenders:
        appender.close()
    return offset + 3


def test_index_entries_a_group_commit_has_not_written_travel_in_its_record(tmp_path: Path) -> None:
    """Below `INDEX_TAIL_LIMIT` bytes an active segment's new index entries stay out of their files and in the
    commit record; readers, `verify` and a writer that reopens the partition (its kept log lost, as in a crash)
    take the record's tail; past the limit they are written. The committed bytes are those of commits made
    one by one."""
    from storage.batch_appender import append_batches
    from storage.index import INDEX_TAIL_LIMIT
    from storage.log_config import SegmentConfig
    from storage.log_reader import PartitionReader
    from storage.open_logs import OpenLogs
    from storage.verify import verify_partition
    from tests.unit.test_segment import T0, make_batch

    config = SegmentConfig(index_interval_bytes=0)  # an offset and a time index entry for every batch
    root, logs = tmp_path / "grouped", OpenLogs()
    directory = partition_dir(root, "t", 0)
    offset = _group_committed(root, logs, 1, _group_committed(root, logs, 0, 0, config), config)
    state = read_commit(directory).segments[-1]  # type: ignore[union-attr]
    assert state.index_tail and state.time_index_tail and state.append_time_index_tail
    assert all((directory / f"{0:020d}{suffix}").stat().st_size == size - len(tail)
               for suffix, size, tail in zip((".index", ".timeindex", ".appendtimeindex"), state.sizes[1:],
                                             state.tails, strict=True))
    assert verify_partition(root, "t", 0, index_interval_bytes=0).ok
    with PartitionReader(root, "t", 0) as reader:
        assert [r.log_append_time for r in reader.read(0)] == [T0 + 1_000] * 3 + [T0 + 1_001] * 3
    for kept, _size in logs._kept.values():  # the writer's kept logs lost, as in a crash: nothing written
        kept.discard()
    logs = OpenLogs()  # a new writer opens the partitions from their files and records
    micro_batch = 2
    while read_commit(directory).segments[-1].append_time_index_tail or micro_batch == 2:  # type: ignore[union-attr]
        offset = _group_committed(root, logs, micro_batch, offset, config)
        micro_batch += 1
    assert micro_batch - 1 >= INDEX_TAIL_LIMIT // 16  # the append-time index written once its tail filled the limit
    assert verify_partition(root, "t", 0, index_interval_bytes=0).ok
    # the same batches committed one partition at a time (no group commit), then both closed: the same files
    alone = tmp_path / "alone"
    for mb, at in enumerate(range(0, offset, 3)):
        append_batches(alone, "t", 0, mb, [(at, at + 2, make_batch(at, [T0 + at + k for k in range(3)]),
                                            T0 + 1_000 + mb)], config)
    for p in (0, 1):  # the kept logs closed: their entries written to their files
        logs.open(root, "t", p, config).close()
    assert _committed_files(directory) == _committed_files(partition_dir(alone, "t", 0))


def test_a_rebuild_of_damaged_indexes_keeps_the_append_times_the_record_carries(tmp_path: Path) -> None:
    """A writer opening a partition whose `.index` is gone rebuilds the offset and time indexes from the log and
    keeps the `.appendtimeindex` as it finds it: the append times the commit record carried go into it first."""
    from storage.log_config import SegmentConfig
    from storage.log_reader import PartitionReader
    from storage.open_logs import OpenLogs
    from storage.partition_log import PartitionLog
    from storage.verify import verify_partition
    from tests.unit.test_segment import T0

    config = SegmentConfig(index_interval_bytes=0)
    logs = OpenLogs()
    _group_committed(tmp_path, logs, 1, _group_committed(tmp_path, logs, 0, 0, config), config)
    for kept, _size in logs._kept.values():  # the writer's kept logs lost, as in a crash: nothing written
        kept.discard()
    directory = partition_dir(tmp_path, "t", 0)
    assert read_commit(directory).segments[-1].append_time_index_tail  # type: ignore[union-attr]
    (directory / f"{0:020d}.index").unlink()
    with PartitionLog.open(tmp_path, "t", 0, config):
        pass
    assert (directory / f"{0:020d}.index").exists()  # rebuilt from the log
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=0).ok
    with PartitionReader(tmp_path, "t", 0) as reader:
        assert [r.log_append_time for r in reader.read(0)] == [T0 + 1_000] * 3 + [T0 + 1_001] * 3
