"""The gateway config checked before anything starts (`streaming.config_rules`): every setting given a wrong
value is one line naming the setting, the value and what is expected, and `gateway run` exits 2 with it before a
JVM or a broker starts, never with a traceback."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streaming.config import DEFAULT_CONFIG, REPO_ROOT, GatewayConfig
from streaming.config_file import GatewayConfigError, load_gateway_config
from streaming.config_rules import RULES, setting_problems

STANDBY_CONFIG = REPO_ROOT / "conf" / "standby.json"

# Every setting with a value it must refuse, and what the line says it expects.
WRONG: dict[str, tuple[Any, str]] = {
    "bootstrap_servers": ("kafka-1", "expected HOST:PORT[,HOST:PORT...], or null (a local broker) (no :PORT)"),
    "kafka": ("SASL_SSL", "expected an object of Kafka client properties, got a string"),
    "consumer_group_prefix": (7, "expected a string"),
    "local_broker_port": ("nine", "expected a whole number from 1 to 65535"),
    "local_broker_dir": ("", "expected a directory's path"),
    "ingress_topic": ("gateway ingress", "expected a Kafka topic name (Topic name is invalid: 'gateway ingress' "
                      "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-')"),
    "ingress_partitions": (0, "expected a whole number from 1 to 2147483647"),
    "response_topic": ("", "expected a Kafka topic name (Topic name is invalid: the empty string is not allowed)"),
    "dlq_topic": ("a/b", "expected a Kafka topic name (Topic name is invalid: 'a/b' contains"),
    "groups_topic": (5, "expected a Kafka topic name"),
    "security_topic": ("..", "expected a Kafka topic name (Topic name is invalid: '..' is not allowed)"),
    "doors_topic": ("x" * 250, "or null (each door a cluster of its own) (Topic name is invalid: the length"),
    "registry_topic": (False, "expected a Kafka topic name, or null (<ingress_topic>.topics)"),
    "transaction_state_topic": ("a b", "or null (<ingress_topic>.transaction_state) (Topic name is invalid"),
    "transaction_max_timeout_ms": (0, "expected a whole number of milliseconds from 1 to 2147483647"),
    "topics_file": ("conf/topic.json", f"expected a topic registry file (no such file {REPO_ROOT / 'conf/topic.json'})"),
    "segments_root": (None, "expected a directory's path"),
    "checkpoint_root": ("conf/gateway.json", f"expected a directory's path ({REPO_ROOT / 'conf/gateway.json'} is a "
                        "file)"),
    "query_name": ("a/b", "expected a name without '/' (the query's checkpoint directory)"),
    "retention_check_interval_ms": (1.5, "expected a whole number of milliseconds from 1 to 2147483647"),
    "spark_master": ("lokal[2]", "expected a Spark master URL: local, local[N], local[N,F], local[*]"),
    "spark_conf": ({"spark.executor.memory": ["2g"]}, 'expected an object of Spark settings'),
    "python_archive": ("", "expected a file's path, or null (executors run the driver's interpreter)"),
    "shuffle_partitions": (-1, "expected a whole number from 1 to 2147483647"),
    "trigger_interval": ("5 parsecs", 'expected a Spark interval such as "0 seconds"'),
    "idle_poll_ms": (-1, "expected a whole number of milliseconds from 0 to 2147483647"),
    "max_offsets_per_trigger": ("20000", "expected a whole number from 1 to 2147483647"),
    "ui_enabled": ("true", "expected true or false"),
    "metrics_address": ("127.0.0.1", "expected HOST:PORT (port 0: a free one) (no :PORT)"),
    "log_summary_interval_ms": (0, "expected a whole number of milliseconds from 1 to 2147483647"),
    "metrics_log_file": ("conf", f"expected a file's path, or null (none) ({REPO_ROOT / 'conf'} is a directory)"),
    "publish_timeout_ms": (2**31, "expected a whole number of milliseconds from 1 to 2147483647"),
    "restart_backoff_initial_s": (0, "expected a number of seconds above 0"),
    "restart_backoff_max_s": ("60", "expected a number of seconds above 0"),
    "startup_timeout_ms": (True, "expected a whole number of milliseconds from 1 to 2147483647"),
    "check_shared_storage": (1, "expected true or false"),
    "front_door_address": ("127.0.0.1:abc", "expected HOST:PORT (port 0: a free one), or null (no front door) "
                           "(port 'abc' is not a number)"),
    "front_door_advertised_address": ("gateway.example.com:0", "(port 0 is outside 1..65535)"),
    "front_door_max_request_bytes": (0, "expected a whole number from 1 to 2147483647"),
    "front_door_nodes": (101, "expected a whole number from 1 to 100"),
    "front_door_id": (0, "expected a whole number from 1 to 2147483647"),
    "front_door_session_timeout_ms": (None, "expected a whole number of milliseconds from 1 to 2147483647"),
    "group_initial_rebalance_delay_ms": (-5, "expected a whole number of milliseconds from 0 to 2147483647"),
    "front_door_security": ({"listeners": "SASL_SSL://0.0.0.0:abc"}, "front_door_security.listeners: "
                            "'SASL_SSL://0.0.0.0:abc' is not NAME://host:port"),
    "front_door_allow_unauthenticated": ("no", "expected true or false"),
}


def _config_file(tmp_path: Path, settings: dict[str, Any]) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(settings))
    return path


def _refusal(path: Path, **overrides: Any) -> tuple[str, ...]:
    with pytest.raises(GatewayConfigError) as refused:
        load_gateway_config(path, **overrides)
    return refused.value.lines


def test_every_setting_has_a_rule_and_a_wrong_value_here() -> None:
    settings = {f.name for f in dataclasses.fields(GatewayConfig)}
    assert sorted(RULES) == sorted(settings) and sorted(WRONG) == sorted(settings)


def test_the_defaults_and_the_shipped_configs_are_right() -> None:
    assert setting_problems(dataclasses.asdict(GatewayConfig()), REPO_ROOT) == []
    load_gateway_config(DEFAULT_CONFIG)
    load_gateway_config(STANDBY_CONFIG)


@pytest.mark.parametrize(("key", "value"), [
    *[("trigger_interval", v) for v in ("0 seconds", "500 milliseconds", "1 MINUTE", "1 hour 30 minutes",
                                         "interval 5 seconds", "0.5 seconds", "2 weeks")],  # as Spark 4.2 reads them
    *[("spark_master", v) for v in ("local", "local[4]", "local[*]", "local[*,4]", "local[2, 3]",
                                     "local-cluster[2,1,1024]", "spark://h1:7077,h2:7077", "yarn", "k8s://https://k:6443")],
    ("bootstrap_servers", "kafka-1:9092, kafka-2:9092,SASL_SSL://[::1]:9094"),
    ("front_door_address", ":9093"), ("front_door_address", None), ("metrics_address", "[::1]:0"),
])
def test_what_kafka_and_spark_take_is_taken(key: str, value: Any) -> None:
    assert setting_problems({key: value}, REPO_ROOT) == []


@pytest.mark.parametrize(("key", "value"), [
    ("trigger_interval", "1minute"), ("trigger_interval", "10s"), ("trigger_interval", "1 month"),
    ("spark_master", "local[x]"), ("bootstrap_servers", "kafka-1:9092;kafka-2:9092"), ("metrics_address", "::1:9108"),
])
def test_what_kafka_and_spark_refuse_is_refused(key: str, value: Any) -> None:
    assert len(setting_problems({key: value}, REPO_ROOT)) == 1


@pytest.mark.parametrize("key", sorted(WRONG))
def test_a_wrong_value_is_one_line_naming_the_setting_the_value_and_what_is_expected(key: str, tmp_path: Path) -> None:
    value, expected = WRONG[key]
    path = _config_file(tmp_path, {key: value})
    lines = _refusal(path)
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert expected in lines[0], lines[0]
    if RULES[key].secret:  # a block that may hold secrets: the line names the setting inside it, never the value
        assert lines[0].startswith(f"{path}: {key}") and json.dumps(value) not in lines[0]
    else:
        assert lines[0].startswith(f"{path}: {key} = {json.dumps(value)[:100]}")


def test_the_lines_a_user_met(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {"local_broker_port": "nine"})
    assert _refusal(path) == (f'{path}: local_broker_port = "nine": expected a whole number from 1 to 65535',)
    path = _config_file(tmp_path, {"front_door_address": "127.0.0.1:abc"})
    assert _refusal(path) == (f'{path}: front_door_address = "127.0.0.1:abc": expected HOST:PORT (port 0: a free '
                              "one), or null (no front door) (port 'abc' is not a number)",)
    path = _config_file(tmp_path, {"front_door_adress": "127.0.0.1:9093"})
    assert _refusal(path) == (f"{path}: front_door_adress: unknown setting; did you mean front_door_address?",)
    path = _config_file(tmp_path, {"zzz": 1})
    assert _refusal(path) == (f"{path}: zzz: unknown setting; the settings are in docs/configuration.md",)


def test_every_problem_is_a_line_of_its_own(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {"local_broker_port": "nine", "ui_enabled": "yes", "spark_masterr": "local"})
    assert [line.split(": ")[1].split(" ")[0] for line in _refusal(path)] == [
        "spark_masterr", "local_broker_port", "ui_enabled"]


def test_a_secret_is_never_shown(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {"kafka": {"security.protocol": "SASL_SSLL", "sasl.password": "hunter2"}})
    (line,) = _refusal(path)
    assert line.startswith(f"{path}: kafka.security.protocol: unknown protocol 'SASL_SSLL'") and "hunter2" not in line


def test_a_topic_registry_that_does_not_parse_is_named(tmp_path: Path) -> None:
    registry = tmp_path / "topics.json"
    registry.write_text('{"topics": {"t": {"partitions": 0}}}')
    path = _config_file(tmp_path, {"topics_file": str(registry)})
    (line,) = _refusal(path)
    assert line == (f'{path}: topics_file = "{registry}": expected a topic registry file (Invalid partitions 0 for '
                    "topic t: must be an integer of at least 1)")


@pytest.mark.parametrize(("settings", "line"), [
    ({"restart_backoff_initial_s": 10, "restart_backoff_max_s": 5},
     "restart_backoff_max_s = 5 is below restart_backoff_initial_s = 10: expected the maximum at least the first "
     "delay"),
    ({"front_door_address": "127.0.0.1:65534", "front_door_nodes": 4},
     "front_door_nodes = 4: listener PLAINTEXT://127.0.0.1:65534 has node i on port + i - 1, up to 65537: expected "
     "ports up to 65535"),
    ({"response_topic": "gateway.dlq"},
     "response_topic and dlq_topic are both 'gateway.dlq': expected a topic of its own for each"),
    ({"registry_topic": "gateway.ingress"},
     "ingress_topic and registry_topic are both 'gateway.ingress': expected a topic of its own for each"),
    ({"front_door_address": "0.0.0.0:9093"}, "the front door would let anyone in: PLAINTEXT://0.0.0.0:9093 listens "
     "beyond loopback with neither TLS nor SASL"),
    ({"front_door_max_request_bytes": 2**31 - 1}, "need ingress messages and dead letters larger than librdkafka's "
     "largest message.max.bytes"),
])
def test_settings_that_must_agree(settings: dict[str, Any], line: str, tmp_path: Path) -> None:
    path = _config_file(tmp_path, settings)
    (refusal,) = _refusal(path)
    assert refusal.startswith(f"{path}: ") and line in refusal


def test_an_unprotected_door_beyond_loopback_is_allowed_when_the_config_says_so(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {"front_door_address": "0.0.0.0:9093", "front_door_allow_unauthenticated": True})
    assert load_gateway_config(path).front_door_address == "0.0.0.0:9093"


def test_overrides_are_checked_as_the_settings_they_stand_for(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {})
    assert _refusal(path, spark_master="lokal") == (
        f'{path}: spark_master = "lokal": expected a Spark master URL: local, local[N], local[N,F], local[*], '
        "spark://HOST:PORT, yarn or k8s://...",)
    assert load_gateway_config(path, spark_master=None).spark_master == "local[*,4]"  # None: the file's


@pytest.mark.parametrize(("content", "line"), [
    (None, "cannot read the gateway configuration: No such file or directory"),
    ('{"a": 1,}', "the gateway configuration is not JSON: Expecting property name enclosed in double quotes: "
     "line 1 column 9 (char 8)"),
    ("[1]", "expected a JSON object of settings (docs/configuration.md)"),
])
def test_a_file_that_is_not_a_config(content: str | None, line: str, tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    if content is not None:
        path.write_text(content)
    assert _refusal(path) == (f"{path}: {line}",)


@pytest.mark.parametrize("key", ["local_broker_port", "topics_file", "front_door_address", "front_door_security"])
def test_gateway_run_says_it_in_one_line_and_exits_2_before_anything_starts(key: str, tmp_path: Path) -> None:
    value, expected = WRONG[key]
    path = _config_file(tmp_path, {key: value})
    done = subprocess.run([sys.executable, "-m", "streaming", "run", "--config", str(path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {path}: {key}"), done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr


def test_a_typo_through_the_command_is_one_line_with_the_setting_meant(tmp_path: Path) -> None:
    path = _config_file(tmp_path, {"front_door_adress": "127.0.0.1:9093"})
    done = subprocess.run([sys.executable, "-m", "streaming", "run", "--config", str(path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stderr) == (
        2, f"error: {path}: front_door_adress: unknown setting; did you mean front_door_address?\n")
