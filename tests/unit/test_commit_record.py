"""The commit record and the segment list carry a CRC-32 (`storage.commit_record`): damage that leaves valid JSON
— another digit — is a clear error naming the file, never a record whose sizes would cut the log."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.batch_appender import append_batches
from storage.commit_record import (
    COMMIT_FILE,
    COMMIT_FORMAT_VERSION,
    CommitHead,
    SegmentState,
    read_commit,
    read_commit_head,
    segment_list_name,
    with_crc,
)
from storage.errors import KafkaStorageError
from storage.file_names import partition_dir
from storage.log_config import SegmentConfig
from storage.partition_log import PartitionLog
from tests.unit.test_segment import T0, make_batch

ONE_SEGMENT_PER_BATCH = SegmentConfig(segment_bytes=1, index_interval_bytes=0)


def committed_partition(root: Path, micro_batches: int = 3) -> Path:
    for mb in range(micro_batches):
        append_batches(root, "t", 0, mb, [(mb, mb, make_batch(mb, [T0 + mb]), T0 + mb)], ONE_SEGMENT_PER_BATCH)
    return partition_dir(root, "t", 0)


def another_digit(path: Path, field: str) -> None:
    """`field`'s first number in the file changed by one, the JSON still valid (as a flipped bit in a digit)."""
    text = path.read_text()
    found = re.search(rf'"{field}": (\d+)', text)
    assert found is not None, (field, text)
    digit = found.group(1)[-1]
    at = found.end(1) - 1
    path.write_text(text[:at] + ("1" if digit == "0" else "0") + text[at + 1:])
    json.loads(path.read_text())


def test_a_record_with_another_digit_is_a_clear_error(tmp_path: Path) -> None:
    directory = committed_partition(tmp_path)
    another_digit(directory / COMMIT_FILE, "log_end_offset")
    with pytest.raises(KafkaStorageError, match=f"{COMMIT_FILE}: not a valid commit record.*CRC-32"):
        read_commit_head(directory)
    with pytest.raises(KafkaStorageError, match=COMMIT_FILE):
        PartitionLog.open(tmp_path, "t", 0, ONE_SEGMENT_PER_BATCH)


def test_a_segment_list_with_another_digit_is_a_clear_error(tmp_path: Path) -> None:
    directory = committed_partition(tmp_path)
    head = read_commit_head(directory)
    assert head is not None and head.inactive_count == 2
    listed = directory / segment_list_name(head.segment_list)
    another_digit(listed, "log_size")
    with pytest.raises(KafkaStorageError, match=f"{listed.name}: not a valid segment list.*CRC-32"):
        read_commit(directory)


def test_files_of_an_earlier_release_without_a_crc_are_read_and_the_next_commit_adds_one(tmp_path: Path) -> None:
    directory = committed_partition(tmp_path)
    expected = read_commit(directory)
    head = read_commit_head(directory)
    assert head is not None
    record, listed = directory / COMMIT_FILE, directory / segment_list_name(head.segment_list)
    doc = json.loads(record.read_text())
    del doc["crc32"]
    record.write_text(json.dumps(doc, sort_keys=True))
    listed.write_text(json.dumps(json.loads(listed.read_text())["segments"]))  # an earlier release's bare list
    assert read_commit(directory) == expected
    committed_partition(tmp_path, 4)  # the fourth micro-batch rolls a segment: a new list and a new record
    assert "crc32" in json.loads(record.read_text())
    head = read_commit_head(directory)
    assert head is not None and head.batch_id == 3
    assert "crc32" in json.loads((directory / segment_list_name(head.segment_list)).read_text())
    assert len(read_commit(directory).segments) == 4  # type: ignore[union-attr]


_counts = st.integers(min_value=0, max_value=2**63 - 1)
_maybe = st.none() | st.integers(min_value=-1, max_value=2**63 - 1)
_tails = st.just(b"") | st.binary(min_size=1, max_size=64)


def _segment_doc(state: SegmentState) -> dict[str, object]:
    """A segment's JSON object as `json` would hold it: its tails hex, left out when empty."""
    return {k: v.hex() if isinstance(v, bytes) else v for k, v in dataclasses.asdict(state).items() if v != b""}


@given(
    batch_id=st.integers(min_value=-1, max_value=2**63 - 1), end=_counts, start=_counts, listed=_counts, count=_counts,
    unstable=st.none() | _counts,
    active=st.none() | st.builds(SegmentState, _counts, _counts, _counts, _counts, _counts, _maybe, _maybe, _maybe,
                                 _maybe, _maybe, _maybe, _tails, _tails, _tails),
)
def test_a_record_is_written_as_json_writes_it(
    batch_id: int, end: int, start: int, listed: int, count: int, unstable: int | None, active: SegmentState | None,
) -> None:
    """The record's own formatting gives the text `json.dumps(..., sort_keys=True)` gives, and reads back."""
    head = CommitHead(batch_id, end, start, active, listed, count, None, unstable)
    doc = {"version": COMMIT_FORMAT_VERSION, "batch_id": batch_id, "log_end_offset": end, "log_start_offset": start,
           "active": None if active is None else _segment_doc(active), "segment_list": listed,
           "inactive_count": count, **({} if unstable is None else {"first_unstable_offset": unstable})}
    assert head.to_json() == with_crc(json.dumps(doc, sort_keys=True))
    back = CommitHead.from_json(head.to_json())
    assert (back.batch_id, back.log_end_offset, back.active, back.first_unstable_offset) == (batch_id, end, active,
                                                                                              unstable)
