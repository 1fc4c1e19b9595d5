"""DeleteRecords on a partition of the segment storage: the log start offset moved up to an offset, and the
segments wholly below it removed (Kafka's `UnifiedLog.deleteRecordsOnLeader`, `maybeIncrementLogStartOffset`
and `deleteOldSegments` for a log start offset breach).

Kafka's rules: -1 asks for the high watermark (everything appended; the gateway's high watermark is its log end
offset, it being the only replica); an offset below 0 otherwise, or above the high watermark, is
OFFSET_OUT_OF_RANGE; the log start offset never moves back; a topic whose cleanup.policy is compact alone
refuses with POLICY_VIOLATION. Readers answer OFFSET_OUT_OF_RANGE below the new start at once (`log_reader`),
and the produce responses carry it (`partition_task.outgoing_messages`). The partition lock keeps a concurrent
append out; the new commit record is written before a file is removed, as retention does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from storage.commit_record import read_commit_head, recovery_marked, write_commit
from storage.file_names import delete_segment_files, partition_dir
from storage.log_config import SegmentConfig
from storage.partition_lock import PartitionLock
from storage.recovery import recover_partition
from validators.topic_config import TopicConfig

HIGH_WATERMARK = -1  # DeleteRecordsRequest's offset meaning "everything below the high watermark"


class DeleteRecordsError(Enum):
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    POLICY_VIOLATION = "POLICY_VIOLATION"


@dataclass(frozen=True)
class RecordsDeleted:
    low_watermark: int  # the partition's log start offset afterwards
    segments_deleted: int = 0


def delete_records(root: Path, topic: str, partition: int, config: TopicConfig,
                   offset: int) -> RecordsDeleted | tuple[DeleteRecordsError, str]:
    """Move the partition's log start offset to `offset` (module docstring); its new low watermark, or Kafka's
    error with its message."""
    if not config.cleanup_policy or "delete" not in config.cleanup_policy:
        return DeleteRecordsError.POLICY_VIOLATION, (f"Records of partition {topic}-{partition} can not be deleted "
                                                     f"due to the configured policy")
    directory = partition_dir(root, topic, partition)
    if not directory.is_dir():  # nothing appended: start and end are 0
        if offset in (HIGH_WATERMARK, 0):
            return RecordsDeleted(0)
        return _out_of_range(topic, partition, offset, 0)
    lock = PartitionLock(directory)
    lock.acquire()
    try:
        head = recover_partition(directory, SegmentConfig.from_topic(config), read_commit_head(directory)).head
        commit = None if head is None else head.record(directory)
        if commit is None:
            return RecordsDeleted(0) if offset in (HIGH_WATERMARK, 0) else _out_of_range(topic, partition, offset, 0)
        end = commit.log_end_offset
        target = end if offset == HIGH_WATERMARK else offset
        if target < 0 or target > end:
            return _out_of_range(topic, partition, offset, end)
        if target <= commit.log_start_offset:
            return RecordsDeleted(commit.log_start_offset)
        segments = list(commit.segments)
        # Kafka deletes a segment once the next one starts at or below the log start offset; the active (last)
        # segment stays, as every deletion of the gateway keeps it
        deleted = []
        while len(segments) > 1 and segments[1].base_offset <= target:
            deleted.append(segments.pop(0))
        with recovery_marked(directory):  # a crash before the files are gone leaves them for the next recovery
            write_commit(directory, replace(commit, segments=tuple(segments), log_start_offset=target))
            for segment in deleted:
                delete_segment_files(directory, segment.base_offset)
        return RecordsDeleted(target, len(deleted))
    finally:
        lock.release()


def _out_of_range(topic: str, partition: int, offset: int, end: int) -> tuple[DeleteRecordsError, str]:
    return DeleteRecordsError.OFFSET_OUT_OF_RANGE, (
        f"Cannot increment the log start offset to {offset} of partition {topic}-{partition} since it is larger "
        f"than the high watermark {end}" if offset > end else
        f"Cannot increment the log start offset to {offset} of partition {topic}-{partition}: it is negative")
