"""Proof that segment storage is Kafka's format: Apache Kafka's own `kafka.tools.DumpLogSegments` reads
every file the gateway wrote without an error, and reports the same offsets, timestamps and timestamp
types as the gateway's reader (docs/design.md: segment storage). Batches are built by kafka-python (an independent codec),
compressed with every codec, under both timestamp types, rolled several times, indexed densely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from embedded.local_kafka import run_kafka_tool
from storage.batch_appender import append_batches
from storage.file_names import partition_dir, segment_bases
from storage.log_config import SegmentConfig
from storage.log_reader import read
from storage.partition_log import PartitionLog
from validators.codec.record_batch import TimestampType, assign_offsets_and_timestamp

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
DUMP = "kafka.tools.DumpLogSegments"
CFG = SegmentConfig(segment_bytes=3000, index_interval_bytes=200, segment_index_bytes=4096)
# Kafka's error reports (DumpLogSegments.scala): index mismatches, time index problems, offset gaps,
# trailing garbage, invalid batches
ERROR_PATTERNS = ("Mismatches", "mismatch", "out of order", "not found", "Non-consecutive", "invalid bytes",
                  "isvalid: false", "Exception", "Error", "corrupt")

_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) (CreateTime|LogAppendTime): "
                    r"(-?\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (\w+)")
_RECORD = re.compile(r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+)")


def build(base_offset: int, timestamps: list[int], codec: int, lat_time: int | None, tag: str) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, ts in enumerate(timestamps):
        builder.append(i, ts, f"{tag}-k{i}".encode(), f"{tag}-value-{i}-".encode() * 4, [("h", b"x")])
    raw = bytes(builder.build())
    if lat_time is not None:
        return assign_offsets_and_timestamp(raw, base_offset, TimestampType.LOG_APPEND_TIME, lat_time, 0)
    return assign_offsets_and_timestamp(raw, base_offset, TimestampType.CREATE_TIME, max(timestamps), 0)


def write_partition(root: Path, topic: str, lat: bool, micro_batches: int = 12) -> None:
    offset = 0
    for mb in range(micro_batches):
        items = []
        for j in range(5):
            n = 1 + (mb + j) % 6
            # CreateTimes go up and down (non-monotonic) so the time index skips equal/smaller ones
            ts = [T0 + mb * 500 + ((j * 37 + k * 11) % 90) for k in range(n)]
            if (mb + j) % 7 == 3:
                ts = [-1] * n  # records without timestamp
            append_time = T0 + 10_000 + mb * 1000 + j
            data = build(offset, ts, codec=j % 5, lat_time=append_time if lat else None, tag=f"{mb}.{j}")
            items.append((offset, offset + n - 1, data, append_time))
            offset += n
        append_batches(root, topic, 0, mb, items, CFG)


def dump(files: list[Path], *extra: str) -> str:
    done = run_kafka_tool(DUMP, [*extra, "--files", ",".join(str(f) for f in files)], timeout=180)
    assert done.returncode == 0, done.stderr
    errors = [line for line in (done.stdout + "\n" + done.stderr).splitlines() if any(p in line for p in ERROR_PATTERNS)]
    assert errors == [], "\n".join(errors[:20])
    return done.stdout


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("segments")
    write_partition(root, "ct", lat=False)
    write_partition(root, "lat", lat=True)
    return root


@pytest.mark.parametrize("topic", ["ct", "lat"])
def test_log_files_dump_without_errors_and_match_reader(storage, topic):
    d = partition_dir(storage, topic, 0)
    bases = segment_bases(d)
    assert len(bases) >= 3, "several rolls"
    out = dump([d / f"{b:020d}.log" for b in bases], "--deep-iteration", "--print-data-log")
    batches = [m.groups() for m in map(_BATCH.match, out.splitlines()) if m]
    records = [m.groups() for m in map(_RECORD.match, out.splitlines()) if m]
    assert batches and all(b[9] == "true" for b in batches)
    assert {b[7] for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
    expected_type = "LogAppendTime" if topic == "lat" else "CreateTime"
    assert {b[4] for b in batches} == {expected_type}
    ours = read(storage, topic, 0, 0, max_records=10**6)
    assert [(int(o), t, int(ts)) for o, t, ts, _k, _v in records] == [
        (r.offset, r.timestamp_type, r.timestamp) for r in ours
    ]
    assert [int(o) for o, *_ in records] == list(range(len(records)))  # consecutive, no gaps


@pytest.mark.parametrize("topic", ["ct", "lat"])
def test_index_files_verify_and_dump(storage, topic):
    d = partition_dir(storage, topic, 0)
    bases = segment_bases(d)
    indexes = [d / f"{b:020d}{s}" for b in bases for s in (".index", ".timeindex")]
    dump(indexes, "--verify-index-only")
    sanity = dump(indexes, "--index-sanity-check")
    assert sanity.count("passed sanity check") == len(indexes)
    out = dump(indexes)
    printed_offsets = [tuple(map(int, m.groups())) for m in re.finditer(r"^offset: (\d+) position: (\d+)$", out, re.M)]
    printed_times = [tuple(map(int, m.groups())) for m in re.finditer(r"^timestamp: (-?\d+) offset: (\d+)$", out, re.M)]
    from storage.offset_index import OffsetIndex
    from storage.time_index import TimeIndex

    ours_offsets = [(e.offset, e.position) for b in bases
                    for e in OffsetIndex(d / f"{b:020d}.index", b, writable=False).all_entries()]
    ours_times = [(e.timestamp, e.offset) for b in bases
                  for e in TimeIndex(d / f"{b:020d}.timeindex", b, writable=False).all_entries()]
    assert len(ours_offsets) > 3 * len(bases), "small index.interval.bytes: many entries"
    assert printed_offsets == ours_offsets
    assert printed_times == ours_times


def test_active_index_files_hold_their_entries_only(tmp_path):
    """Kafka preallocates the active segment's index files with zeros because it maps them into memory, and its
    own sanity check rejects such a time index (the zero tail is 'smaller than the first timestamp': why a broker
    rebuilds the active segment's indexes after an unclean shutdown). The gateway's indexes are not mapped: their
    files hold only the entries written, so DumpLogSegments' verification and Kafka's sanity check pass while the
    segment is appended to, and after the commit the files are what Kafka trims them to on close."""
    plog = PartitionLog.open(tmp_path, "t", 0, CFG)
    try:
        for i in range(0, 40, 4):
            plog.append(build(i, [T0 + i + k for k in range(4)], 0, None, "a"), T0 + i)
        d = partition_dir(tmp_path, "t", 0)
        index, timeindex = d / f"{0:020d}.index", d / f"{0:020d}.timeindex"
        plog.active.flush()
        assert index.stat().st_size == plog.active.offset_index.entries * 8 > 0
        assert timeindex.stat().st_size == plog.active.time_index.entries * 12 > 0
        dump([index, timeindex], "--verify-index-only")
        assert dump([index, timeindex], "--index-sanity-check").count("passed sanity check") == 2
        plog.commit(0)
    finally:
        plog.close()
    assert index.stat().st_size < CFG.segment_index_bytes
    dump([index, timeindex], "--verify-index-only")
    assert dump([index, timeindex], "--index-sanity-check").count("passed sanity check") == 2
    dump([d / f"{0:020d}.log"], "--deep-iteration")
