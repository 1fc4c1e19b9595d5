"""Readers and commands on damaged segment files: every file kind — `.log`, `.index`,
`.timeindex`, `.appendtimeindex`, the commit record — truncated, zero-filled, over-long or overwritten
with garbage, and every reader (records, ListOffsets, verify, the consumer client) and every
`python -m sinks segments` command run on it.

What must hold (property-based, on copies of one reference partition that rolled several segments, with
both timestamp types and three codecs):
- nothing raises anything but `KafkaStorageError`, whose message names the damaged file; the commands
  exit 0, 1 (verify found a problem) or 2 with one `error:` line naming the file — never a traceback;
- a damaged `.index` or `.timeindex` changes no answer: readers rebuild it from the log in memory, as
  Kafka's recovery would; a damaged `.appendtimeindex` only turns append times into -1 (unknown);
- `verify` reports damage to any file within its committed bytes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.consumer import GatewayConsumer, TopicPartition
from sinks.__main__ import main
from storage.batch_appender import append_batches
from storage.commit_record import COMMIT_FILE, read_commit, segment_list_name
from storage.errors import KafkaStorageError
from storage.file_names import partition_dir, segment_bases, segment_file_name
from storage.log_config import SegmentConfig
from storage.log_reader import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    offsets_for_times,
    read,
)
from storage.verify import verify_partition
from tests.unit.test_segment import T0, make_batch

CFG = SegmentConfig(segment_bytes=900, index_interval_bytes=150, segment_index_bytes=240)
TARGETS = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP, T0, T0 + 250, T0 + 520, T0 + 10_000)
KINDS = (".log", ".index", ".timeindex", ".appendtimeindex", COMMIT_FILE)
DAMAGES = ("truncate", "zero-fill", "over-long", "garbage")


def write_reference(root: Path) -> None:
    offset = 0
    for mb in range(6):
        items = []
        for j in range(3):
            ts = [T0 + mb * 100 + j * 10 + k for k in range(4)]
            lat = T0 + mb * 1000 + j if (mb + j) % 2 else None
            data = make_batch(offset, ts, lat_time=lat, codec=(0, 3, 4)[j], value=b"x" * (20 + 7 * j))
            items.append((offset, offset + 3, data, T0 + mb * 1000 + j))
            offset += 4
        append_batches(root, "t", 0, mb, items, CFG)


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The partition as this gateway commits it, and with a commit record of an earlier version: no
    checksums, no max timestamps (readers then fall back to the files themselves)."""
    root = tmp_path_factory.mktemp("reference")
    write_reference(root)
    assert len(segment_bases(partition_dir(root, "t", 0))) >= 3
    assert verify_partition(root, "t", 0, index_interval_bytes=150).ok
    older = tmp_path_factory.mktemp("older") / "copy"
    shutil.copytree(root, older)
    record = partition_dir(older, "t", 0) / COMMIT_FILE
    doc = json.loads(record.read_text())
    del doc["crc32"]  # an earlier version's files: no CRC-32 of their own either
    segment_list = partition_dir(older, "t", 0) / segment_list_name(doc["segment_list"])
    inactive = json.loads(segment_list.read_text())["segments"]
    for state in [*inactive, doc["active"]]:
        for key in ("index_crc", "time_index_crc", "append_time_index_crc", "max_timestamp", "max_timestamp_offset"):
            del state[key]
    record.write_text(json.dumps(doc))
    segment_list.write_text(json.dumps(inactive))
    assert answers(older) == answers(root)
    return {"current": root, "older": older}


def answers(root: Path) -> dict[str, Any]:
    """What every reader says about the partition (each value an answer or the error it raised)."""
    def attempt(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except KafkaStorageError as e:
            return e

    out: dict[str, Any] = {"read": attempt(lambda: read(root, "t", 0, 0, 10_000))}
    for target in TARGETS:
        out[f"offsets_for_times {target}"] = attempt(lambda t=target: offsets_for_times(root, "t", 0, t))

    def consume() -> list[tuple[int, int, bytes | None]]:
        consumer = GatewayConsumer(root)
        try:
            tp = TopicPartition("t", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = []
            while batch := consumer.poll(0.0, max_records=500):
                got += [(r.offset, r.timestamp, r.value) for r in batch]
            return got
        finally:
            consumer.close()

    out["consumer"] = attempt(consume)
    return out


def damage(path: Path, how: str, at: float, length: int, garbage: bytes) -> None:
    data = bytearray(path.read_bytes())
    pos = min(int(at * len(data)), max(len(data) - 1, 0))
    if how == "truncate":
        del data[pos:]
    elif how == "zero-fill":
        data[pos : pos + length] = bytes(len(data[pos : pos + length]))
    elif how == "over-long":
        data += garbage
    else:
        data[pos : pos + len(garbage)] = garbage
    path.write_bytes(bytes(data))


def damaged_file(root: Path, kind: str, segment: int) -> Path:
    directory = partition_dir(root, "t", 0)
    if kind == COMMIT_FILE:
        return directory / COMMIT_FILE
    bases = segment_bases(directory)
    return directory / segment_file_name(bases[segment % len(bases)], kind)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    version=st.sampled_from(["current", "older"]), kind=st.sampled_from(KINDS), how=st.sampled_from(DAMAGES), segment=st.integers(0, 10),
    at=st.floats(0, 1), length=st.integers(1, 64), garbage=st.binary(min_size=1, max_size=48),
)
def test_readers_and_commands_survive_damaged_files(
    references: dict[str, Path], capsys: pytest.CaptureFixture[str], version: str, kind: str, how: str, segment: int, at: float,
    length: int, garbage: bytes,
) -> None:
    if kind == COMMIT_FILE and how in ("zero-fill", "garbage") and version == "older":
        how = "truncate"  # the earlier record has no CRC-32: garbage digits would be another valid record
    reference = references[version]
    # Checksummed indexes are checked, unchecksummed ones (older records) rebuilt from the log: both
    # give the right answer. An older record's `.appendtimeindex` promises no crash and a named file only.
    exact = version == "current" or kind in (".index", ".timeindex")
    expected = answers(reference)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "copy"
        shutil.copytree(reference, root)
        path = damaged_file(root, kind, segment)
        before = path.read_bytes()
        damage(path, how, at, length, garbage)
        changed = path.read_bytes() != before
        got = answers(root)

        for name, answer in got.items():
            if isinstance(answer, KafkaStorageError):
                assert path.name in str(answer), (name, str(answer))
                assert kind in (".log", COMMIT_FILE), f"{name}: an index must be rebuilt, not fail: {answer}"
            elif kind in (".index", ".timeindex") and exact:
                assert answer == expected[name], name
            elif kind == ".appendtimeindex" and name == "read" and exact:
                want = expected[name]
                assert [r.offset for r in answer] == [r.offset for r in want]
                assert all(r.log_append_time in (w.log_append_time, -1) for r, w in zip(answer, want, strict=True))
        if kind != COMMIT_FILE and not changed:
            assert got == expected

        report = verify_partition(root, "t", 0, index_interval_bytes=150)
        committed = read_commit(partition_dir(reference, "t", 0))
        sizes = {segment_file_name(s.base_offset, suffix): size for s in committed.segments
                 for suffix, size in zip((".log", ".index", ".timeindex", ".appendtimeindex"), s.sizes, strict=True)}
        if kind == COMMIT_FILE:
            try:
                same_record = read_commit(path.parent) == committed  # e.g. trailing whitespace
            except KafkaStorageError:
                same_record = False
            assert report.ok == same_record, report.problems
        elif changed and exact and (how != "over-long" or path.name not in sizes):
            assert not report.ok, "verify must see damage to committed bytes"
        assert all(isinstance(p, str) for p in report.problems)

        for argv in (["dump"], ["verify"], ["read", "--offset", "0", "--max", "1000"],
                     ["offsets-for-times", "max-timestamp"], ["offsets-for-times", str(T0 + 250)]):
            capsys.readouterr()
            code = main(["segments", argv[0], str(root), "t", "0", *argv[1:], "--json"])
            err = capsys.readouterr().err
            assert code in (0, 1, 2), (argv, code)
            if code == 2:
                assert err.startswith("error: ") and path.name in err, (argv, err)
