"""`python -m streaming status`: the gateway at a glance, for a terminal.

Reads the driver's metrics endpoint (query state, last progress, ingress lag, outcomes per topic),
its readiness probe beside it (what the driver is doing: running, restarting, a standby waiting), and
the tail of the response topic (the most recent error responses). Both are what an operator
without Grafana can reach; neither needs Spark.

The exporter must be the one of the query the config names (`query_name`, which the driver exports as
`gateway_query_info{query=...}`): another query's, or a `gateway door`'s, is refused in one line rather than
reported as this one.

Exit status: 0 the query runs, 1 the exporter answers but the query is not active, 2 the exporter
cannot be reached (the gateway is not running there), is not the query's, or bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from embedded.local_kafka import started_address
from kafka_cluster.client_log import COMMAND_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from sinks.command_line import positive_seconds, whole_number
from sinks.metrics.gateway_metrics import QUERY_INFO
from sinks.text_table import table_lines
from streaming.config import GatewayConfig, add_config_argument
from streaming.config_file import load_gateway_config
from streaming.config_rules import setting_argument

_TOPIC_COLUMNS = ("topic", "appended", "records", "bytes", "duplicate", "rejected", "errors")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def fetch_samples(url: str, timeout_s: float = 5.0) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        text = r.read().decode("utf-8")
    return [
        Sample(s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def fetch_health(metrics_url: str, timeout_s: float = 5.0) -> dict[str, Any] | None:
    """The driver's `/readyz` answer (`{"live", "ready", "detail"}`, also when it is 503); None when absent."""
    url = metrics_url.rsplit("/", 1)[0] + "/readyz"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            body = r.read()
    except urllib.error.HTTPError as e:  # 503: not ready, with the reason
        body = e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def not_the_query(samples: list[Sample], query_name: str) -> str | None:
    """Why the exporter's metrics are not those of query `query_name` (another query's, or no gateway query's:
    a `gateway door`'s exporter, another program's), or None when they are."""
    queries = sorted({s.labels["query"] for s in samples if s.name == QUERY_INFO and "query" in s.labels})
    if not queries:
        return (f"no gateway query exports its metrics there (no {QUERY_INFO}: a `gateway door`'s exporter, or "
                f"another program's); give --metrics-url of the driver running query '{query_name}'")
    if query_name not in queries:
        return (f"the metrics there are of query {', '.join(repr(q) for q in queries)}, not of '{query_name}' "
                "(query_name of the config); give that query's --config, or --metrics-url of this one's driver")
    return None


def _value(samples: list[Sample], name: str, default: float | None = None) -> float | None:
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else default


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """The status as data (the `--json` output; `render` prints it)."""
    topics: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"appended": 0, "duplicate": 0, "rejected": 0, "records": 0, "bytes": 0, "errors": {}})
    for s in samples:
        if s.name == "gateway_batches_total":  # registry topics are exported from 0: list them too
            t = topics[s.labels.get("topic", "?")]
            outcome = s.labels.get("outcome", "?")
            t[outcome] = t.get(outcome, 0) + int(s.value)
            if outcome == "rejected" and s.value:
                t["errors"][s.labels.get("error", "?")] = t["errors"].get(s.labels.get("error", "?"), 0) + int(s.value)
        elif s.name == "gateway_records_total" and s.labels.get("outcome") == "appended" and s.value:
            topics[s.labels.get("topic", "?")]["records"] += int(s.value)
        elif s.name == "gateway_appended_bytes_total" and s.value:
            topics[s.labels.get("topic", "?")]["bytes"] += int(s.value)
    lag = {s.labels.get("partition", "?"): int(s.value) for s in samples if s.name == "gateway_ingress_lag_messages"}
    progress_ts = _value(samples, "gateway_progress_timestamp_seconds")
    clock = _value(samples, "gateway_last_micro_batch_clock_seconds")
    phases = {s.labels.get("phase", "?"): s.value for s in samples
              if s.name == "gateway_micro_batch_phase_duration_seconds"}
    return {
        "query_active": bool(_value(samples, "gateway_query_active", 0)),
        "last_micro_batch_id": _int(_value(samples, "gateway_last_micro_batch_id")) if clock else None,
        "last_micro_batch_clock": _iso(clock) if clock else None,
        "progress": None if not progress_ts else {
            "batch_id": _int(_value(samples, "gateway_progress_batch_id")),
            "at": _iso(progress_ts),
            "age_s": round(max(0.0, time.time() - progress_ts), 1),
            "duration_s": phases.get("triggerExecution"),
            "input_messages_per_s": _value(samples, "gateway_input_messages_per_second"),
            "processed_messages_per_s": _value(samples, "gateway_processed_messages_per_second"),
            "state_rows": _int(_value(samples, "gateway_state_rows")),
            "state_memory_bytes": _int(_value(samples, "gateway_state_memory_bytes")),
        },
        "ingress_lag": {"total": sum(lag.values()), "by_partition": dict(sorted(lag.items()))} if lag else None,
        "responses_published": _int(_value(samples, "gateway_responses_published_total", 0)),
        "dead_letters_published": _int(_value(samples, "gateway_dead_letters_published_total", 0)),
        "micro_batches": _int(_value(samples, "gateway_micro_batches_total", 0)),
        "topics": {k: topics[k] for k in sorted(topics)},
    }


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def recent_errors(cluster: KafkaCluster, topic: str, limit: int = 10, scan_per_partition: int = 1000,
                  timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The newest error responses among the last `scan_per_partition` messages of each partition of
    the response topic, newest first (by the response message's timestamp)."""
    from confluent_kafka import KafkaException

    try:
        return _recent_errors(cluster, topic, limit, scan_per_partition, timeout_s)
    except KafkaException as e:
        raise ConnectionError(f"cannot read '{topic}' from Kafka at {cluster}: {e.args[0].str()}") from None


def _recent_errors(cluster: KafkaCluster, topic: str, limit: int, scan_per_partition: int,
                   timeout_s: float) -> list[dict[str, Any]]:
    from confluent_kafka import Consumer, TopicPartition

    from contract.responses import decode_response

    consumer = Consumer(cluster.client({
        "group.id": cluster.group_id("status"),
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "socket.timeout.ms": int(timeout_s * 1000),
        "logger": COMMAND_CLIENT_LOG,  # not a line per failed connection attempt: the failure is reported once
    }))
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s)
        if topic not in meta.topics or meta.topics[topic].error is not None:
            return []
        ends: dict[int, int] = {}
        assignment = []
        for p in meta.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                ends[p] = high
                assignment.append(TopicPartition(topic, p, max(low, high - scan_per_partition)))
        consumer.assign(assignment)
        errors = []
        deadline = time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error() is not None:
                continue
            if m.offset() + 1 >= ends.get(m.partition(), 0):
                ends.pop(m.partition(), None)
            try:
                r = decode_response(m.value())
            except Exception:  # noqa: BLE001 — not a gateway response: nothing to show
                continue
            if r.get("error_code"):
                r["timestamp_ms"] = m.timestamp()[1]
                errors.append(r)
        errors.sort(key=lambda r: r["timestamp_ms"], reverse=True)
        return errors[:limit]
    finally:
        consumer.close()


def render(url: str, status: dict[str, Any] | None, problem: str | None, errors: list[dict[str, Any]] | None,
           errors_problem: str | None, response_topic: str, health: dict[str, Any] | None = None) -> str:
    lines = [f"Ingest gateway — metrics {url}"]
    if health is not None:
        lines.append(f"driver           {health.get('detail')}")
    if status is None:
        lines.append(f"query            not reachable: {problem}")
    else:
        state = "running" if status["query_active"] else "not active"
        batch = status["last_micro_batch_id"]
        done = (f"last micro-batch {batch} (clock {status['last_micro_batch_clock']})" if batch is not None
                else "no micro-batch completed yet")
        lines.append(f"query            {state}; {done}")
        p = status["progress"]
        if p:
            rates = (f"input {p['input_messages_per_s'] or 0:.1f} msg/s, "
                     f"processed {p['processed_messages_per_s'] or 0:.1f} msg/s")
            state_size = (f"state {p['state_rows']} rows, {_bytes(p['state_memory_bytes'] or 0)}"
                          if p["state_rows"] is not None else "state n/a")
            lines.append(f"last progress    batch {p['batch_id']} at {p['at']} ({p['age_s']} s ago): "
                         f"{p['duration_s'] or 0:.2f} s; {rates}; {state_size}")
        else:
            lines.append("last progress    none yet")
        lag = status["ingress_lag"]
        if lag:
            parts = ", ".join(f"p{k} {v}" for k, v in lag["by_partition"].items())
            lines.append(f"ingress lag      {lag['total']} messages ({parts})")
        else:
            lines.append("ingress lag      unknown (no progress yet)")
        lines.append(f"published        {status['responses_published']} responses, "
                     f"{status['dead_letters_published']} dead letters in {status['micro_batches']} micro-batches")
        lines.append("")
        rows = [
            {**t, "topic": name, "bytes": _bytes(t["bytes"]),
             "errors": " ".join(f"{k}={v}" for k, v in sorted(t["errors"].items()))}
            for name, t in status["topics"].items()
        ]
        lines += table_lines(rows, _TOPIC_COLUMNS, right=_TOPIC_COLUMNS[1:-1])
        if not status["topics"]:
            lines.append("(no batches decided yet)")
    lines.append("")
    if errors_problem:
        lines.append(f"recent errors    unavailable: {errors_problem}")
    elif errors is not None:
        lines.append(f"recent errors (response topic '{response_topic}', newest first): {len(errors) or 'none'}")
        for r in errors:
            when = _iso(r["timestamp_ms"] / 1000) if r.get("timestamp_ms", -1) >= 0 else "?"
            message = (r.get("error_message") or "").replace("\n", " ")
            if len(message) > 160:
                message = message[:157] + "..."
            lines.append(f"  {when}  {r.get('topic')}-{r.get('partition')}  {r.get('error_name')} "
                         f"({r.get('error_code')})  request {r.get('request_id')}  {message}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--metrics-url", type=metrics_url,
                        help="the gateway's exporter (default: http://<metrics_address>/metrics)")
    parser.add_argument("--bootstrap-servers", type=setting_argument("bootstrap_servers"),
                        help="Kafka cluster holding the response topic (default: from config, else the embedded "
                        "broker of `make run`)")
    parser.add_argument("--errors", type=whole_number(0), default=10,
                        help="how many recent error responses to show (0: none)")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument("--timeout", type=positive_seconds, default=5.0, metavar="SECONDS",
                        help="seconds to wait for each source (default %(default)s)")


def metrics_url(text: str) -> str:
    """`--metrics-url`: an http(s) URL with a host."""
    url = urllib.parse.urlsplit(text)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// URL such as http://127.0.0.1:9108/metrics, got {text!r}")
    return text


def cluster_for(config: GatewayConfig) -> KafkaCluster:
    if not config.bootstrap_servers:  # the embedded default's local broker
        address = started_address(config.path(config.local_broker_dir), config.local_broker_port)
        config = config.with_overrides(bootstrap_servers=address)
    return config.cluster


def run_status(args: argparse.Namespace) -> int:
    config = load_gateway_config(args.config, bootstrap_servers=args.bootstrap_servers)  # GatewayConfigError: main's
    url = args.metrics_url or f"http://{config.metrics_address}/metrics"
    status = problem = None
    try:
        samples = fetch_samples(url, args.timeout)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as e:
        problem = str(getattr(e, "reason", e))
    else:
        if (stranger := not_the_query(samples, config.query_name)) is not None:
            print(f"error: {url}: {stranger}", file=sys.stderr)
            return 2
        status = summarize(samples)
    health = fetch_health(url, args.timeout) if status is not None else None
    errors = errors_problem = None
    if args.errors > 0:
        try:
            errors = recent_errors(cluster_for(config), config.response_topic, args.errors, timeout_s=args.timeout)
        except (ConnectionError, OSError, ValueError) as e:
            errors_problem = str(e)
    if args.json:
        print(json.dumps({"metrics_url": url, "reachable": status is not None, "problem": problem, "status": status,
                          "health": health, "recent_errors": errors, "recent_errors_problem": errors_problem}, indent=2, default=str))
    else:
        print(render(url, status, problem, errors, errors_problem, config.response_topic, health))
    if status is None:
        return 2
    return 0 if status["query_active"] else 1
