"""Class data sharing (the JDK's AppCDS) for the JVMs the gateway starts itself: Spark's driver, the local
Kafka broker and Kafka's tools. Loading and verifying their classes is most of a JVM's start on a small
machine; an archive of those classes, mapped at start, takes seconds off each start (docs/performance.md).

`make jars` makes the archives (`python -m streaming.class_data_archives`): a local broker, and a Spark driver
running the gateway's query over a few demo batches on it, each dumping the classes it loaded when its JVM
exits (`-XX:ArchiveClassesAtExit`). A JVM given an archive that no longer matches its JDK or its jars ignores it
and starts as without one; the `cds` log is off so that this says nothing."""

from __future__ import annotations

from pathlib import Path

from contract.repository import REPO_ROOT

ARCHIVE_DIR = REPO_ROOT / ".jvm" / "cds"
SPARK_DRIVER_ARCHIVE = ARCHIVE_DIR / "spark-driver.jsa"
KAFKA_ARCHIVE = ARCHIVE_DIR / "kafka.jsa"
_QUIET = "-Xlog:cds*=off"


def using(archive: Path) -> list[str]:
    """The JVM options that map `archive`, or none when it has not been made."""
    return [f"-XX:SharedArchiveFile={archive}", _QUIET] if archive.is_file() else []


def dumping(archive: Path) -> list[str]:
    """The JVM options that write the classes the JVM loaded to `archive` when it exits."""
    return [f"-XX:ArchiveClassesAtExit={archive}", _QUIET]
