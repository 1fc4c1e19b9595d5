"""Readers: records as a consumer sees them (+ create and append time), ListOffsets (`UnifiedLog.fetchOffsetByTimestamp`; Kafka's `UnifiedLogTest`)."""

from __future__ import annotations

import json

import pytest

from sinks.__main__ import main
from storage.batch_appender import append_batches
from storage.log_config import SegmentConfig
from storage.log_reader import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsResult,
    OffsetOutOfRangeError,
    PartitionReader,
    offsets_for_times,
    read,
)
from storage.partition_log import PartitionLog
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch

CFG = SegmentConfig(segment_bytes=700, index_interval_bytes=150)


def append(root, batches, batch_id=0, cfg=CFG):
    """batches: (timestamps, lat_time or None, append_time, codec, epoch)"""
    with PartitionLog.open(root, "t", 0, cfg) as plog:
        offset = plog.log_end_offset
    items = []
    for ts, lat, append_time, codec, epoch in batches:
        data = make_batch(offset, ts, lat_time=lat, codec=codec, epoch=epoch)
        items.append((offset, offset + len(ts) - 1, data, append_time))
        offset += len(ts)
    return append_batches(root, "t", 0, batch_id, items, cfg)


def test_read_create_time_and_log_append_time(tmp_path):
    append(tmp_path, [
        ([T0, T0 + 5, T0 + 2], None, T0 + 100, 0, 0),  # CreateTime: append time from the .appendtimeindex
        ([T0 - 50, T0 - 40], T0 + 200, T0 + 200, 0, 0),  # LogAppendTime: header maxTimestamp = append time
    ])
    records = read(tmp_path, "t", 0, 0)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.create_time, r.log_append_time) for r in records] == [
        (0, T0, "CreateTime", T0, T0 + 100),
        (1, T0 + 5, "CreateTime", T0 + 5, T0 + 100),
        (2, T0 + 2, "CreateTime", T0 + 2, T0 + 100),
        (3, T0 + 200, "LogAppendTime", T0 - 50, T0 + 200),
        (4, T0 + 200, "LogAppendTime", T0 - 40, T0 + 200),
    ]
    assert records[0].key == b"k0" and records[0].value == b"value" and records[0].headers == ()
    assert records[0].leader_epoch == 0


def test_a_fetch_at_the_log_end_opens_no_segment(tmp_path):
    """A consumer at the tail (Kafka: an empty slice at the log end offset) costs the commit record alone: the
    active segment is not opened, so even its `.log` gone does not matter there, while a read before the end
    needs it."""
    append(tmp_path, [([T0, T0 + 1], None, T0, 0, 0), ([T0 + 2], None, T0, 0, 0)])
    (log_file,) = (tmp_path / "t-0").glob("*.log")
    log_file.unlink()
    with PartitionReader(tmp_path, "t", 0, append_times=False) as reader:
        assert reader.log_end_offset == 3
        assert reader.read_log(3, 1 << 20, True) == b""
        with pytest.raises(FileNotFoundError):
            reader.read_log(2, 1 << 20, True)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_read_compressed_batches(tmp_path, codec):
    append(tmp_path, [([T0 + i for i in range(7)], None, T0, codec, 0), ([T0 + 9], T0 + 10, T0 + 10, codec, 0)])
    assert [r.offset for r in read(tmp_path, "t", 0, 0)] == list(range(8))
    assert [r.create_time for r in read(tmp_path, "t", 0, 0)][-1] == T0 + 9


def test_read_from_the_middle_of_a_batch_across_segments(tmp_path):
    append(tmp_path, [([T0 + 10 * i + k for k in range(3)], None, T0 + i, 0, 0) for i in range(12)])
    with PartitionReader(tmp_path, "t", 0) as reader:
        assert len(reader.segments) >= 2
        assert [r.offset for r in reader.read(4, 5)] == [4, 5, 6, 7, 8]
        assert [r.offset for r in reader.read(30)] == list(range(30, 36))
        assert list(reader.read(36)) == []
        with pytest.raises(OffsetOutOfRangeError):
            list(reader.read(37))


def test_reader_sees_only_committed_data(tmp_path):
    append(tmp_path, [([T0], None, T0, 0, 0)])
    with PartitionLog.open(tmp_path, "t", 0, CFG) as plog:
        plog.append(make_batch(1, [T0 + 1]), T0 + 1)  # appended, not committed
        assert [r.offset for r in read(tmp_path, "t", 0, 0)] == [0]
        assert offsets_for_times(tmp_path, "t", 0, LATEST_TIMESTAMP).offset == 1
        plog.commit(1)
        assert [r.offset for r in read(tmp_path, "t", 0, 0)] == [0, 1]


def test_find_offset_by_timestamp_includes_leader_epoch(tmp_path):
    """testFetchOffsetByTimestampIncludesLeaderEpoch."""
    t = T0
    append(tmp_path, [([t], None, t, 0, 0), ([t + 1], None, t + 1, 0, 1)])
    assert offsets_for_times(tmp_path, "t", 0, t) == ListOffsetsResult(t, 0, 0)
    assert offsets_for_times(tmp_path, "t", 0, t + 1) == ListOffsetsResult(t + 1, 1, 1)
    assert offsets_for_times(tmp_path, "t", 0, EARLIEST_TIMESTAMP) == ListOffsetsResult(-1, 0, 0)
    assert offsets_for_times(tmp_path, "t", 0, LATEST_TIMESTAMP) == ListOffsetsResult(-1, 2, 1)


def test_empty_log(tmp_path):
    with PartitionLog.open(tmp_path, "t", 0, CFG):
        pass
    assert offsets_for_times(tmp_path, "t", 0, T0) == ListOffsetsResult(-1, -1, None)
    assert offsets_for_times(tmp_path, "t", 0, LATEST_TIMESTAMP) == ListOffsetsResult(-1, 0, None)
    assert offsets_for_times(tmp_path, "t", 0, EARLIEST_TIMESTAMP) == ListOffsetsResult(-1, 0, None)
    assert offsets_for_times(tmp_path, "t", 0, MAX_TIMESTAMP) == ListOffsetsResult(-1, -1, None)
    assert read(tmp_path, "t", 0, 0) == []


def test_max_timestamp_includes_timestamp(tmp_path):
    """testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp: ts t, t+1, t -> (t+1, offset 1)."""
    append(tmp_path, [([T0], None, T0, 0, 0), ([T0 + 1], None, T0, 0, 0), ([T0], None, T0, 0, 0)])
    assert offsets_for_times(tmp_path, "t", 0, MAX_TIMESTAMP) == ListOffsetsResult(T0 + 1, 1, 0)


def test_max_timestamp_is_record_level_and_first_on_ties(tmp_path):
    append(tmp_path, [([T0, T0 + 9, T0 + 3], None, T0, 0, 0), ([T0 + 9], None, T0, 0, 0)])
    assert offsets_for_times(tmp_path, "t", 0, MAX_TIMESTAMP) == ListOffsetsResult(T0 + 9, 1, 0)


def test_lookup_is_first_segment_whose_max_reaches_target(tmp_path):
    """Non-monotonic CreateTime: an earlier segment with max < t is skipped even if a later offset has a
    smaller timestamp; within the chosen segment the first record >= t in offset order."""
    batches = [([T0 + 10 * i], None, T0, 0, 0) for i in range(10)]  # 0..90 increasing
    batches += [([T0 + 5], None, T0, 0, 0), ([T0 + 200], None, T0, 0, 0), ([T0 + 7], None, T0, 0, 0)]
    append(tmp_path, batches)
    assert offsets_for_times(tmp_path, "t", 0, T0 + 35) == ListOffsetsResult(T0 + 40, 4, 0)
    assert offsets_for_times(tmp_path, "t", 0, T0 + 95).offset == 11
    assert offsets_for_times(tmp_path, "t", 0, T0 + 201) == ListOffsetsResult(-1, -1, None)
    assert offsets_for_times(tmp_path, "t", 0, 0).offset == 0


def test_lookup_on_log_append_time_uses_append_time(tmp_path):
    append(tmp_path, [([T0 - 1000], T0 + 10, T0 + 10, 0, 0), ([T0 - 2000, T0 - 1], T0 + 20, T0 + 20, 0, 0)])
    assert offsets_for_times(tmp_path, "t", 0, T0 + 11) == ListOffsetsResult(T0 + 20, 1, 0)
    assert offsets_for_times(tmp_path, "t", 0, MAX_TIMESTAMP) == ListOffsetsResult(T0 + 20, 1, 0)


def test_cli_verify_read_and_offsets(tmp_path, capsys):
    append(tmp_path, [([T0 + i], None, T0 + i, i % 5, 0) for i in range(20)])
    assert verify_partition(tmp_path, "t", 0, CFG.index_interval_bytes).ok
    assert main(["segments", "verify", str(tmp_path), "--index-interval-bytes", "150"]) == 0
    capsys.readouterr()
    assert main(["segments", "read", str(tmp_path), "t", "0", "--offset", "18", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["offset"], r["createTime"], r["logAppendTime"]) for r in rows] == [(18, T0 + 18, T0 + 18), (19, T0 + 19, T0 + 19)]
    assert main(["segments", "offsets-for-times", str(tmp_path), "t", "0", str(T0 + 7), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offset"] == 7
    assert main(["segments", "offsets-for-times", str(tmp_path), "t", "0", "max-timestamp"]) == 0
    assert "19" in capsys.readouterr().out
    assert main(["segments", "dump", str(tmp_path), "t", "0", "--deep", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sum(len(s["batches"]) for s in doc["segments"]) == 20
    assert main(["segments", "dump", str(tmp_path), "t", "0"]) == 0
    assert "offset" in capsys.readouterr().out


def test_verify_reports_damage(tmp_path, capsys):
    append(tmp_path, [([T0 + i], None, T0 + i, 0, 0) for i in range(10)])
    index = next(tmp_path.glob("t-0/*.timeindex"))
    data = bytearray(index.read_bytes())
    data[7] ^= 0x01  # a timestamp that does not match its batch
    index.write_bytes(bytes(data))
    report = verify_partition(tmp_path, "t", 0)
    assert not report.ok and any("timestamp" in p for p in report.problems)
    assert main(["segments", "verify", str(tmp_path), "t", "0"]) == 1
