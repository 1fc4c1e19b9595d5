"""Every setting of the gateway config (conf/gateway.json, `streaming.config.GatewayConfig`) as data: what its
value must be (`RULES`: type, range, a file that must exist, an address's syntax) and what settings must agree on
(`AGREEMENTS`). `load_gateway_config` checks them before a JVM or a broker starts, so a wrong setting is one line
naming the key, its value and what is expected, and an unknown key is named with the known one it is closest to.

The `kafka` and `front_door_security` blocks and the topic registry (`topics_file`) are checked by their own
modules (`kafka_cluster.security`, `front_door.security.config`, `validators.topic_config`), called from here; the
lines of the blocks never show a value (they may hold secrets), they name the setting inside the block.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from front_door.cluster.door_cluster import MAX_NODES_PER_DOOR
from kafka_cluster.security import load_kafka_security
from sinks.addresses import MAX_PORT, address_problem, bootstrap_problem
from validators.topic_config import ConfigError, TopicRegistry, topic_name_error

if TYPE_CHECKING:
    from streaming.config import GatewayConfig

INT32_MAX = 2**31 - 1  # Kafka's INT configs (timeouts, counts) and librdkafka's integer properties
MAX_SHOWN_CHARS = 200  # a value longer than this is cut in the error line (a path is not)

Check = Callable[[Any, Path], str | None]  # what is wrong with a value of the right type, or None


def _fine(_value: Any, _base_dir: Path) -> str | None:
    return None


@dataclass(frozen=True)
class Rule:
    """What one setting's value must be: `expected` in words (the error line's), `fits` its type and range,
    `why_not` what is wrong with a value that fits (a missing file, a block that does not resolve; paths are
    relative to `base_dir`), `null` what null means where null is allowed, `from_text` its value from a
    command-line option's text. A `secret` setting's value is never shown."""

    expected: str
    fits: Callable[[Any], bool]
    why_not: Check = _fine
    null: str | None = None
    from_text: Callable[[str], Any] = str
    secret: bool = False

    def complaint(self, value: Any, base_dir: Path) -> str | None:
        """`expected ...` (with why, when the value is of the right kind but wrong), or None when it is right."""
        if value is None and self.null is not None:
            return None
        expected = f"{self.expected}, or null ({self.null})" if self.null is not None else self.expected
        if not self.fits(value):
            return f"expected {expected}" + (f", got {_json_kind(value)}" if self.secret else "")
        reason = self.why_not(value, base_dir)
        if reason is None or self.secret:  # a secret block's reason names the setting in it, never the value
            return reason
        return f"expected {expected} ({reason})"

    def problem(self, key: str, value: Any, base_dir: Path) -> str | None:
        """The error line for `key = value`, or None when the value is right."""
        complaint = self.complaint(value, base_dir)
        if complaint is None:
            return None
        if self.secret:
            return complaint if self.fits(value) else f"{key}: {complaint}"
        return f"{key} = {_shown(value)}: {complaint}"


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


def _json_kind(value: Any) -> str:
    kinds = {str: "a string", bool: "true or false", int: "a number", float: "a number", list: "an array",
             dict: "an object", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is a Python int


def _whole(lowest: int, highest: int = INT32_MAX, unit: str = "") -> Rule:
    of = f" of {unit}" if unit else ""
    return Rule(f"a whole number{of} from {lowest} to {highest}",
                lambda v: _whole_number(v) and lowest <= v <= highest, from_text=int)


def _nullable(rule: Rule, null: str) -> Rule:
    return replace(rule, null=null)


def _milliseconds(lowest: int) -> Rule:
    return _whole(lowest, unit="milliseconds")


def _text(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _checked(problem: Callable[[str], str | None]) -> Check:
    return lambda v, _base: problem(v)


def _path(value: str, base_dir: Path) -> Path:
    p = Path(value)
    return p if p.is_absolute() else base_dir / p


def _not_a_file(value: str, base_dir: Path) -> str | None:
    path = _path(value, base_dir)
    return f"{path} is a file" if path.exists() and not path.is_dir() else None


def _file_to_write(value: str, base_dir: Path) -> str | None:
    """Why no file can be written at `value` (its folders are made), or None."""
    path = _path(value, base_dir)
    if path.is_dir():
        return f"{path} is a directory"
    existing = next(parent for parent in path.parents if parent.exists())
    return None if existing.is_dir() else f"{existing} is a file"


def _topic_registry(value: str, base_dir: Path) -> str | None:
    path = _path(value, base_dir)
    if not path.is_file():
        return f"no such file {path}"
    try:
        TopicRegistry.load(path)
    except ConfigError as e:
        return str(e)
    return None


def _kafka_block(value: Mapping[str, Any], base_dir: Path) -> str | None:
    try:
        load_kafka_security(value, base_dir)
    except ValueError as e:  # KafkaSecurityError: names the setting (`kafka.sasl.mechanism: ...`)
        return str(e)
    return None


def _front_door_block(value: Mapping[str, Any], base_dir: Path) -> str | None:
    from front_door.security.config import load_front_door_security  # the driver's; executors never check

    try:
        load_front_door_security(value, base_dir)
    except (ValueError, OSError) as e:  # KafkaSecurityError names the setting (`front_door_security.listeners: ...`)
        return str(e)
    return None


def _spark_settings(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and k and isinstance(value, str | int | float | bool)
                                       for k, value in v.items())


def _seconds(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


# Spark's master URLs (SparkContext.createTaskScheduler; spark-submit's --master)
_SPARK_MASTER = re.compile(r"^(local(\[(\*|\d+)\s*(,\s*\d+)?\])?|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
                           r"|spark://.+|yarn|k8s://.+)$")
# A processing-time trigger's interval, as Spark's Trigger.ProcessingTime reads it (IntervalUtils.stringToInterval;
# no months or years): "10 seconds", "1 hour 30 minutes", "interval 500 milliseconds"
_INTERVAL = re.compile(r"^\s*(interval\s+)?(\d+(\.\d+)?\s+(week|day|hour|minute|second|millisecond|microsecond)s?"
                       r"\s*)+$", re.IGNORECASE)
_QUERY_NAME = re.compile(r"^[^/\\]+$")

_TOPIC = Rule("a Kafka topic name", lambda v: isinstance(v, str), _checked(topic_name_error))
_BOOLEAN = Rule("true or false", lambda v: isinstance(v, bool))
_DIRECTORY = Rule("a directory's path", _text, _not_a_file)
_LISTEN = Rule("HOST:PORT (port 0: a free one)", lambda v: isinstance(v, str), _checked(address_problem))

RULES: Mapping[str, Rule] = {
    # the Kafka cluster
    "bootstrap_servers": _nullable(Rule("HOST:PORT[,HOST:PORT...]", lambda v: isinstance(v, str),
                                        _checked(bootstrap_problem)), "a local broker"),
    "kafka": Rule("an object of Kafka client properties", lambda v: isinstance(v, dict), _kafka_block, secret=True),
    "consumer_group_prefix": Rule("a string", lambda v: isinstance(v, str)),
    "local_broker_port": _whole(1, MAX_PORT),
    "local_broker_dir": _DIRECTORY,
    # topics and storage
    "ingress_topic": _TOPIC,
    "ingress_partitions": _whole(1),
    "response_topic": _TOPIC,
    "dlq_topic": _TOPIC,
    "groups_topic": _TOPIC,
    "security_topic": _TOPIC,
    "doors_topic": _nullable(_TOPIC, "each door a cluster of its own"),
    "registry_topic": _nullable(_TOPIC, "<ingress_topic>.topics"),
    "transaction_state_topic": _nullable(_TOPIC, "<ingress_topic>.transaction_state"),
    "transaction_max_timeout_ms": _milliseconds(1),
    "topics_file": Rule("a topic registry file", _text, _topic_registry),
    "segments_root": _DIRECTORY,
    "checkpoint_root": _DIRECTORY,
    "query_name": Rule("a name without '/' (the query's checkpoint directory)",
                       lambda v: isinstance(v, str) and bool(_QUERY_NAME.match(v)) and v not in (".", "..")),
    "retention_check_interval_ms": _milliseconds(1),
    # Spark
    "spark_master": Rule("a Spark master URL: local, local[N], local[N,F], local[*], spark://HOST:PORT, yarn or "
                         "k8s://...", lambda v: isinstance(v, str) and bool(_SPARK_MASTER.match(v))),
    "spark_conf": Rule('an object of Spark settings, {"spark....": "value"}', _spark_settings),
    "python_archive": _nullable(Rule("a file's path", _text), "executors run the driver's interpreter"),
    "shuffle_partitions": _whole(1),
    "trigger_interval": Rule('a Spark interval such as "0 seconds", "500 milliseconds" or "1 minute"',
                             lambda v: isinstance(v, str) and bool(_INTERVAL.match(v))),
    "idle_poll_ms": _milliseconds(0),
    "max_offsets_per_trigger": _whole(1),
    "ui_enabled": _BOOLEAN,
    # running and failures
    "metrics_address": _LISTEN,
    "log_summary_interval_ms": _milliseconds(1),
    "metrics_log_file": _nullable(Rule("a file's path", _text, _file_to_write), "none"),
    "publish_timeout_ms": _milliseconds(1),
    "restart_backoff_initial_s": Rule("a number of seconds above 0", _seconds, from_text=float),
    "restart_backoff_max_s": Rule("a number of seconds above 0", _seconds, from_text=float),
    "startup_timeout_ms": _milliseconds(1),
    "check_shared_storage": _BOOLEAN,
    # the front door
    "front_door_address": _nullable(_LISTEN, "no front door"),
    "front_door_advertised_address": _nullable(
        Rule("HOST:PORT", lambda v: isinstance(v, str),
             _checked(lambda v: address_problem(v, lowest_port=1, needs_host=True))), "where each node listens"),
    "front_door_max_request_bytes": _whole(1),
    "front_door_nodes": _whole(1, MAX_NODES_PER_DOOR),
    "front_door_id": _whole(1),
    "front_door_session_timeout_ms": _milliseconds(1),
    "group_initial_rebalance_delay_ms": _milliseconds(0),
    "front_door_security": Rule("an object of Kafka broker properties (docs/security.md)",
                                lambda v: isinstance(v, dict), _front_door_block, secret=True),
    "front_door_allow_unauthenticated": _BOOLEAN,
}


def unknown_key(key: str) -> str:
    """The line for a key no setting has, with the closest known one (a typo)."""
    close = difflib.get_close_matches(key, RULES, n=1)
    hint = f"did you mean {close[0]}?" if close else "the settings are in docs/configuration.md"
    return f"{key}: unknown setting; {hint}"


def setting_problems(doc: Mapping[str, Any], base_dir: Path) -> list[str]:
    """One line per unknown key and per wrong value of `doc` (settings by key, paths relative to `base_dir`)."""
    lines = [unknown_key(key) for key in doc if key not in RULES]
    for key, rule in RULES.items():
        if key in doc and (line := rule.problem(key, doc[key], base_dir)) is not None:
            lines.append(line)
    return lines


@dataclass(frozen=True)
class Agreement:
    """What settings that are each right must agree on; `problem` says how they do not, or None."""

    keys: tuple[str, ...]
    problem: Callable[[GatewayConfig], str | None]


def _backoff(config: GatewayConfig) -> str | None:
    if config.restart_backoff_max_s < config.restart_backoff_initial_s:
        return (f"restart_backoff_max_s = {config.restart_backoff_max_s} is below restart_backoff_initial_s = "
                f"{config.restart_backoff_initial_s}: expected the maximum at least the first delay")
    return None


def _node_ports(config: GatewayConfig) -> str | None:
    if not config.front_door_address:
        return None
    for listener in config.door_listeners():
        if listener.port and listener.port + config.front_door_nodes - 1 > MAX_PORT:
            return (f"front_door_nodes = {config.front_door_nodes}: listener {listener} has node i on port + i - 1, "
                    f"up to {listener.port + config.front_door_nodes - 1}: expected ports up to {MAX_PORT}")
    return None


def _distinct_topics(config: GatewayConfig) -> str | None:
    topics = {"ingress_topic": config.ingress_topic, "response_topic": config.response_topic,
              "dlq_topic": config.dlq_topic, "groups_topic": config.groups_topic,
              "security_topic": config.security_topic, "doors_topic": config.doors_topic,
              "registry_topic": config.registry_topic_name,
              "transaction_state_topic": config.transaction_state_topic_name}
    seen: dict[str, str] = {}
    for key, topic in topics.items():
        if topic is not None and topic in seen:
            return f"{seen[topic]} and {key} are both {topic!r}: expected a topic of its own for each"
        if topic is not None:
            seen[topic] = key
    return None


def _ingress_limits(config: GatewayConfig) -> str | None:
    try:
        config.ingress_limits()
    except ValueError as e:
        return str(e)
    return None


AGREEMENTS: tuple[Agreement, ...] = (
    Agreement(("restart_backoff_initial_s", "restart_backoff_max_s"), _backoff),
    Agreement(("front_door_address", "front_door_security", "front_door_nodes"), _node_ports),
    Agreement(("ingress_topic", "response_topic", "dlq_topic", "groups_topic", "security_topic", "doors_topic",
               "registry_topic", "transaction_state_topic"), _distinct_topics),
    Agreement(("front_door_max_request_bytes", "topics_file"), _ingress_limits),
    Agreement(("front_door_address", "front_door_security", "front_door_allow_unauthenticated"),
              lambda config: config.exposure_refusal()),
)


def agreement_problems(config: GatewayConfig) -> list[str]:
    return [line for agreement in AGREEMENTS if (line := agreement.problem(config)) is not None]


def setting_argument(key: str) -> Callable[[str], Any]:
    """An argparse `type` for a command-line option that stands for setting `key` (`--bootstrap-servers`,
    `--master`, `--listen`, ...): its value by the setting's rule, or the rule's expectation as the error."""
    rule = replace(RULES[key], null=None)  # an option is never null: it is given or left out

    def parse(text: str) -> Any:
        try:
            value = rule.from_text(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {rule.expected}") from None
        complaint = rule.complaint(value, Path.cwd())
        if complaint is not None:
            raise argparse.ArgumentTypeError(f"{text!r}: {complaint}")
        return value

    return parse
