"""`BatchAppender`'s runs (`LogSegment.append_run`), handed the items in one step or in chunks as the
stage decides them, against `PartitionLog.append` item by item, the reference: the same files, byte for
byte, and the same commit records, through every roll reason (segment.bytes, segment.ms by wall clock and
by event time, with jitter, a full offset or time index), several batches in one append, timestamps that
go back, and micro-batches committed in between."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from storage.batch_appender import AppendOutcome, BatchAppender, append_batches
from storage.commit_record import read_commit
from storage.file_names import partition_dir
from storage.log_config import SegmentConfig
from storage.partition_log import PartitionLog
from tests.unit.test_segment import T0, make_batch

Item = tuple[int, int, bytes, int]


def _micro_batches(rng: random.Random, count: int, several: bool) -> list[list[Item]]:
    """Offset-continuous items in micro-batches: one batch each, or (`several`) some two in one append,
    record timestamps around an append clock that jumps now and then (time rolls) and goes back (KIP-32
    lets CreateTime do that)."""
    offset, now = 0, T0
    batches: list[list[Item]] = []
    for _ in range(count):
        items: list[Item] = []
        for _ in range(rng.randint(1, 30)):
            now += rng.choice((0, 1, 5, 400, 2_000))
            parts = 2 if several and rng.random() < 0.1 else 1
            data = b""
            base = offset
            for _ in range(parts):
                records = rng.randint(1, 12)
                timestamps = [now + rng.randint(-3_000, 300) if rng.random() < 0.9 else -1 for _ in range(records)]
                lat = now if rng.random() < 0.5 else None
                data += make_batch(offset, timestamps, lat_time=lat, value=b"v" * rng.randint(0, 300))
                offset += records
            items.append((base, offset - 1, data, now))
        batches.append(items)
    return batches


def _reference(root: Path, batch_id: int, items: list[Item], config: SegmentConfig) -> None:
    with PartitionLog.open(root, "t", 0, config) as plog:
        for base, _last, data, append_time in items:
            assert plog.log_end_offset == base
            plog.append(data, append_time)
        plog.commit(batch_id)


def _files(root: Path) -> dict[str, bytes]:
    directory = partition_dir(root, "t", 0)
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and not p.name.endswith(".lock")}


# Nearly full indexes take one batch per append: `shouldRoll` looks at an index before an append, and an
# append of several batches may add an entry per batch (Kafka's `LogSegment.append` too).
CONFIGS = {
    "defaults": (SegmentConfig(), True),
    "small segments": (SegmentConfig(segment_bytes=6_000, index_interval_bytes=500), True),
    "time rolls with jitter": (SegmentConfig(segment_ms=3_000, segment_jitter_ms=1_000, index_interval_bytes=0), True),
    "offset index full": (SegmentConfig(segment_index_bytes=8 * 5, index_interval_bytes=0), False),
    "time index full": (SegmentConfig(segment_index_bytes=12 * 4, index_interval_bytes=100), False),
}


def _in_chunks(
    root: Path, batch_id: int, items: list[Item], config: SegmentConfig, rng: random.Random
) -> AppendOutcome | None:
    with BatchAppender(root, "t", 0, batch_id, config) as appender:
        done = 0
        while done < len(items):
            size = rng.randint(1, 7)
            appender.add(items[done:done + size])
            done += size
        return appender.finish()


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_runs_write_what_one_append_at_a_time_writes(tmp_path: Path, name: str, seed: int) -> None:
    config, several = CONFIGS[name]
    rng = random.Random(seed)
    micro_batches = _micro_batches(rng, 12, several)
    fast, reference = tmp_path / "fast", tmp_path / "reference"
    rolled = 0
    for batch_id, items in enumerate(micro_batches):
        if seed == 2:  # as the stage hands them over: a few at a time
            outcome = _in_chunks(fast, batch_id, items, config, rng)
        else:
            outcome = append_batches(fast, "t", 0, batch_id, items, config)
        _reference(reference, batch_id, items, config)
        rolled += outcome.segments_rolled
        assert outcome.batches == len(items)
        assert outcome.bytes_written == sum(len(data) for _b, _l, data, _t in items)
        assert _files(fast) == _files(reference), f"micro-batch {batch_id}"
        assert read_commit(partition_dir(fast, "t", 0)) == read_commit(partition_dir(reference, "t", 0))
    if name != "defaults":
        assert rolled > 0, "the workload must make this config roll"
        assert len(read_commit(partition_dir(fast, "t", 0)).segments) == rolled + 1


def test_a_run_stops_at_a_batch_that_does_not_continue_the_log(tmp_path: Path) -> None:
    items = [(0, 0, make_batch(0, [T0]), T0), (1, 1, make_batch(2, [T0]), T0)]
    with pytest.raises(ValueError, match="does not continue the log end offset 1"):
        append_batches(tmp_path, "t", 0, 0, items)


def test_a_run_stops_where_the_stage_disagrees_on_the_last_offset(tmp_path: Path) -> None:
    items = [(0, 0, make_batch(0, [T0]), T0), (1, 5, make_batch(1, [T0, T0]), T0)]
    with pytest.raises(ValueError, match="ends at 2, the stage said 5"):
        append_batches(tmp_path, "t", 0, 0, items)


def test_a_replayed_micro_batch_writes_nothing_whatever_it_is_handed(tmp_path: Path) -> None:
    items = [(0, 0, make_batch(0, [T0]), T0), (1, 1, make_batch(1, [T0]), T0)]
    assert append_batches(tmp_path, "t", 0, 7, items).batches == 2
    before = _files(tmp_path)
    with BatchAppender(tmp_path, "t", 0, 7) as appender:
        appender.add(items[:1])
        appender.add([(5, 5, make_batch(5, [T0]), T0)])  # would not even continue the log
        outcome = appender.finish()
    assert outcome is not None and outcome.skipped_replay and outcome.batches == 0
    assert _files(tmp_path) == before


def test_nothing_handed_over_opens_nothing(tmp_path: Path) -> None:
    with BatchAppender(tmp_path, "t", 0, 0) as appender:
        appender.add([])
        assert appender.finish() is None
    assert not partition_dir(tmp_path, "t", 0).exists()
