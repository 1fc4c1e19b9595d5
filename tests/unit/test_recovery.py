"""Recovery at open (Kafka's `LogLoader`, `LogSegment.recover`, named after LogLoaderTest's) and the check against the Spark state."""

from __future__ import annotations

import json

import pytest

from storage.batch_appender import append_batches
from storage.commit_record import COMMIT_FILE, read_commit
from storage.errors import KafkaStorageError
from storage.file_names import partition_dir, segment_bases, segment_file_name
from storage.log_config import SegmentConfig
from storage.log_reader import read
from storage.partition_log import PartitionLog
from storage.recovery import LogStateMismatchError, StorageCorruptionError, check_log_end_offset
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch

CFG = SegmentConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=400)


def fill(root, n_batches: int, batch_id: int = 0, start: int = 0):
    items = [(o, o, make_batch(o, [T0 + o]), T0 + o) for o in range(start, start + n_batches)]
    return append_batches(root, "t", 0, batch_id, items, CFG)


def log_files(root):
    return partition_dir(root, "t", 0)


def test_recover_with_empty_active_segment_and_new_partition(tmp_path):
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 0
        assert plog.commit_record.batch_id == -1  # an empty commit record is written first
    assert read_commit(log_files(tmp_path)).segments == ()


def test_index_rebuild_and_corrupt_log_without_commit_record(tmp_path):
    """testLogRecoveryIsCalledUponBrokerCrash / testCorruptLog: no commit record, torn tail of garbage."""
    fill(tmp_path, 30)
    d = log_files(tmp_path)
    bases = segment_bases(d)
    assert len(bases) > 2
    (d / COMMIT_FILE).unlink()
    active = d / segment_file_name(bases[-1])
    good_size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(make_batch(30, [T0])[:40])  # a partial batch
    (d / segment_file_name(bases[-1], ".index")).unlink()  # missing offset index: rebuilt
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 30
        assert plog.recovered_bytes == 40
        assert plog.commit_record.batch_id == -1
    assert active.stat().st_size == good_size
    assert verify_partition(tmp_path, "t", 0, CFG.index_interval_bytes).ok


@pytest.mark.parametrize("damage", ["crc", "offset-order", "size-field"])
def test_truncate_at_first_invalid_batch(tmp_path, damage):
    fill(tmp_path, 8)
    d = log_files(tmp_path)
    (d / COMMIT_FILE).unlink()
    path = d / segment_file_name(0)
    data = bytearray(path.read_bytes())
    size = len(make_batch(0, [T0]))
    at = 5 * size  # batch of offset 5
    if damage == "crc":
        data[at + 70] ^= 0xFF
    elif damage == "offset-order":
        data[at : at + 8] = (3).to_bytes(8, "big")  # baseOffset outside the CRC: goes backwards
    else:
        data[at + 8 : at + 12] = (5).to_bytes(4, "big")  # size field below 14
    path.write_bytes(bytes(data))
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 5
        assert plog.recovered_bytes == 3 * size
    assert [r.offset for r in read(tmp_path, "t", 0, 0, 100)] == [0, 1, 2, 3, 4]


def test_corrupt_index_in_inactive_segment_is_rebuilt(tmp_path):
    """testCorruptIndexRebuild: a corrupt index of an old segment is rebuilt, the log untouched."""
    fill(tmp_path, 30)
    d = log_files(tmp_path)
    (d / COMMIT_FILE).unlink()
    first_index = d / segment_file_name(0, ".index")
    original = first_index.read_bytes()
    assert original
    first_index.write_bytes(original + b"\x00" * 3)  # not a multiple of 8
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 30
    assert first_index.read_bytes() == original


def test_bogus_index_segments_are_removed(tmp_path):
    """testBogusIndexSegmentsAreRemoved: orphan index files (no .log) are deleted."""
    fill(tmp_path, 3)
    d = log_files(tmp_path)
    for suffix in (".index", ".timeindex", ".appendtimeindex"):
        (d / segment_file_name(500, suffix)).write_bytes(b"\x00" * 16)
    with PartitionLog.open(tmp_path, "t", 0, CFG):
        pass
    assert not any(p.name.startswith(segment_file_name(500, "")) for p in d.iterdir())


def test_files_longer_than_commit_are_cut_back(tmp_path):
    fill(tmp_path, 4)
    d = log_files(tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix != ".lock"}
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:  # appended but never committed
        for o in range(4, 12):
            plog.append(make_batch(o, [T0 + o]), T0 + o)
    assert len(segment_bases(d)) > 1
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 4
        assert plog.recovered_bytes > 0
    after = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix != ".lock"}
    assert after == before


def test_committed_data_lost_is_an_error(tmp_path):
    fill(tmp_path, 4)
    path = log_files(tmp_path) / segment_file_name(0)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(StorageCorruptionError, match="Committed data is lost"):
        PartitionLog.open(tmp_path, "t", 0, CFG)


def test_short_index_against_commit_is_rebuilt(tmp_path):
    fill(tmp_path, 12)
    d = log_files(tmp_path)
    commit = read_commit(d)
    first = commit.segments[0]
    assert first.index_size > 0
    (d / segment_file_name(0, ".index")).write_bytes(b"")
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.commit_record.record(d).segments[0].index_size == first.index_size
    assert verify_partition(tmp_path, "t", 0, CFG.index_interval_bytes).ok


def test_commit_record_of_another_format_is_a_clear_error(tmp_path):
    d = log_files(tmp_path)
    d.mkdir(parents=True)
    (d / segment_file_name(0)).write_bytes(make_batch(0, [T0]))
    (d / COMMIT_FILE).write_text(json.dumps({"batch_id": 7, "log_end_offset": 1, "log_size": 10}))
    with pytest.raises(KafkaStorageError, match=f"{COMMIT_FILE}: not a valid commit record.*format None"):
        fill(tmp_path, 2, batch_id=8, start=1)


def check_partition(root, topic: str, partition: int, expected_log_end_offset: int, batch_id: int) -> None:
    directory = partition_dir(root, topic, partition)
    check_log_end_offset(directory, read_commit(directory), expected_log_end_offset, batch_id)


def test_state_check_storage_ahead(tmp_path):
    fill(tmp_path, 5, batch_id=3)
    with pytest.raises(LogStateMismatchError, match="ahead of the Spark state") as e:
        fill(tmp_path, 2, batch_id=4, start=2)
    assert "--to 2" in str(e.value) and "offsets [2, 5)" in str(e.value)
    check_partition(tmp_path, "t", 0, 5, 4)  # what a consistent state passes


def test_state_check_storage_behind(tmp_path):
    fill(tmp_path, 2, batch_id=0)
    with pytest.raises(LogStateMismatchError, match="behind the Spark state"):
        fill(tmp_path, 2, batch_id=1, start=6)
    with pytest.raises(LogStateMismatchError, match="Storage ends at offset 0"):
        check_partition(tmp_path, "u", 0, 10, 3)


def test_truncate_command_reconciles(tmp_path):
    from sinks.__main__ import main

    fill(tmp_path, 20, batch_id=3)
    assert len(segment_bases(log_files(tmp_path))) > 2
    assert main(["segments", "truncate", str(tmp_path), "t", "0", "--to", "4"]) == 2  # refused without --yes
    assert main(["segments", "truncate", str(tmp_path), "t", "0", "--to", "4", "--yes"]) == 0
    assert read_commit(log_files(tmp_path)).log_end_offset == 4
    assert segment_bases(log_files(tmp_path)) == [0]
    assert fill(tmp_path, 2, batch_id=4, start=4).log_end_offset == 6
    assert verify_partition(tmp_path, "t", 0, CFG.index_interval_bytes).ok


def test_an_open_checks_only_the_segments_a_micro_batch_can_have_touched(tmp_path, monkeypatch):
    """Every micro-batch opens the partition: the inactive segments this process found as committed are not
    checked again (a failed micro-batch can only have appended to the last committed segment and rolled past
    it), and what such a failure left is still cut back to the commit exactly."""
    from storage import recovery

    for mb in range(4):
        fill(tmp_path, 6, batch_id=mb, start=6 * mb)
    d = log_files(tmp_path)
    committed = read_commit(d)
    assert len(committed.segments) >= 3
    monkeypatch.setattr(recovery, "_LOADED", set())  # as a new worker process starts
    with PartitionLog.open(tmp_path, "t", 0, CFG):  # this process checks every committed segment once
        pass
    sized: list[str] = []
    real_size = recovery._size

    def counting_size(path: str) -> int:
        sized.append(path)
        return real_size(path)

    monkeypatch.setattr(recovery, "_size", counting_size)
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix != ".lock"}
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:  # a micro-batch that fails after rolling twice
        for o in range(24, 40):
            plog.append(make_batch(o, [T0 + o]), T0 + o)
    sized.clear()
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        assert plog.log_end_offset == 24 and plog.recovered_bytes > 0
    last = segment_file_name(committed.segments[-1].base_offset, "")
    assert sized and all(last in path for path in sized)  # the last committed segment's four files only
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.suffix != ".lock"} == before


def test_a_new_process_checks_every_committed_segment_again(tmp_path, monkeypatch):
    from storage import recovery

    for mb in range(3):
        fill(tmp_path, 6, batch_id=mb, start=6 * mb)
    with PartitionLog.open(tmp_path, "t", 0, CFG):
        pass
    first_log = log_files(tmp_path) / segment_file_name(0)
    first_log.write_bytes(first_log.read_bytes()[:-10])  # an inactive segment loses committed bytes
    monkeypatch.setattr(recovery, "_VERIFIED_INACTIVE", set())  # what a new worker process starts with
    monkeypatch.setattr(recovery, "_LOADED", set())
    with pytest.raises(StorageCorruptionError, match=f"{segment_file_name(0)} has .* Committed data is lost"):
        PartitionLog.open(tmp_path, "t", 0, CFG)
