"""The Spark settings the gateway makes (streaming/session.py `spark_settings`): its own choices, and an
operator's `spark_conf` over them; and the JVM options of the embedded default's driver and broker."""

from __future__ import annotations

from pathlib import Path

from embedded.local_kafka import QUICK_START_JVM, java_command
from streaming.config import GatewayConfig
from streaming.session import (
    MAINTENANCE_SHUTDOWN_TIMEOUT_S,
    QUICK_START_DRIVER_JVM,
    ROCKSDB_PROVIDER,
    spark_settings,
)

BLOCK_CACHE = "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB"


def test_the_state_store_is_rocksdb_with_a_small_block_cache() -> None:
    settings = spark_settings(GatewayConfig())
    assert settings["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert settings["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    assert settings[BLOCK_CACHE] == "1"


def test_a_stop_waits_a_bounded_time_for_the_state_stores_background_snapshots() -> None:
    """`stop_state_stores`: Spark's default is 300 s, plus a fixed 60 s after it."""
    assert spark_settings(GatewayConfig())["spark.sql.streaming.stateStore.maintenanceShutdownTimeout"] == (
        f"{MAINTENANCE_SHUTDOWN_TIMEOUT_S}s")
    assert MAINTENANCE_SHUTDOWN_TIMEOUT_S <= 30


def test_the_operators_spark_conf_wins() -> None:
    settings = spark_settings(GatewayConfig(spark_conf={BLOCK_CACHE: "64", "spark.driver.memory": "4g"}))
    assert settings[BLOCK_CACHE] == "64"
    assert settings["spark.driver.memory"] == "4g"


def test_the_embedded_defaults_quick_start_options_reach_the_drivers_jvm_only_when_asked() -> None:
    assert "-XX:+UseSerialGC" not in spark_settings(GatewayConfig())["spark.driver.extraJavaOptions"]
    options = spark_settings(GatewayConfig(), QUICK_START_DRIVER_JVM)["spark.driver.extraJavaOptions"].split()
    assert {"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:MetaspaceSize=64m"} <= set(options)
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options)
    assert "-XX:TieredStopAtLevel=1" not in spark_settings(GatewayConfig())["spark.driver.extraJavaOptions"]


def test_the_embedded_broker_starts_with_the_serial_collector_and_c1_and_others_with_kafkas_gc() -> None:
    quick = java_command("kafka.Kafka", ["server.properties"], heap="512m", log4j_config=Path("log4j2.xml"),
                         jvm=QUICK_START_JVM)
    default = java_command("kafka.Kafka", ["server.properties"], heap="512m", log4j_config=Path("log4j2.xml"))
    assert {"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"} <= set(quick) and "-XX:+UseG1GC" not in quick
    assert "-XX:+UseG1GC" in default and "-XX:+UseSerialGC" not in default
