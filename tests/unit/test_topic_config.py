"""Topic configuration model, validation, deprecated fallback and the reloadable registry."""

from __future__ import annotations

import json
import logging
import os
import pickle
import warnings
from pathlib import Path

import pytest

from sinks.registry_watcher import RegistryWatcher
from validators.codec.record_batch import TimestampType
from validators.topic_config import (
    LONG_MAX,
    ConfigError,
    RecordValidation,
    TopicConfig,
    TopicRegistry,
    topic_config,
    topic_name_error,
)

REPO = Path(__file__).resolve().parents[2]


def cfg(configs: dict | None = None, defaults: dict | None = None, name: str = "t") -> TopicConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return topic_config(name, 3, configs or {}, defaults or {})


# ---- defaults and precedence ---------------------------------------------------------------------------


def test_kafka_4_defaults() -> None:
    c = cfg()
    assert c.message_timestamp_type == TimestampType.CREATE_TIME
    assert c.message_timestamp_before_max_ms == LONG_MAX == 9223372036854775807
    assert c.message_timestamp_after_max_ms == 3600000
    assert c.max_message_bytes == 1048588
    assert c.compression_type == "producer"
    assert c.cleanup_policy == ("delete",)
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.producer_id_expiration_ms == 86400000
    assert c.record_validation is RecordValidation.FULL
    assert not c.compacted
    assert c.target_compression_id is None
    assert c.max_segment_ms == 604800000


def test_topic_config_wins_over_gateway_default_which_wins_over_kafka_default() -> None:
    defaults = {"log.message.timestamp.type": "LogAppendTime", "log.message.timestamp.after.max.ms": "5000",
                "message.max.bytes": 2000000}
    c = cfg({"message.timestamp.after.max.ms": "7000"}, defaults)
    assert c.message_timestamp_type == TimestampType.LOG_APPEND_TIME  # gateway default
    assert c.message_timestamp_after_max_ms == 7000  # topic
    assert c.max_message_bytes == 2000000  # gateway default, JSON number accepted
    assert c.message_timestamp_before_max_ms == LONG_MAX  # Kafka default


def test_broker_synonyms_in_priority_order() -> None:
    assert cfg(defaults={"log.roll.hours": 2}).segment_ms == 7_200_000
    assert cfg(defaults={"log.roll.hours": 2, "log.roll.ms": 5}).segment_ms == 5
    assert cfg(defaults={"log.retention.hours": 1}).retention_ms == 3_600_000
    assert cfg(defaults={"log.retention.hours": 1, "log.retention.minutes": 2}).retention_ms == 120_000
    assert cfg(defaults={"log.retention.minutes": 2, "log.retention.ms": 9}).retention_ms == 9
    assert cfg(defaults={"log.retention.hours": -1}).retention_ms == -1  # negative hours: infinite
    assert cfg(defaults={"log.roll.jitter.hours": 1}).segment_jitter_ms == 3_600_000
    assert cfg(defaults={"log.cleanup.policy": "compact"}).compacted
    assert cfg(defaults={"log.segment.bytes": 1048576}).segment_bytes == 1048576


def test_derived_properties() -> None:
    c = cfg({"cleanup.policy": "compact,delete", "compression.type": "lz4", "max.compaction.lag.ms": 1000})
    assert c.compacted
    assert c.cleanup_policy == ("compact", "delete")
    assert c.target_compression_id == 3
    assert c.max_segment_ms == 1000
    assert cfg({"compression.type": "uncompressed"}).target_compression_id == 0
    assert cfg({"cleanup.policy": ["compact"]}).compacted


# ---- deprecated message.timestamp.difference.max.ms -------------------------------------------------------


def test_topic_difference_is_the_fallback_for_both_windows_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="validators.topic_config"):
        with pytest.warns(DeprecationWarning, match="message.timestamp.difference.max.ms is deprecated"):
            c = topic_config("t", 1, {"message.timestamp.difference.max.ms": "1000"}, {})
    assert c.message_timestamp_before_max_ms == 1000
    assert c.message_timestamp_after_max_ms == 1000
    assert "deprecated" in caplog.text and "message.timestamp.before.max.ms" in caplog.text


def test_explicit_window_wins_over_difference() -> None:
    with pytest.warns(DeprecationWarning):
        c = topic_config("t", 1, {"message.timestamp.difference.max.ms": 1000,
                                  "message.timestamp.after.max.ms": 50}, {})
    assert c.message_timestamp_before_max_ms == 1000
    assert c.message_timestamp_after_max_ms == 50


def test_gateway_level_difference_fallback() -> None:
    with pytest.warns(DeprecationWarning, match="log.message.timestamp.difference.max.ms"):
        c = topic_config("t", 1, {}, {"log.message.timestamp.difference.max.ms": "86400000"})
    assert c.message_timestamp_before_max_ms == 86400000
    assert c.message_timestamp_after_max_ms == 86400000
    # a gateway window is more specific than the gateway difference
    with pytest.warns(DeprecationWarning):
        c = topic_config("t", 1, {}, {"log.message.timestamp.difference.max.ms": "86400000",
                                      "log.message.timestamp.after.max.ms": "10"})
    assert (c.message_timestamp_before_max_ms, c.message_timestamp_after_max_ms) == (86400000, 10)
    # a topic's own difference is more specific than any gateway default
    with pytest.warns(DeprecationWarning):
        c = topic_config("t", 1, {"message.timestamp.difference.max.ms": 5},
                         {"log.message.timestamp.before.max.ms": "10"})
    assert (c.message_timestamp_before_max_ms, c.message_timestamp_after_max_ms) == (5, 5)


def test_no_warning_without_the_deprecated_key() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        topic_config("t", 1, {"message.timestamp.before.max.ms": 1}, {"log.message.timestamp.after.max.ms": 1})


def test_negative_difference_is_rejected() -> None:
    with pytest.raises(ConfigError, match="message.timestamp.difference.max.ms: Value must be at least 0"):
        topic_config("t", 1, {"message.timestamp.difference.max.ms": -1}, {})


# ---- validation: ConfigError names the key and what is allowed ---------------------------------------------


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"message.timestamp.type": "createtime"},
         "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, "
         "LogAppendTime"),
        ({"message.timestamp.before.max.ms": -1},
         "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"),
        ({"message.timestamp.after.max.ms": "soon"},
         "Invalid value soon for configuration message.timestamp.after.max.ms: Not a number of type LONG"),
        ({"message.timestamp.after.max.ms": "9223372036854775808"},
         "Invalid value 9223372036854775808 for configuration message.timestamp.after.max.ms: Not a number of type LONG"),
        ({"max.message.bytes": True},
         "Invalid value True for configuration max.message.bytes: Expected value to be a 64-bit integer (long), but "
         "it was a boolean"),
        ({"max.message.bytes": 1.5},
         "Invalid value 1.5 for configuration max.message.bytes: Expected value to be a 64-bit integer (long), but "
         "it was a float"),
        ({"compression.type": "brotli"},
         "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, "
         "snappy, gzip, producer"),
        ({"cleanup.policy": "compact,archive"},
         "Invalid value compact,archive for configuration cleanup.policy: The value must be one of [compact, delete]"),
        ({"segment.bytes": 1048575},
         "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"),
        ({"segment.ms": 0}, "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ({"retention.ms": -2}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"producer.id.expiration.ms": 0},
         "Invalid value 0 for configuration producer.id.expiration.ms: Value must be at least 1"),
        ({"gateway.record.validation": "paranoid"},
         "Invalid value paranoid for configuration gateway.record.validation: String must be one of: fast, full"),
    ],
)
def test_bad_values_name_the_key_and_the_allowed_values(configs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        topic_config("t", 1, configs, {})
    assert str(e.value) == message


def test_bad_gateway_default_names_the_broker_key() -> None:
    with pytest.raises(ConfigError, match="^Invalid value x for configuration log.message.timestamp.type: String must"):
        topic_config("t", 1, {}, {"log.message.timestamp.type": "x"})


def test_unknown_topic_config_is_an_error() -> None:
    with pytest.raises(ConfigError, match="Unknown topic config name: message.timestamp.typo"):
        topic_config("t", 1, {"message.timestamp.typo": "x"}, {})


@pytest.mark.parametrize("partitions", [0, -1, "x", None, True, 1.0])
def test_bad_partition_count(partitions: object) -> None:
    with pytest.raises(ConfigError, match="Invalid partitions"):
        topic_config("t", partitions, {}, {})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("a" * 250, f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249"),
        ("bad topic", "Topic name is invalid: 'bad topic' contains one or more characters other than ASCII "
                      "alphanumerics, '.', '_' and '-'"),
        ("t\u00e9", "Topic name is invalid: 't\u00e9' contains one or more characters other than ASCII "
                    "alphanumerics, '.', '_' and '-'"),
        ("trailing\n", "Topic name is invalid: 'trailing\n' contains one or more characters other than ASCII "
                       "alphanumerics, '.', '_' and '-'"),
    ],
)
def test_topic_validate_texts(name: str, message: str) -> None:
    assert topic_name_error(name) == message
    with pytest.raises(ConfigError, match="Topic name is invalid"):
        topic_config(name, 1, {}, {})


def test_legal_names() -> None:
    for name in ("a", "a" * 249, "A-z_0.9", "..."):
        assert topic_name_error(name) is None


def test_internal_topics_cannot_be_registered() -> None:
    with pytest.raises(ConfigError, match="internal Kafka topic"):
        topic_config("__consumer_offsets", 1, {}, {})


# ---- registry --------------------------------------------------------------------------------------------


def registry_doc(**topics: dict) -> dict:
    return {"defaults": {"log.message.timestamp.after.max.ms": "3600000"},
            "topics": {name: {"partitions": 2, "configs": c} for name, c in topics.items()}}


def test_registry_from_json_and_pickle() -> None:
    r = TopicRegistry.from_json(registry_doc(a={"message.timestamp.type": "LogAppendTime"}, b={}))
    assert r.get("a").message_timestamp_type == TimestampType.LOG_APPEND_TIME
    assert r.get("b").partitions == 2
    assert r.get("c") is None and r.get(None) is None
    assert "a" in r and len(r) == 2
    assert pickle.loads(pickle.dumps(r)) == r  # the Spark stage ships it in closures


def test_registry_rejects_bad_documents() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        TopicRegistry.loads("{")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        TopicRegistry.from_json([])
    with pytest.raises(ConfigError, match="Unknown topic registry section"):
        TopicRegistry.from_json({"topic": {}})
    with pytest.raises(ConfigError, match="unknown field"):
        TopicRegistry.from_json({"topics": {"a": {"partitions": 1, "config": {}}}})
    with pytest.raises(ConfigError, match="Topic name is invalid"):
        TopicRegistry.from_json({"topics": {"a b": {}}})
    with pytest.raises(ConfigError, match="Cannot read topic registry"):
        TopicRegistry.load("/nonexistent/topics.json")


def test_unknown_gateway_default_is_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="validators.topic_config"):
        r = TopicRegistry.from_json({"defaults": {"log.flush.interval.ms": 3}, "topics": {"a": {}}})
    assert r.get("a").partitions == 1
    assert "log.flush.interval.ms" in caplog.text


def test_every_gateway_default_is_validated_even_if_unused() -> None:
    with pytest.raises(ConfigError, match="log.segment.bytes: Value must be at least 1048576"):
        TopicRegistry.from_json({"defaults": {"log.segment.bytes": 10}, "topics": {}})


def test_project_registry_file_loads() -> None:
    r = TopicRegistry.load(REPO / "conf" / "topics.json")
    assert len(r) >= 1


# ---- RegistryWatcher -------------------------------------------------------------------------------------


def write(path: Path, doc: object, mtime_ns: int) -> None:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    os.utime(path, ns=(mtime_ns, mtime_ns))  # a distinct mtime without sleeping


def test_watcher_reloads_on_change_and_keeps_the_old_registry_on_a_bad_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "topics.json"
    write(path, registry_doc(a={}), 1_000_000_000_000_000_000)
    watcher = RegistryWatcher(path)
    first = watcher.current()
    assert watcher.current() is first  # unchanged file: no reload
    assert watcher.generation == 0 and watcher.last_error is None

    write(path, registry_doc(a={}, b={"message.timestamp.type": "LogAppendTime"}), 1_000_000_001_000_000_000)
    second = watcher.current()
    assert second is not first and "b" in second and watcher.generation == 1

    with caplog.at_level(logging.WARNING, logger="gateway.registry"):
        write(path, registry_doc(a={"message.timestamp.type": "Whenever"}), 1_000_000_002_000_000_000)
        assert watcher.current() is second
        assert watcher.current() is second  # logged once per file version
    assert "message.timestamp.type" in watcher.last_error
    assert caplog.text.count("not reloaded") == 1

    write(path, "{broken", 1_000_000_003_000_000_000)
    assert watcher.current() is second
    assert "not valid JSON" in watcher.last_error

    path.unlink()
    assert watcher.current() is second
    assert "Cannot read topic registry" in watcher.last_error

    write(path, registry_doc(c={}), 1_000_000_004_000_000_000)
    third = watcher.current()
    assert list(third.topics) == ["c"] and watcher.last_error is None and watcher.generation == 2


def test_watcher_needs_a_valid_first_load(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text('{"topics": {"x": {"partitions": 0}}}')
    with pytest.raises(ConfigError, match="Invalid partitions"):
        RegistryWatcher(path)


def test_a_worker_started_after_a_bad_edit_serves_the_last_good_registry_not_the_start_one(tmp_path: Path) -> None:
    """Spark pickles the driver's watcher (registry as at query start) into every new worker; with
    a shared last-good record, a fresh worker that meets a broken file serves the newest valid one."""
    path, last_good = tmp_path / "topics.json", tmp_path / "last-good.json"
    write(path, registry_doc(a={}), 1_000_000_000_000_000_000)
    driver = RegistryWatcher(path, last_good_path=last_good)
    pickled_at_start = pickle.dumps(driver)

    write(path, registry_doc(a={}, b={}), 1_000_000_001_000_000_000)
    assert "b" in driver.current()  # a running worker reloads the good edit and records it
    assert json.loads(last_good.read_text())["topics"].keys() == {"a", "b"}

    write(path, "{ not json", 1_000_000_002_000_000_000)
    fresh_worker = pickle.loads(pickled_at_start)
    registry = fresh_worker.current()
    assert "b" in registry and "a" in registry
    assert fresh_worker.last_error is not None and "not valid JSON" in fresh_worker.last_error
