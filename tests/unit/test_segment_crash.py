"""Exactly-once append: a writer subprocess is killed (`os._exit`) at chosen steps, then the same
micro-batches are replayed; the partition must end byte-identical to an uninterrupted run (docs/design.md: the query)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.commit_record import COMMIT_FILE, SEGMENT_LIST_PREFIX, read_commit, segment_list_name
from storage.crash_point import CRASH_ENV
from storage.file_names import partition_dir, segment_bases
from storage.partition_lock import LOCK_FILE

REPO = Path(__file__).resolve().parents[2]
MICRO_BATCHES = 6


def writer(root: str, micro_batches: int) -> None:
    """Run in a subprocess: append `micro_batches` deterministic micro-batches (rolling segments)."""
    from storage.batch_appender import append_batches
    from storage.log_config import SegmentConfig
    from tests.unit.test_segment import T0, make_batch

    cfg = SegmentConfig(segment_bytes=900, index_interval_bytes=150, segment_index_bytes=240)
    offset = 0
    outcomes = []
    for mb in range(micro_batches):
        items = []
        for j in range(3):
            ts = [T0 + mb * 100 + j * 10 + k for k in range(4)]
            lat = T0 + mb * 1000 + j if (mb + j) % 2 else None
            # gzip output embeds a timestamp: only deterministic codecs here
            data = make_batch(offset, ts, lat_time=lat, codec=(0, 3, 4)[j], value=b"x" * (20 + 7 * j))
            items.append((offset, offset + 3, data, T0 + mb * 1000 + j))
            offset += 4
        o = append_batches(Path(root), "t", 0, mb, items, cfg)
        outcomes.append([o.skipped_replay, o.log_end_offset, o.recovered_bytes, o.segments_rolled])
    print(json.dumps(outcomes))


def run_writer(root: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    code = f"from tests.unit.test_segment_crash import writer; writer({str(root)!r}, {MICRO_BATCHES})"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def snapshot(root: Path) -> dict[str, bytes]:
    d = partition_dir(root, "t", 0)
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != LOCK_FILE}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("reference")
    done = run_writer(root)
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert sum(o[3] for o in outcomes) >= 2, "the workload must roll segments"
    assert len(segment_bases(partition_dir(root, "t", 0))) >= 3
    return snapshot(root)


@pytest.mark.parametrize(
    "crash_at",
    [
        "batch-written:1",  # first micro-batch handed to the segment, nothing written yet
        "batch-written:8",  # in the middle of micro-batch 2 (after a roll wrote the old segment out)
        "data-written:1",  # torn first micro-batch: bytes in the files, no commit record yet
        "data-written:3",  # micro-batch 3's bytes written, not fsynced, not committed
        "rolled:1",  # right after a roll created a new segment
        "rolled:2",
        "data-fsynced:3",  # data durable, commit record not written
        "commit-tmp-written:4",  # commit record written to its tmp file, not renamed
        "committed:5",  # commit record in place, the process dies before returning
    ],
)
def test_crash_then_replay_is_byte_identical(tmp_path, reference, crash_at):
    crashed = run_writer(tmp_path, crash_at)
    assert crashed.returncode == 86, crashed.stderr
    d = partition_dir(tmp_path, "t", 0)
    before = read_commit(d)
    resumed = run_writer(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    outcomes = json.loads(resumed.stdout)
    committed_before = before.batch_id if before else -1
    assert [o[0] for o in outcomes] == [mb <= committed_before for mb in range(MICRO_BATCHES)]
    if crash_at.startswith(("data-written", "data-fsynced")):
        assert sum(o[2] for o in outcomes) > 0, "the uncommitted bytes were truncated before the replay"
    assert snapshot(tmp_path) == reference


def test_replaying_committed_micro_batches_writes_nothing(tmp_path, reference):
    assert run_writer(tmp_path).returncode == 0
    mtimes = {p.name: p.stat().st_mtime_ns for p in partition_dir(tmp_path, "t", 0).iterdir() if p.name != LOCK_FILE}
    again = run_writer(tmp_path)
    assert again.returncode == 0, again.stderr
    assert all(o[0] for o in json.loads(again.stdout))
    assert snapshot(tmp_path) == reference
    after = {p.name: p.stat().st_mtime_ns for p in partition_dir(tmp_path, "t", 0).iterdir() if p.name != LOCK_FILE}
    assert after == mtimes


def test_commit_record_lists_every_segment(tmp_path, reference):
    doc = json.loads(reference[COMMIT_FILE])
    assert doc["batch_id"] == MICRO_BATCHES - 1
    assert doc["log_end_offset"] == MICRO_BATCHES * 12
    inactive = json.loads(reference[segment_list_name(doc["segment_list"])])["segments"]
    assert len(inactive) == doc["inactive_count"] >= 2
    assert not any(name.startswith(SEGMENT_LIST_PREFIX) and name != segment_list_name(doc["segment_list"])
                   for name in reference)  # the lists of earlier generations are gone
    for s in [*inactive, doc["active"]]:
        assert len(reference[f"{s['base_offset']:020d}.log"]) == s["log_size"]
        assert len(reference[f"{s['base_offset']:020d}.index"]) == s["index_size"]
        assert len(reference[f"{s['base_offset']:020d}.timeindex"]) == s["time_index_size"]
        assert len(reference[f"{s['base_offset']:020d}.appendtimeindex"]) == s["append_time_index_size"]
