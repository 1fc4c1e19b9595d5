"""Group commit: many partitions' appends of one micro-batch made durable by one sync of the filesystem.

A partition's own commit (`PartitionLog.commit`) costs four fsyncs: the `.log`, the `.appendtimeindex`, the
commit record's tmp file and its directory. A micro-batch that touches a thousand partitions would pay four
thousand. A group commit pays two `syncfs` calls for all of them, in the same order of durability:

0. where the micro-batch made partitions, one `syncfs` first: their first commit records durable before any of
   their bytes is written (`PartitionLog.open` leaves a new partition's record unsynced);
1. every partition's appended bytes written out and its next commit record written to its tmp file, unsynced
   (`PartitionLog.stage_commit` gathers them, `batched_calls.write_all` writes them all in one call);
2. `syncfs` of the segments root's filesystem: the data and the tmp records durable;
3. every tmp record exchanged with its partition's record (`batched_calls.exchange_all`, one call;
   `PartitionLog.complete_commit`);
4. `syncfs` again: the renames durable. Only then is anything published.

A crash before 4 leaves each partition with its previous or its new record, both describing durable bytes;
recovery truncates to whichever it finds and the micro-batch is replayed as after any crash (docs/design.md).
`syncfs` flushes everything dirty on that filesystem, so its cost is the bytes written there since the last
sync, by anyone: a segments root on a filesystem of its own keeps it to the gateway's (docs/deployment.md).
Only where `syncfs` is known to make everything durable: Linux, and a segments root on ext4, XFS, btrfs, F2FS
or an overlay of one (`GROUP_COMMIT_FILESYSTEMS`). On NFS, FUSE and others, and for a partition directory on
another filesystem than the root, partitions commit one by one, each with its own fsyncs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from storage.batch_appender import BatchAppender
from storage.batched_calls import exchange_all, write_all
from storage.commit_record import CommitHead, TmpRecord
from storage.crash_point import crash_point
from storage.file_records import Write
from storage.linux_calls import HAS_SYNCFS, sync_filesystem
from storage.partition_log import PartitionLog

# Filesystems whose syncfs(2) writes back and flushes everything they hold (their `sync_fs` waits for it).
GROUP_COMMIT_FILESYSTEMS = frozenset({"ext4", "ext3", "xfs", "btrfs", "f2fs", "overlay", "tmpfs"})
_filesystem_types: dict[str, str | None] = {}  # by the path as asked: no `realpath` (a system call a component) again


def group_commit_available(root: Path) -> bool:
    """Whether `root`'s filesystem takes a group commit (module docstring)."""
    return HAS_SYNCFS and filesystem_type(root) in GROUP_COMMIT_FILESYSTEMS


def local_filesystem(path: Path) -> bool:
    """Whether `path` lives on one of those local filesystems, where a `stat` sees another process's change at
    once (NFS's clients cache attributes for seconds)."""
    return filesystem_type(path) in GROUP_COMMIT_FILESYSTEMS


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem mounted where `path` lives (`/proc/self/mounts`, the longest mount point
    above it); None where it cannot be told."""
    asked = str(path)
    if asked not in _filesystem_types:
        key = os.path.realpath(path)
        best: tuple[int, str | None] = (-1, None)
        try:
            with open("/proc/self/mounts") as mounts:
                for line in mounts:
                    fields = line.split()
                    if len(fields) < 3:
                        continue
                    point = fields[1].replace("\\040", " ")
                    if (key == point or key.startswith(point.rstrip("/") + "/")) and len(point) > best[0]:
                        best = (len(point), fields[2])
        except OSError:
            pass
        _filesystem_types[asked] = best[1]
    return _filesystem_types[asked]


def group_commit(root: Path, appenders: Sequence[BatchAppender]) -> None:
    """Commit every appender that has something to commit (module docstring). One whose partition directory is
    on another filesystem than `root` commits on its own first."""
    device = os.stat(root).st_dev
    together: list[BatchAppender] = []
    for appender in appenders:
        if not appender.to_commit:
            continue
        if appender.log.device != device:
            appender.log.commit(appender.batch_id)
        else:
            together.append(appender)
    new = [a.log for a in together if a.log.record_unsynced]
    if new:
        # new partitions' first records durable before any of their bytes is written (`PartitionLog.open`)
        sync_filesystem(root)
        for plog in new:
            plog.record_made_durable()
    staged: list[tuple[PartitionLog, CommitHead]] = []
    writes: list[Write] = []
    records: list[TmpRecord] = []
    for appender in together:
        staged.append((appender.log, appender.log.stage_commit(appender.batch_id, writes, records)))
    if not staged:
        return
    write_all(writes, records)
    crash_point("commit-tmp-written")
    sync_filesystem(root)
    crash_point("data-fsynced")
    exchange_all([plog.commit_paths for plog, _commit in staged])
    for plog, commit in staged:
        plog.complete_commit(commit)
    sync_filesystem(root)
    crash_point("committed")
    for plog, _commit in staged:
        plog.commit_durable()
