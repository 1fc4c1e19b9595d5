"""`make jars`'s class data sharing archives (`embedded/class_data_sharing.py`) made: a local broker dumping the
classes it loads, and a Spark driver running the gateway's query over a few demo batches on that broker.

    python -m streaming.class_data_archives
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from embedded.class_data_sharing import ARCHIVE_DIR, KAFKA_ARCHIVE, REPO_ROOT, SPARK_DRIVER_ARCHIVE, dumping
from embedded.demo import DemoTraffic
from embedded.local_kafka import LocalKafka, free_port
from kafka_cluster.admin import create_topics
from streaming.config_file import load_gateway_config
from streaming.query import start_gateway, topic_specs
from streaming.session import SPARK_LOG_CONFIG, build_spark_session, stop_session

log = logging.getLogger(__name__)


def make_archives(scratch: Path) -> None:
    """A local broker dumping `KAFKA_ARCHIVE`, and a Spark driver dumping `SPARK_DRIVER_ARCHIVE` that runs the
    gateway's query over a few demo batches on that broker (the Kafka source, the state store, the stage's
    Python path: what a first micro-batch loads)."""
    broker = LocalKafka(scratch / "kafka", port=free_port(), class_data=dumping(KAFKA_ARCHIVE)).start()
    try:
        options = " ".join([f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG}", *dumping(SPARK_DRIVER_ARCHIVE)])
        config = load_gateway_config(REPO_ROOT / "conf" / "gateway.json").with_overrides(
            bootstrap_servers=broker.bootstrap_servers, segments_root=str(scratch / "segments"),
            checkpoint_root=str(scratch / "checkpoints"), spark_conf={"spark.driver.extraJavaOptions": options})
        create_topics(config.cluster, topic_specs(config))
        demo = DemoTraffic(config.cluster, config.ingress_topic, batches_per_second=50)
        demo.start()
        spark = build_spark_session(config, app_name="class-data-sharing")
        demo.stop()
        demo.join()
        query, _ = start_gateway(spark, config, available_now=True)
        query.awaitTermination(300)
        jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # PySpark's handle on its JVM
        stop_session(spark)
        jvm.stdin.close()  # PySpark's JVM exits at the end of its input, writing its archive
        jvm.wait(timeout=300)
    finally:
        broker.stop()  # SIGTERM: a clean exit, which writes its archive


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # py4j's INFO lines are not for `make jars`
    log.setLevel(logging.INFO)
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    for archive in (KAFKA_ARCHIVE, SPARK_DRIVER_ARCHIVE):
        archive.unlink(missing_ok=True)  # a JVM dumping must not map the archive it replaces
    with tempfile.TemporaryDirectory(prefix="gateway-cds-") as scratch:
        make_archives(Path(scratch))
    for archive in (KAFKA_ARCHIVE, SPARK_DRIVER_ARCHIVE):
        if not archive.is_file():
            log.warning("class data sharing: %s was not written; its JVMs start without it", archive)
        else:
            log.info("class data sharing: %s (%.0f MB)", archive, archive.stat().st_size / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
