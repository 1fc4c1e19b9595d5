"""Kafka's `LogManager` for the gateway's logs: every partition log closed at a clean stop, and a log's
indexes repaired as Kafka repairs them when it loads logs after an unclean shutdown (docs/design.md)."""

from __future__ import annotations

from pathlib import Path

from storage.file_names import partition_dir
from storage.log_config import SegmentConfig
from storage.partition_lock import PartitionBusyError
from storage.partition_log import PartitionLog
from validators.topic_config import TopicConfig, TopicRegistry


def close_logs(root: Path, registry: TopicRegistry) -> int:
    """`LogManager.shutdown`: close every partition log of the registry's topics the way a clean broker
    shutdown does (`PartitionLog.close_cleanly`). Call it once the query has stopped. Returns the number
    of partitions closed."""
    closed = 0
    for name, config in sorted(registry.topics.items()):
        for partition in range(int(config.partitions)):
            if not partition_dir(root, name, partition).is_dir():
                continue
            with PartitionLog.open(root, name, partition, config) as plog:
                plog.close_cleanly()
            closed += 1
    return closed


def repair_indexes(
    root: Path, topic: str, partition: int, config: TopicConfig | SegmentConfig | None = None, *,
    blocking: bool = False,
) -> bool | None:
    """Recover a partition the way its next append would — to its commit record, then the active
    segment's `.index`/`.timeindex` checked against the recorded checksums and rebuilt from the log when a
    crash lost their pages — without appending. What Kafka does for every log when it starts after an
    unclean shutdown (`LogManager.loadLogs`), so that readers, which trust the indexes,
    need not wait for the partition's next append. Returns whether indexes were rebuilt; None when the
    partition has no directory or (`blocking=False`) is locked: an appender holds it, and repairs it."""
    if not partition_dir(root, topic, partition).is_dir():
        return None
    try:
        plog = PartitionLog.open(root, topic, partition, config, blocking=blocking)
    except PartitionBusyError:
        return None
    with plog:
        plog._open_active()
        return plog.rebuilt_indexes


