"""The Grafana dashboard against Grafana's own dashboard schema: `grafana_schema/`, a Go program on the
grafana-foundation-sdk's generated types, decodes `conf/grafana/dashboards/gateway.json` strictly (unknown
fields, wrong types and missing required fields are errors, down to panel options, custom field configs and
Prometheus queries) and checks the schema's constraints; broken copies of the dashboard are rejected with a
message naming the fault. (Its metric names: `tests/unit/test_dashboard.py`; its PromQL on a real
Prometheus: `tests/integration/test_observability.py`.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streaming.config import REPO_ROOT

DASHBOARD = REPO_ROOT / "conf" / "grafana" / "dashboards" / "gateway.json"
CHECKER_SOURCE = Path(__file__).parent / "grafana_schema"
# On a fresh machine the build downloads the SDK from the Go module proxy and compiles it (about a
# minute on two busy cores); later builds come from Go's caches.
BUILD_TIMEOUT_S = 600
RUN_TIMEOUT_S = 60


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}/usr/local/go/bin"  # Go's tarball install, if not on PATH
    # No VCS stamping (the checker lives inside this repository's work tree) and no toolchain switch.
    env["GOFLAGS"] = f"{env.get('GOFLAGS', '')} -buildvcs=false".strip()
    env["GOTOOLCHAIN"] = "local"
    return env


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checker, built once for the module (go.sum pins the SDK, so no checksum-database lookup)."""
    env = go_env()
    go = shutil.which("go", path=env["PATH"])
    assert go, "Go is not installed (expected on PATH or in /usr/local/go/bin)"
    binary = tmp_path_factory.mktemp("grafana-schema") / "gatewaydashboardcheck"
    built = subprocess.run([go, "build", "-o", str(binary), "."], cwd=CHECKER_SOURCE, env=env,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert built.returncode == 0, f"go build failed:\n{built.stderr}"
    return binary


def run_checker(checker: Path, dashboard: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(checker), str(dashboard)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_gateway_dashboard_matches_grafanas_schema(checker: Path) -> None:
    """The shipped dashboard decodes strictly into Grafana's schema types and meets their constraints."""
    result = run_checker(checker, DASHBOARD)
    assert result.returncode == 0, result.stderr
    panels = json.loads(DASHBOARD.read_text())["panels"]
    count = len(panels) + sum(len(p.get("panels", [])) for p in panels)
    assert f"valid Grafana dashboard ({count} panels:" in result.stdout, result.stdout


def first_panel(dashboard: dict[str, Any], kind: str) -> tuple[int, dict[str, Any]]:
    return next((i, p) for i, p in enumerate(dashboard["panels"]) if p["type"] == kind)


def add_top_level_field(d: dict[str, Any]) -> str:
    d["refreshInterval"] = "10s"  # Grafana's field is `refresh`
    return "Dashboard: unexpected field 'refreshInterval'"


def grid_width_as_string(d: dict[str, Any]) -> str:
    i, panel = first_panel(d, "timeseries")
    panel["gridPos"]["w"] = "12"
    return f"panels[{i}].gridPos.w: json: cannot unmarshal string"


def grid_wider_than_the_dashboard(d: dict[str, Any]) -> str:
    i, panel = first_panel(d, "timeseries")
    panel["gridPos"]["w"] = 30
    return f"panels[{i}].Panel.gridPos.w: must be <= 24"


def stat_option_of_the_wrong_type(d: dict[str, Any]) -> str:
    i, panel = first_panel(d, "stat")
    panel["options"]["wideLayout"] = "yes"
    return f"panels[{i}].options.wideLayout: json: cannot unmarshal string"


def unknown_query_field(d: dict[str, Any]) -> str:
    i, panel = first_panel(d, "timeseries")
    panel["targets"][0]["exp"] = panel["targets"][0].pop("expr")
    return f"panels[{i}].targets[0].Dataquery: unexpected field 'exp'"


def unknown_panel_type(d: dict[str, Any]) -> str:
    i, panel = first_panel(d, "timeseries")
    panel["type"] = "timeserie"
    return f'panels[{i}].type: no schema for panel type "timeserie"'


@pytest.mark.parametrize("breakage", [add_top_level_field, grid_width_as_string, grid_wider_than_the_dashboard,
                                       stat_option_of_the_wrong_type, unknown_query_field, unknown_panel_type])
def test_checker_rejects_a_broken_dashboard(checker: Path, tmp_path: Path,
                                            breakage: Callable[[dict[str, Any]], str]) -> None:
    """A copy of the dashboard with one fault fails the check, with a message naming the fault's path."""
    broken = json.loads(DASHBOARD.read_text())
    expected = breakage(broken)
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(broken, indent=2))
    result = run_checker(checker, path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not a valid Grafana dashboard" in result.stderr
    assert expected in result.stderr, result.stderr
    assert "goroutine" not in result.stderr  # an error message, not a Go panic's traceback
