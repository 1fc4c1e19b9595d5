"""Transactions in segment storage: the stage's decisions of transactional batches and markers appended by the
sink (`sinks.partition_task`), the aborted transaction in the marker segment's `.txnindex`, the first unstable
offset in the commit record, and READ_COMMITTED reads stopping at the last stable offset with the aborted
transactions named (`PartitionReader.read_committed`, the front door's Fetch and ListOffsets)."""

from __future__ import annotations

from pathlib import Path

from front_door.apis.fetch import read_partition
from front_door.apis.list_offsets import look_up
from sinks.partition_task import append_partition
from storage.commit_record import read_commit_head
from storage.file_names import delete_segment_files, partition_dir
from storage.file_records import split_batches
from storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, PartitionReader, read
from storage.transaction_index import AbortedTxn, TransactionIndex
from streaming.stage import IngressBatch, decide_group
from validators.append_result import PartitionState
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

NOW = 1_700_000_000_000
REGISTRY = TopicRegistry({"t": topic_config("t", 1, {"message.timestamp.type": "CreateTime"}, {})})


def _item(offset: int, batch: bytes, *, txn: bool = False, marker: bool = False) -> IngressBatch:
    return IngressBatch(0, offset, NOW, batch, f"r{offset}", None, 0, "0",
                        transactional_id="tx" if txn else None, origin="coordinator" if marker else None)


def _data(pid: int, seq: int, value: str) -> bytes:
    return build_record_batch([(NOW, b"k", value.encode())], producer_id=pid, producer_epoch=0, base_sequence=seq,
                              is_transactional=True)


def _marker(pid: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker(EndTransactionMarker(kind, 0), producer_id=pid, producer_epoch=0, timestamp=NOW)


def _plain(value: str) -> bytes:
    return build_record_batch([(NOW, b"k", value.encode())])


def _offsets(data: bytes) -> list[int]:
    return [header.base_offset for _, header in split_batches(data)]


def _micro_batch(root: Path, batch_id: int, items: list[IngressBatch], state: PartitionState) -> PartitionState:
    rows, state = decide_group("t", 0, items, REGISTRY, state, NOW)
    assert all(r.error_code == 0 for r in rows), [r.error_message for r in rows]
    append_partition(root, batch_id, rows, REGISTRY)
    return state


def test_an_aborted_transaction_is_indexed_and_read_committed_skips_it(tmp_path: Path) -> None:
    root = tmp_path / "segments"
    state = _micro_batch(root, 0, [
        _item(0, _data(7, 0, "a7-0"), txn=True),  # offset 0: producer 7's transaction
        _item(1, _data(8, 0, "c8-0"), txn=True),  # offset 1: producer 8's transaction
        _item(2, _plain("p-2")),  # offset 2
        _item(3, _marker(7, commit=False), marker=True),  # offset 3: 7 aborted while 8 is open
    ], PartitionState())
    head = read_commit_head(partition_dir(root, "t", 0))
    assert head is not None and (head.log_end_offset, head.first_unstable_offset, head.last_stable_offset) == (4, 1, 1)
    index = TransactionIndex(partition_dir(root, "t", 0) / "00000000000000000000.txnindex", 0)
    assert index.all_aborted() == [AbortedTxn(7, 0, 3, 1)]

    # read_committed stops at producer 8's open transaction; the aborted one is named
    with PartitionReader(root, "t", 0, append_times=False) as reader:
        data, aborted = reader.read_committed(0, 1 << 20, True)
    assert _offsets(data) == [0]
    assert aborted == (AbortedTxn(7, 0, 3, 1),)
    fetched = read_partition(root, "t", 0, 0, 1 << 20, True, committed=True)
    assert (fetched.high_watermark, fetched.last_stable_offset, fetched.records) == (4, 1, data)
    assert look_up(root, "t", 0, LATEST_TIMESTAMP, committed=True).offset == 1
    assert look_up(root, "t", 0, LATEST_TIMESTAMP).offset == 4
    uncommitted = read_partition(root, "t", 0, 0, 1 << 20, True)
    assert _offsets(uncommitted.records) == [0, 1, 2, 3] and uncommitted.aborted == ()

    # producer 8 commits in the next micro-batch: everything is stable
    _micro_batch(root, 1, [_item(4, _marker(8, commit=True), marker=True)], state)
    head = read_commit_head(partition_dir(root, "t", 0))
    assert head is not None and (head.first_unstable_offset, head.last_stable_offset) == (None, 5)
    fetched = read_partition(root, "t", 0, 0, 1 << 20, True, committed=True)
    assert _offsets(fetched.records) == [0, 1, 2, 3, 4]
    assert fetched.aborted == (AbortedTxn(7, 0, 3, 1),)
    assert index.all_aborted() == [AbortedTxn(7, 0, 3, 1)]  # a commit adds no entry
    # the markers are control batches: a reader of records skips them
    assert [r.value for r in read(root, "t", 0, 0, 100)] == [b"a7-0", b"c8-0", b"p-2"]


def test_read_committed_list_offsets_give_the_log_start_as_earliest_even_behind_an_open_transaction(
        tmp_path: Path) -> None:
    """Kafka caps latest and lookups by time at the last stable offset for READ_COMMITTED, never the earliest
    offset: a partition whose first batch is an open transaction has earliest 0 (a client resetting to the
    start must not get -1)."""
    root = tmp_path / "segments"
    _micro_batch(root, 0, [_item(0, _data(7, 0, "open"), txn=True)], PartitionState())
    assert look_up(root, "t", 0, EARLIEST_TIMESTAMP, committed=True).offset == 0
    assert look_up(root, "t", 0, LATEST_TIMESTAMP, committed=True).offset == 0
    assert look_up(root, "t", 0, 0, committed=True).offset == -1  # the only record is past the stable offset
    assert look_up(root, "t", 0, 0).offset == 0


def test_a_replayed_or_retried_micro_batch_writes_the_index_entry_once(tmp_path: Path) -> None:
    root = tmp_path / "segments"
    items = [_item(0, _data(7, 0, "a"), txn=True), _item(1, _marker(7, commit=False), marker=True)]
    rows, _ = decide_group("t", 0, items, REGISTRY, PartitionState(), NOW)
    append_partition(root, 0, rows, REGISTRY)
    append_partition(root, 0, rows, REGISTRY)  # the same micro-batch again: a replay
    index = TransactionIndex(partition_dir(root, "t", 0) / "00000000000000000000.txnindex", 0)
    assert index.all_aborted() == [AbortedTxn(7, 0, 1, 2)]


def test_a_segment_deleted_takes_its_transaction_index_with_it(tmp_path: Path) -> None:
    root = tmp_path / "segments"
    rows, _ = decide_group("t", 0, [_item(0, _data(7, 0, "a"), txn=True), _item(1, _marker(7, commit=False),
                                                                                 marker=True)],
                           REGISTRY, PartitionState(), NOW)
    append_partition(root, 0, rows, REGISTRY)
    directory = partition_dir(root, "t", 0)
    assert (directory / "00000000000000000000.txnindex").exists()
    delete_segment_files(directory, 0)
    assert not [p.name for p in directory.iterdir() if p.name.startswith("00000000000000000000")]
