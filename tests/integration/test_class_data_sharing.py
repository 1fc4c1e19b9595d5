"""The class data sharing archives `make jars` makes (embedded/class_data_sharing.py): each is mapped by a JVM
on the classpath it was made for, and an archive that does not match is ignored without a word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from embedded.class_data_sharing import KAFKA_ARCHIVE, SPARK_DRIVER_ARCHIVE, using
from embedded.local_kafka import java_executable, kafka_classpath

pytestmark = pytest.mark.integration


def _java(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([java_executable(), *args], capture_output=True, text=True, timeout=120)


def _mapped(archive: Path, classpath: str) -> None:
    assert archive.is_file(), f"{archive} is missing: `make jars` makes it"
    # -Xshare:on: the JVM refuses to start unless it maps the archive (its JDK, its jars, their sizes and times)
    mapped = _java(*using(archive), "-Xshare:on", "-cp", classpath, "-version")
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr


def test_the_kafka_archive_is_mapped_on_the_brokers_classpath() -> None:
    _mapped(KAFKA_ARCHIVE, kafka_classpath())


def test_the_spark_driver_archive_is_mapped_on_the_drivers_classpath(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    _mapped(SPARK_DRIVER_ARCHIVE, jvm.System.getProperty("java.class.path"))


def test_an_archive_that_does_not_match_is_ignored_in_silence(tmp_path: Path) -> None:
    stale = tmp_path / "stale.jsa"
    stale.write_bytes(b"not an archive of this JDK\n" * 100)
    started = _java(*using(stale), "-cp", kafka_classpath(), "-version")
    assert started.returncode == 0, started.stderr
    said = (started.stdout + started.stderr).lower()
    assert "warning" not in said and "error" not in said and "cds" not in said, said
