"""The one SparkSession factory: master, Kafka connector jars, the Python for executors, RocksDB state
store, checkpoints, and the gateway's code shipped to a cluster.

Precedence of Spark settings: what spark-submit was given (`--master`, `--jars`, `--conf`) > the
config's `spark_conf` (and `gateway run --conf`) > the defaults below.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark import SparkConf
from pyspark.sql import SparkSession

from embedded.class_data_sharing import SPARK_DRIVER_ARCHIVE, using
from embedded.native_libraries import unpacked_rocksdb_dir
from kafka_cluster.security import SPARK_SECRET_OPTIONS
from streaming.config import REPO_ROOT, GatewayConfig

log = logging.getLogger("gateway.session")

KAFKA_CONNECTOR_JARS_DIR = REPO_ROOT / ".jvm" / "spark"  # `make jars`: Spark's Kafka connector and its clients
GATEWAY_JAR = REPO_ROOT / ".jvm" / "gateway" / "gateway-checkpoint.jar"  # `make jars` compiles jvm/ into it
PYFILES_DIR = REPO_ROOT / "build" / "pyfiles"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
MAINTENANCE_SHUTDOWN_TIMEOUT_S = 10  # `stop_state_stores`
SPARK_FILE_SYSTEM_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
LOCAL_CHECKPOINTS = "org.ingestgateway.checkpoint.LocalCheckpointFileManager"  # jvm/, in GATEWAY_JAR
# The import roots executors need, and the files besides modules they read (package resources).
SHIPPED_PACKAGES = ("contract", "validators", "storage", "kafka_cluster", "sinks", "streaming")
SHIPPED_PATTERNS = ("*.py", "*.avsc", "*.so")
ENVIRONMENT_DIR = "environment"  # where spark.archives unpacks the packed venv on an executor


def connector_jars() -> list[Path]:
    jars = sorted(KAFKA_CONNECTOR_JARS_DIR.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise FileNotFoundError(f"Spark's Kafka connector is missing from {KAFKA_CONNECTOR_JARS_DIR}: run `make jars`")
    return jars


def spark_jars() -> list[Path]:
    """Every jar the gateway gives Spark: the Kafka connector's and, when built, the gateway's own."""
    return [*connector_jars(), *([GATEWAY_JAR] if GATEWAY_JAR.exists() else [])]


def checkpoint_file_manager() -> str:
    """Spark's checkpoint file manager class for the query: the gateway's fork-free one when its jar is built."""
    if GATEWAY_JAR.exists():
        return LOCAL_CHECKPOINTS
    log.warning("%s is missing (`make jars` builds it): checkpoint files go through Spark's %s, which forks "
                "chmod for every file", GATEWAY_JAR, SPARK_FILE_SYSTEM_CHECKPOINTS)
    return SPARK_FILE_SYSTEM_CHECKPOINTS


def is_local(master: str) -> bool:
    return master.startswith("local")


# Rows per Arrow batch across the JVM/Python boundary: the ingress batches into the stage, and the decisions
# into the sink's tasks. The sink's worker gets no row until a whole Arrow batch of decisions is made, so a
# small batch lets it append the first group's decisions while the stage decides the next (measured, 100 x
# 100 B batches in 4 partitions: 3 000 a micro-batch 0.74x the floor at 250 rows, 0.62-0.66x at 2 000).
ARROW_MAX_RECORDS_PER_BATCH = 250
SPARK_LOG_CONFIG = REPO_ROOT / "conf" / "log4j2.properties"


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


# The driver beside `gateway run`'s embedded broker serves a demo and a developer's tries: the serial collector
# and C1 alone start it with less CPU on a small machine (C2's compilations of the first micro-batch's code took
# ~1.8 s of CPU; the first response ~2 s sooner on two cores, docs/performance.md) at up to 15-25 % of its
# throughput; a driver in front of an operator's cluster keeps the JDK's defaults. Its first metadata
# threshold raised above the ~21 MB of class metadata a first micro-batch loads beside the archive's (the JDK's
# default is 21 MB): otherwise a full collection of ~0.16 s ("Metadata GC Threshold") pauses the first
# micro-batch's planning.
QUICK_START_DRIVER_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:MetaspaceSize=64m")


def spark_settings(config: GatewayConfig, driver_jvm: Sequence[str] = ()) -> dict[str, str]:
    """Every Spark setting the gateway makes, with `config.spark_conf` applied last."""
    settings = {
        "spark.master": config.spark_master,
        "spark.jars": ",".join(str(j) for j in spark_jars()),
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        # How often an idle query with trigger 0 looks for new ingress data: a lone produce waits half of it
        # on average. An idle gateway (process tree) used 0.20 of a core at Spark's 10 ms, 0.17 at 20 ms and
        # 0.03-0.13 at 50 ms.
        "spark.sql.streaming.pollingDelay": f"{config.idle_poll_ms}ms",
        # Checkpoint files (offset and commit logs, state store changelogs) on a local or NFS path through
        # the gateway's manager (jvm/): Spark's FileSystem-based one, writing local files itself. Spark's
        # default FileContext manager, on Hadoop without its native library, forks `readlink` and `chmod`
        # for every file it creates and renames, and Hadoop's FileSystem forks `chmod` — milliseconds a fork
        # from the JVM, on walCommit, commitOffsets and every task's state commit (~40 -> ~5 ms, make bench);
        # the checksummed filesystems add a `.crc` beside every file. None of them fsyncs; the rename is
        # atomic on a local or NFS path. (`fs.file.impl` stays Hadoop's LocalFileSystem: the state store's
        # snapshot uploads need `FileSystem.getLocal`.) A query may set these back (its SQL conf wins).
        "spark.sql.streaming.checkpointFileManagerClass": checkpoint_file_manager(),
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # Commit a micro-batch's state as a changelog, not a new RocksDB snapshot (snapshots are taken
        # in the background): ~0.1 s less per micro-batch on a 2-core machine (make bench).
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # The state is one row per target partition (a few KB of producer state): Spark's 8 MB block cache
        # per store only fills, over hours, with blocks of SST files already compacted away, and the
        # store's memory climbs until it is full. 1 MB holds the live state many times over; the store's
        # memory then settles at the cache plus a ~1 MB memtable within minutes (make soak, docs/performance.md).
        "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB": "1",
        # A stop waits this long for a background snapshot under way (Spark's default 300 s); one cut short is
        # taken again from the changelog at the next start (`stop_state_stores`).
        "spark.sql.streaming.stateStore.maintenanceShutdownTimeout": f"{MAINTENANCE_SHUTDOWN_TIMEOUT_S}s",
        "spark.sql.streaming.checkpointLocation": str(config.path(config.checkpoint_root)),
        "spark.ui.enabled": str(config.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # The Kafka source's options carry the JAAS line and a client key (kafka_cluster/security.py): the plan,
        # the UI and the event log show them redacted. Spark's defaults cover `url` options and `password` keys.
        "spark.sql.redaction.options.regex": SPARK_SECRET_OPTIONS,
        "spark.driver.memory": "2g",
        # Spark's own log lines in the gateway's format, routine warnings left out (conf/log4j2.properties)
        # ... and its classes mapped from the archive `make jars` made, if any (embedded/class_data_sharing.py)
        "spark.driver.extraJavaOptions": " ".join([f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG}",
                                                   *using(SPARK_DRIVER_ARCHIVE), *driver_jvm]),
        # The query's SQL Python runners start their workers from the same daemon as a plain Python job, so
        # the workers `streaming/worker_warm_up.py` forks, imports into and connects are the query's: Spark
        # keys its Python daemons by the workers' environment, and SPARK_SIMPLIFIED_TRACEBACK is the one variable
        # only the SQL runners add. A failing task's Python traceback keeps PySpark's own frames.
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
        # Arrow batches for the pandas stage; keep them small enough for modest executors.
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_MAX_RECORDS_PER_BATCH),
        # Workers run the project's interpreter (same venv, same pinned libraries) ...
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    rocksdb = unpacked_rocksdb_dir()
    if rocksdb is not None:
        # RocksDB's JNI library as `make jars` unpacked it, not a 15 MB copy in /tmp per JVM start that a killed
        # JVM leaves behind (embedded/native_libraries.py)
        settings["spark.driver.extraLibraryPath"] = settings["spark.executor.extraLibraryPath"] = str(rocksdb)
    if config.python_archive and not is_local(config.spark_master):
        # ... or, on a cluster, the packed venv shipped with the job and unpacked beside each executor
        archive = config.path(config.python_archive)
        settings["spark.archives"] = f"{archive}#{ENVIRONMENT_DIR}"
        settings["spark.pyspark.python"] = f"./{ENVIRONMENT_DIR}/bin/python"
    settings.update(config.spark_conf)
    return settings


def build_spark_session(config: GatewayConfig, app_name: str = "ingest-gateway",
                        driver_jvm: Sequence[str] = ()) -> SparkSession:
    """The gateway's session; `driver_jvm`: more options for the driver's JVM (QUICK_START_DRIVER_JVM)."""
    settings = spark_settings(config, driver_jvm)
    # PySpark takes the workers' interpreter from PYSPARK_PYTHON when the context starts (the setting
    # only reaches it through spark-submit): the packed environment on a cluster, else this interpreter.
    if "spark.archives" in settings and ENVIRONMENT_DIR in settings["spark.pyspark.python"]:
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    else:
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
    given = SparkConf() if launched_by_spark_submit() else None
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        if given is None or not given.contains(key):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not is_local(spark.sparkContext.master):
        # Executors on other hosts need the project's code: ship the import roots.
        spark.sparkContext.addPyFile(str(package_zip()))
    return spark


def stop_state_stores(spark: SparkSession) -> None:
    """Spark's `StateStore.stop()` in the driver's JVM: the loaded state store providers closed and their
    maintenance thread stopped. Left running, that thread can wake while the session stops and log
    `IllegalStateException: SparkEnv not active, cannot do maintenance on StateStores` with its stack, at
    a routine stop. Only once no query runs; a query started later loads its stores again.

    The maintenance threads are stopped first, outside the providers' lock: `stop()` waits for them while
    it holds that lock, and a maintenance task that failed (or checks whether its store is still active)
    takes the same lock to unload its provider, so the two wait for each other until the pool's shutdown
    timeout (`MAINTENANCE_SHUTDOWN_TIMEOUT_S`) plus Spark's fixed 60 s. Spark keeps the lock-free stop for
    its tests (`stopMaintenanceTaskWithoutLock`); a Spark without it stops the old way."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # an active session's context has its JVM view
    state_store = getattr(getattr(jvm.org.apache.spark.sql.execution.streaming.state, "StateStore$"), "MODULE$")
    with contextlib.suppress(Py4JError):
        state_store.stopMaintenanceTaskWithoutLock()
    state_store.stop()


def stop_session(spark: SparkSession) -> None:
    """Stop Spark as the gateway does once its queries have stopped: the state stores first
    (`stop_state_stores`), then the session."""
    stop_state_stores(spark)
    spark.stop()


def package_zip(directory: Path = PYFILES_DIR) -> Path:
    """The gateway's code as one zip for `addPyFile`, named by its content: every start of the same code
    reuses one file (nothing left behind per start), and a running driver's zip is never rewritten.
    It carries the native record walk built by `pip install -e .` — zipimport cannot load it, so
    `native_walk` extracts it on the executor (same platform and interpreter ABI; else the Python walk)."""
    files = sorted(
        {f for package in SHIPPED_PACKAGES for pattern in SHIPPED_PATTERNS for f in (REPO_ROOT / package).rglob(pattern)
         if "__pycache__" not in f.parts}
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            info = zipfile.ZipInfo(str(f.relative_to(REPO_ROOT)), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, f.read_bytes())
    data = buffer.getvalue()
    target = directory / f"gateway-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        directory.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return target
