"""Checkpoint files through the gateway's checkpoint manager (jvm/, `LocalCheckpointFileManager`).

On the real session of the tests: the manager is the one Spark uses for the offset and commit logs and
the state stores; it writes atomically (nothing visible before close, nothing left by a cancel), gives
files and directories the permissions Hadoop's chmod gave them (0666 / 0777 without the umask), and
runs no child process, where Hadoop's local filesystem forks `chmod` for every file it creates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streaming.session import GATEWAY_JAR, LOCAL_CHECKPOINTS


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _children_minor_faults(pid: int) -> int:
    """cminflt of /proc/<pid>/stat: grows with every child process the JVM waited for (a forked chmod)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[8])  # field 11 of proc(5), counted after the command name


def _manager(spark: SparkSession, root: Path) -> tuple[Any, Any]:
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    path = jvm.org.apache.hadoop.fs.Path(root.as_uri())
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(path, conf)
    return manager, jvm.org.apache.hadoop.fs.Path


def _jvm_pid(spark: SparkSession) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


def test_the_gateway_jar_is_built_and_spark_uses_its_checkpoint_manager(spark: SparkSession, tmp_path: Path) -> None:
    assert GATEWAY_JAR.exists(), "make jars builds the gateway's jar"
    manager, _ = _manager(spark, tmp_path)
    assert manager.getClass().getName() == LOCAL_CHECKPOINTS


def test_files_appear_whole_at_close_with_hadoops_permissions_and_no_process_forked(
    spark: SparkSession, tmp_path: Path
) -> None:
    manager, hadoop_path = _manager(spark, tmp_path)
    pid = _jvm_pid(spark)
    before = _children_minor_faults(pid)
    for i in range(5):
        out = manager.createAtomic(hadoop_path((tmp_path / "offsets" / str(i)).as_uri()), False)
        out.write(b"v1\n{}" * (i + 1))
        assert not (tmp_path / "offsets" / str(i)).exists(), "nothing is visible before close"
        out.close()
    manager.mkdirs(hadoop_path((tmp_path / "state" / "0" / "1").as_uri()))
    assert _children_minor_faults(pid) == before, "the JVM ran a child process (a forked chmod?)"

    for i in range(5):
        written = tmp_path / "offsets" / str(i)
        assert written.read_bytes() == b"v1\n{}" * (i + 1)
        assert written.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert (tmp_path / "state" / "0" / "1").stat().st_mode & 0o777 == 0o777 & ~_umask()
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [str(i) for i in range(5)], "no temp files left"


def test_a_cancelled_file_leaves_nothing_and_an_existing_one_is_not_overwritten(
    spark: SparkSession, tmp_path: Path
) -> None:
    manager, hadoop_path = _manager(spark, tmp_path)
    out = manager.createAtomic(hadoop_path((tmp_path / "commits" / "7").as_uri()), False)
    out.write(b"partial")
    out.cancel()
    assert not (tmp_path / "commits").exists() or list((tmp_path / "commits").iterdir()) == []

    (tmp_path / "commits").mkdir(exist_ok=True)
    (tmp_path / "commits" / "8").write_bytes(b"first")
    out = manager.createAtomic(hadoop_path((tmp_path / "commits" / "8").as_uri()), False)
    out.write(b"second")
    try:
        out.close()
        raised = False
    except Exception as e:  # noqa: BLE001 — py4j wraps the JVM's FileAlreadyExistsException
        raised = "FileAlreadyExists" in str(e) or "already exists" in str(e)
    assert raised, "a second writer of the same batch file must fail, as Spark's own manager does"
    assert (tmp_path / "commits" / "8").read_bytes() == b"first"
