"""File and directory names of segment storage, in one place (Kafka's `LogFileUtils`).

`<root>/<topic>-<partition>/<base offset, 20 digits><suffix>`; the suffixes are Kafka's plus the
gateway's `.appendtimeindex`.
"""

from __future__ import annotations

from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
# Kafka's transaction index (`storage.transaction_index`): only a segment with an aborted transaction has one
TXN_INDEX_FILE_SUFFIX = ".txnindex"
APPEND_TIME_INDEX_SUFFIX = ".appendtimeindex"  # the gateway's (docs/design.md: segment storage); Kafka ignores unknown suffixes
SEGMENT_FILE_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, APPEND_TIME_INDEX_SUFFIX)


def segment_file_name(base_offset: int, suffix: str = LOG_FILE_SUFFIX) -> str:
    """`<20-digit zero-padded base offset><suffix>` (Kafka's `LogFileUtils`)."""
    return f"{base_offset:020d}{suffix}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


def segment_bases(directory: Path) -> list[int]:
    """Base offsets of the `.log` files in a partition directory, ascending."""
    if not directory.exists():
        return []
    return sorted(
        offset_from_file_name(p.name)
        for p in directory.iterdir()
        if is_segment_file(p.name, LOG_FILE_SUFFIX)
    )


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    return Path(root) / partition_dir_name(topic, partition)


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's `<topic>-<partition>`."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, None for anything else (Kafka's `parseTopicPartitionName`)."""
    topic, _, partition = name.rpartition("-")
    if not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def segment_paths(directory: Path, base_offset: int) -> list[Path]:
    """Every file of one segment: `.log`, `.index`, `.timeindex`, `.appendtimeindex`."""
    return [Path(directory) / segment_file_name(base_offset, suffix) for suffix in SEGMENT_FILE_SUFFIXES]


def delete_segment_files(directory: Path, base_offset: int) -> None:
    """Remove every file of one segment (those that exist), its `.txnindex` among them."""
    for path in segment_paths(directory, base_offset):
        path.unlink(missing_ok=True)
    (Path(directory) / segment_file_name(base_offset, TXN_INDEX_FILE_SUFFIX)).unlink(missing_ok=True)


def is_segment_file(name: str, suffix: str) -> bool:
    """Whether `name` is `<20-digit base offset><suffix>`."""
    return name.endswith(suffix) and len(name) == 20 + len(suffix) and name[:20].isdigit()


def list_partitions(root: Path) -> list[tuple[str, int]]:
    """(topic, partition) of every `<topic>-<partition>` directory under `root`, sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [parsed for entry in root.iterdir() if entry.is_dir() and (parsed := parse_partition_dir(entry.name))]
    return sorted(found)
