"""The segments root must be one filesystem that the driver and every executor see (docs/performance.md).

Target partitions move between executors from one micro-batch to the next, and retention, the
metrics scan and `gateway segments` run on the driver: a root that is a local directory on each host
would split a partition's log across hosts. At query start the driver writes a marker file with a
random token into the root, and a Spark job with several tasks per executor core reads it back and
writes a probe file of its own: every host that cannot is named in a `SharedStorageError`.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from pyspark.sql import SparkSession

MARKER_PREFIX = ".gateway-shared-storage-"


class SharedStorageError(RuntimeError):
    """The segments root is not the same writable filesystem on the driver and every executor."""


def _probe(root: str, marker: str, token: str) -> tuple[str, str | None]:
    """On an executor: (host, None) when the driver's marker is visible and the root writable, else the problem."""
    host = socket.gethostname()
    try:
        seen = (Path(root) / marker).read_text()
    except OSError as e:
        return host, f"cannot read the driver's marker {Path(root) / marker}: {e.strerror or e}"
    if seen != token:
        return host, f"{Path(root) / marker} has other contents than the driver wrote (another filesystem)"
    probe = Path(root) / f"{marker}.{host}.{os.getpid()}"
    try:
        probe.write_text(token)
        probe.unlink()
    except OSError as e:
        return host, f"cannot write into {root}: {e.strerror or e}"
    return host, None


def check_shared_storage(spark: SparkSession, root: Path, tasks_per_core: int = 2) -> list[str]:
    """Raise `SharedStorageError` unless every executor that ran a probe task sees the driver's marker in
    `root` and can write there; returns the hosts checked. Spark spreads the probe tasks over the
    executors' cores (`defaultParallelism`), several per core."""
    root.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    marker = f"{MARKER_PREFIX}{token[:8]}"
    (root / marker).write_text(token)
    try:
        sc = spark.sparkContext
        n = max(2, sc.defaultParallelism * tasks_per_core)
        root_s = str(root)
        results = sc.parallelize(range(n), n).map(lambda _: _probe(root_s, marker, token)).distinct().collect()
    finally:
        (root / marker).unlink(missing_ok=True)
    problems = sorted({f"{host}: {problem}" for host, problem in results if problem is not None})
    if problems:
        raise SharedStorageError(
            f"segments_root {root} is not one filesystem shared by the driver and every executor "
            f"({'; '.join(problems)}). Mount the same shared filesystem (NFSv4, EFS, ...) at this path on every "
            "host, or set segments_root to a path that is."
        )
    return sorted({host for host, _ in results})
