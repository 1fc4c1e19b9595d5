"""The Grafana dashboard and the provisioning/scrape configs are valid for provisioning and only use
metrics the gateway exports. (That every panel returns data from a real Prometheus scraping the real
gateway is `tests/integration/test_observability.py`.)"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from front_door.metrics import FrontDoorMetrics
from sinks.metrics.gateway_metrics import GatewayMetrics
from streaming.config import REPO_ROOT, GatewayConfig

GRAFANA = REPO_ROOT / "conf" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "gateway.json"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
# PromQL words that look like metric names but are functions, keywords or label names
PROMQL_WORDS = {"sum", "by", "rate", "histogram_quantile", "max", "time", "le", "topic", "outcome", "error",
                "partition", "reason", "phase", "api", "without", "on", "ignoring", "increase", "avg", "min",
                "group", "state", "mechanism", "result", "instance", "direction", "listener"}
# What the operators' dashboard must show: a metric family per area.
REQUIRED = {
    "throughput (records)": "gateway_records_total",
    "throughput (bytes)": "gateway_appended_bytes_total",
    "outcomes and rejections": "gateway_batches_total",
    "record errors": "gateway_record_errors_total",
    "timestamp skew": "gateway_timestamp_skew_seconds_bucket",
    "future timestamps": "gateway_future_timestamps_total",
    "clock holds": "gateway_clock_holds_total",
    "append latency": "gateway_append_latency_seconds_bucket",
    "micro-batch duration": "gateway_micro_batch_duration_seconds_bucket",
    "ingress lag": "gateway_ingress_lag_messages",
    "input rate": "gateway_input_messages_per_second",
    "processing rate": "gateway_processed_messages_per_second",
    "segments": "gateway_log_segments",
    "segment bytes": "gateway_log_size_bytes",
    "retention deletions": "gateway_retention_deleted_segments_total",
    "query restarts": "gateway_query_restarts_total",
    "dead letters": "gateway_dead_letters_published_total",
    "responses": "gateway_responses_published_total",
    "state rows": "gateway_state_rows",
    "state memory": "gateway_state_memory_bytes",
    "log end offsets": "gateway_log_end_offset",
    "front door requests": "gateway_front_door_requests_total",
    "front door produce latency": "gateway_front_door_produce_latency_seconds_bucket",
    "front door produce hops": "gateway_front_door_produce_phase_seconds_bucket",
    "consumer groups": "gateway_front_door_groups",
    "consumer group lag": "gateway_front_door_group_lag",
    "consumer group rebalances": "gateway_front_door_group_rebalances_total",
    "front door authentications": "gateway_front_door_authentications_total",
    "front door authorization denials": "gateway_front_door_authorization_denials_total",
    "front doors alive": "gateway_front_door_doors_alive",
    "front door bytes": "gateway_front_door_bytes_total",
}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # panels of collapsed rows
    return out


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in all_panels(dashboard) for t in p.get("targets", []) if t.get("expr")]


def walk(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}", k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def metric_names_in(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_strings)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_ranges))
    return {w for w in words if w not in PROMQL_WORDS and not re.fullmatch(r"\d+", w)}


def test_dashboard_is_a_provisionable_grafana_dashboard(dashboard: dict[str, Any]) -> None:
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["title"] and dashboard["uid"] and len(dashboard["uid"]) <= 40
    assert "id" not in dashboard or dashboard["id"] is None  # provisioning assigns the database id
    assert "__inputs" not in dashboard, "an export for import (${DS_...} inputs) is not resolved by provisioning"
    ids = [p["id"] for p in all_panels(dashboard)]
    assert all(isinstance(i, int) for i in ids)
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicates, f"duplicate panel ids {duplicates}"
    for p in all_panels(dashboard):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]


def test_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    taken: dict[tuple[int, int], str] = {}
    for p in dashboard["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in taken, f"{p['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = p["title"]


def test_datasource_comes_from_a_template_variable(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    for p in all_panels(dashboard):
        if p["type"] == "row":
            continue
        assert p["datasource"] == DATASOURCE_REF, p["title"]
        assert p["targets"], f"{p['title']}: no query"
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE_REF, p["title"]
    # No hard-coded datasource uid anywhere: every uid inside a datasource reference is the variable.
    for path, key, value in walk(dashboard):
        if key == "datasource" and isinstance(value, dict):
            assert value.get("uid") in ("${datasource}", "$datasource"), f"{path}: {value}"
        if key == "datasource" and isinstance(value, str):
            assert value in ("${datasource}", "$datasource"), f"{path}: {value}"


def test_template_variables_used_are_defined(dashboard: dict[str, Any]) -> None:
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    builtins = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
    text = json.dumps(dashboard["panels"])
    used = set(re.findall(r"\$\{?(\w+)", text))
    assert used - builtins <= defined, used - builtins - defined
    topic = next(v for v in dashboard["templating"]["list"] if v["name"] == "topic")
    assert topic["includeAll"] and topic["allValue"] == ".*"


def test_every_metric_in_the_dashboard_is_exported_by_the_gateway(dashboard: dict[str, Any], tmp_path: Path) -> None:
    metrics = GatewayMetrics({"t": 1}, tmp_path, create_time_topics=["t"])
    FrontDoorMetrics(metrics.registry)  # `gateway run` registers the front door's beside the gateway's
    exported = metrics.metric_names()
    exprs = expressions(dashboard)
    assert len(exprs) >= 20
    used = set().union(*(metric_names_in(e) for e in exprs))
    unknown = used - exported
    assert not unknown, f"dashboard uses metrics the gateway does not export: {sorted(unknown)}"
    for area, name in REQUIRED.items():
        assert name in used, f"no panel shows {area} ({name})"
    for e in exprs:
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}") and e.count("[") == e.count("]"), e
        for m in re.findall(r"rate\(([a-z_]+)", e):
            assert m.endswith(("_total", "_bucket")), f"rate() of a non-counter in {e}"


def test_provisioning_files_point_at_the_dashboard_and_prometheus() -> None:
    datasource = (GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text()
    assert re.search(r"^apiVersion: 1$", datasource, re.M)
    assert re.search(r"^\s+type: prometheus$", datasource, re.M)
    assert re.search(r"^\s+url: http://", datasource, re.M)
    assert "uid:" not in datasource  # the dashboard does not rely on a fixed uid
    provider = (GRAFANA / "provisioning" / "dashboards" / "gateway.yaml").read_text()
    assert re.search(r"^apiVersion: 1$", provider, re.M)
    assert re.search(r"^\s+type: file$", provider, re.M)
    assert re.search(r"^\s+path: /\S+$", provider, re.M)
    for text in (datasource, provider):
        assert "\t" not in text  # YAML forbids tabs for indentation


def test_prometheus_scrapes_the_default_metrics_address() -> None:
    scrape = (REPO_ROOT / "conf" / "prometheus" / "prometheus.yml").read_text()
    assert f'"{GatewayConfig().metrics_address}"' in scrape
    assert GatewayConfig().metrics_address == "127.0.0.1:9108"
    assert re.search(r"^\s+metrics_path: /metrics$", scrape, re.M)
