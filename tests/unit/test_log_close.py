"""The active segment across micro-batch commits and a clean close (`LogSegment.append`; `LogSegment.shouldRoll`).

Kafka writes a segment's final time-index entry `(maxTimestampSoFar, offset)` only when the segment rolls
or the log is closed; an uninterrupted broker never writes it at an arbitrary append. The gateway commits
every micro-batch but writes it only at a roll or at `close_logs` (a clean stop).
"""

from __future__ import annotations

import pytest

from storage.batch_appender import append_batches
from storage.commit_record import read_commit
from storage.file_names import partition_dir, segment_file_name
from storage.log_config import SegmentConfig
from storage.log_manager import close_logs
from storage.log_reader import MAX_TIMESTAMP, offsets_for_times
from storage.partition_log import PartitionLog
from storage.time_index import TimeIndex
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch
from validators.topic_config import TopicConfig, TopicRegistry

CFG = SegmentConfig(segment_bytes=1 << 20, index_interval_bytes=300)


def micro_batch(root, batch_id: int, start: int, count: int) -> None:
    """`count` 2-record batches with growing timestamps, appended and committed as one micro-batch."""
    items = []
    for i in range(start, start + count):
        items.append((2 * i, 2 * i + 1, make_batch(2 * i, [T0 + 10 * i, T0 + 10 * i + 5]), T0 + 1000 + i))
    append_batches(root, "t", 0, batch_id, items, CFG)


def time_entries(root) -> list[tuple[int, int]]:
    path = partition_dir(root, "t", 0) / segment_file_name(0, ".timeindex")
    return [(e.timestamp, e.offset) for e in TimeIndex(path, 0, writable=False).all_entries()]


def test_commits_add_no_final_time_index_entry(tmp_path):
    micro_batch(tmp_path, 0, 0, 7)
    micro_batch(tmp_path, 1, 7, 5)
    entries = time_entries(tmp_path)
    assert entries, "index.interval.bytes 300: regular entries"
    assert entries[-1] != (T0 + 10 * 11 + 5, 23), "the last batch got no entry of its own"
    # the segment's max timestamp is kept in the commit record, and readers use it
    state = read_commit(partition_dir(tmp_path, "t", 0)).segments[-1]
    assert (state.max_timestamp, state.max_timestamp_offset) == (T0 + 115, 23)
    assert offsets_for_times(tmp_path, "t", 0, MAX_TIMESTAMP).offset == 23
    assert offsets_for_times(tmp_path, "t", 0, T0 + 112).offset == 23
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=300).ok


def test_one_micro_batch_or_many_give_the_same_time_index(tmp_path):
    micro_batch(tmp_path / "one", 0, 0, 12)
    for batch_id, (start, count) in enumerate([(0, 3), (3, 1), (4, 5), (9, 3)]):
        micro_batch(tmp_path / "many", batch_id, start, count)
    assert time_entries(tmp_path / "many") == time_entries(tmp_path / "one")


def test_close_logs_writes_the_final_entry_and_appends_continue(tmp_path):
    micro_batch(tmp_path, 0, 0, 7)
    before = time_entries(tmp_path)
    registry = TopicRegistry({"t": TopicConfig(name="t", partitions=2, index_interval_bytes=300)})
    assert close_logs(tmp_path, registry) == 1  # partition 1 has no directory
    assert time_entries(tmp_path) == [*before, (T0 + 65, 13)]
    commit = read_commit(partition_dir(tmp_path, "t", 0))
    assert commit.batch_id == 0 and commit.segments[-1].time_index_size == 12 * (len(before) + 1)
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=300).ok
    assert close_logs(tmp_path, registry) == 1 and time_entries(tmp_path) == [*before, (T0 + 65, 13)]
    micro_batch(tmp_path, 1, 7, 3)  # a restarted gateway appends after the closed log, as Kafka does
    assert time_entries(tmp_path)[: len(before) + 1] == [*before, (T0 + 65, 13)]
    assert verify_partition(tmp_path, "t", 0, index_interval_bytes=300).ok


def test_close_refuses_uncommitted_appends(tmp_path):
    micro_batch(tmp_path, 0, 0, 2)
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        plog.append(make_batch(4, [T0 + 100]), T0 + 2000)
        with pytest.raises(ValueError, match="uncommitted appends"):
            plog.close_cleanly()
