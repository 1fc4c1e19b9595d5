"""The Spark settings the gateway makes (streaming/session.py `spark_settings`): its own choices, and an
operator's `spark_conf` over them."""

from __future__ import annotations

from streaming.config import GatewayConfig
from streaming.session import ROCKSDB_PROVIDER, spark_settings

BLOCK_CACHE = "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB"


def test_the_state_store_is_rocksdb_with_a_small_block_cache() -> None:
    settings = spark_settings(GatewayConfig())
    assert settings["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert settings["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    assert settings[BLOCK_CACHE] == "1"


def test_the_operators_spark_conf_wins() -> None:
    settings = spark_settings(GatewayConfig(spark_conf={BLOCK_CACHE: "64", "spark.driver.memory": "4g"}))
    assert settings[BLOCK_CACHE] == "64"
    assert settings["spark.driver.memory"] == "4g"
