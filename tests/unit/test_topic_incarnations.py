"""The segment storage holds one incarnation of each topic (`storage.topic_incarnations`): the first sync takes
what is stored as current; a topic gone from the registry, or there under another id, loses its partition
directories, and only its own; and DeleteRecords moves a partition's log start offset as Kafka does
(`storage.delete_records`)."""

from __future__ import annotations

from pathlib import Path

from storage import topic_incarnations
from storage.batch_appender import BatchAppender
from storage.delete_records import DeleteRecordsError, RecordsDeleted, delete_records
from storage.log_reader import read
from validators.codec.record_batch import build_record_batch
from validators.topic_config import topic_config

NOW = 1_700_000_000_000


def _partition(root: Path, topic: str, partition: int) -> Path:
    directory = root / f"{topic}-{partition}"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(b"")
    return directory


def test_gone_or_re_created_topics_lose_their_partitions_and_only_theirs(tmp_path: Path) -> None:
    for topic, partition in (("orders", 0), ("orders", 1), ("orders-eu", 0), ("clicks", 0)):
        _partition(tmp_path, topic, partition)
    assert topic_incarnations.sync(tmp_path, {"orders": "a", "orders-eu": "b", "clicks": "c"}) == {}
    assert topic_incarnations.read_incarnations(tmp_path) == {"orders": "a", "orders-eu": "b", "clicks": "c"}
    removed = topic_incarnations.sync(tmp_path, {"orders": "a2", "orders-eu": "b"})  # re-created; deleted
    assert removed == {"orders": 2, "clicks": 1}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["orders-eu-0"]
    assert topic_incarnations.stored_id(tmp_path, "orders") == "a2"
    assert topic_incarnations.sync(tmp_path, {"orders": "a2", "orders-eu": "b"}) == {}


def _appended(root: Path, batches: int) -> None:
    config = topic_config("t", 1, {"segment.bytes": str(1024 * 1024)})
    for i in range(batches):
        appender = BatchAppender(root, "t", 0, i, config)
        batch = build_record_batch([(NOW, b"k", b"v" * 10)] * 2, base_offset=2 * i)
        appender.add([(2 * i, 2 * i + 1, batch, -1)])
        appender.finish()
        appender.close()


def test_delete_records_moves_the_log_start_offset_as_kafka(tmp_path: Path) -> None:
    _appended(tmp_path, 3)  # offsets 0..5
    config = topic_config("t", 1, {})
    assert delete_records(tmp_path, "t", 0, config, 3) == RecordsDeleted(3)
    assert delete_records(tmp_path, "t", 0, config, 1) == RecordsDeleted(3)  # never backwards
    assert read(tmp_path, "t", 0, 4, max_records=10)[0].offset >= 4
    too_far = delete_records(tmp_path, "t", 0, config, 7)
    assert isinstance(too_far, tuple) and too_far[0] == DeleteRecordsError.OFFSET_OUT_OF_RANGE
    assert delete_records(tmp_path, "t", 0, config, -1) == RecordsDeleted(6)  # the high watermark
    compacted = topic_config("t", 1, {"cleanup.policy": "compact"})
    refused = delete_records(tmp_path, "t", 0, compacted, 6)
    assert isinstance(refused, tuple) and refused[0] == DeleteRecordsError.POLICY_VIOLATION
    assert delete_records(tmp_path, "none", 0, config, -1) == RecordsDeleted(0)
