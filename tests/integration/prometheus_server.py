"""A real Prometheus server for the observability tests: installed from Debian's `prometheus`
package when missing, started on loopback with its own storage and a scrape config of the test's
choosing, queried through its HTTP API.

`make test` runs on fresh machines as root, so the install is part of the test run (docs/design.md:
everything a test needs is installed by the project's own files). Without apt the test fails with
a clear message: an observability test that silently skipped would prove nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.ports import free_port

PACKAGE = "prometheus"
BINARY_CANDIDATES = ("/usr/bin/prometheus", "/usr/local/bin/prometheus")
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


class PrometheusUnavailable(RuntimeError):
    pass


def prometheus_binary() -> str | None:
    found = shutil.which("prometheus")
    if found:
        return found
    return next((c for c in BINARY_CANDIDATES if os.access(c, os.X_OK)), None)


def _apt_install() -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Recommends would pull in prometheus-node-exporter, a second daemon nobody asked for.
    return subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", PACKAGE],
        env=env, capture_output=True, text=True, timeout=900,
    )


def ensure_prometheus() -> str:
    """Path of the `prometheus` binary, installing the Debian package first when it is missing."""
    binary = prometheus_binary()
    if binary:
        return binary
    if shutil.which("apt-get") is None:
        raise PrometheusUnavailable(
            "The Prometheus server is not installed and apt-get is not available to install it: "
            f"install the '{PACKAGE}' package (Debian/Ubuntu) or put a `prometheus` binary on PATH."
        )
    if os.geteuid() != 0:
        raise PrometheusUnavailable(
            f"The Prometheus server is not installed; installing the Debian package '{PACKAGE}' needs root "
            f"(run `sudo apt-get install -y {PACKAGE}` once, or run the tests as root like CI does)."
        )
    # The package's maintainer scripts would start a system-wide Prometheus on :9090. The test starts
    # its own; a policy-rc.d that forbids service starts (Debian's documented switch, already present
    # in container images) keeps the install from leaving a daemon behind.
    own_policy = not POLICY_RC_D.exists()
    if own_policy:
        POLICY_RC_D.write_text("#!/bin/sh\n# temporary: installing prometheus for the gateway tests\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
    try:
        result = _apt_install()
        if result.returncode != 0:
            # A fresh machine has no package lists yet (or stale ones): refresh and try once more.
            update = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, timeout=900)
            if update.returncode != 0:
                raise PrometheusUnavailable(f"apt-get update failed:\n{update.stdout}\n{update.stderr}")
            result = _apt_install()
        if result.returncode != 0:
            raise PrometheusUnavailable(f"apt-get install {PACKAGE} failed:\n{result.stdout}\n{result.stderr}")
    finally:
        if own_policy:
            POLICY_RC_D.unlink(missing_ok=True)
    binary = prometheus_binary()
    if not binary:
        raise PrometheusUnavailable(f"apt-get installed '{PACKAGE}' but no prometheus binary is on PATH")
    return binary


class PrometheusServer:
    """`prometheus` on 127.0.0.1:<free port> scraping `targets` every `scrape_interval`."""

    def __init__(self, workdir: Path, targets: list[str], job: str = "gateway", scrape_interval: str = "1s") -> None:
        self.workdir = Path(workdir)
        self.targets = targets
        self.job = job
        self.scrape_interval = scrape_interval
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> PrometheusServer:
        binary = ensure_prometheus()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        # JSON is YAML: no YAML library needed to write the config.
        config.write_text(json.dumps({
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [{
                "job_name": self.job,
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "static_configs": [{"targets": self.targets}],
            }],
        }, indent=2))
        log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
        )
        log.close()
        self.wait_for(lambda: self._ready(), timeout_s, "Prometheus to become ready")
        return self

    def promtool(self) -> str:
        """The package's config checker, next to the server binary."""
        binary = ensure_prometheus()
        sibling = Path(binary).with_name("promtool")
        found = str(sibling) if os.access(sibling, os.X_OK) else shutil.which("promtool")
        if not found:
            raise PrometheusUnavailable(f"promtool is missing beside {binary}")
        return found

    def _ready(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self._process.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=30)
        self._process = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                doc = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"Prometheus rejected {params}: {e.read().decode(errors='replace')}") from None
        if doc.get("status") != "success":
            raise AssertionError(f"Prometheus query {params} failed: {doc}")
        return doc["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant vector/scalar result of `expr` as a list of {"metric": labels, "value": float}."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": float(data["result"][1])}]
        if data["resultType"] != "vector":
            raise AssertionError(f"{expr}: unexpected result type {data['resultType']}")
        return [{"metric": s["metric"], "value": float(s["value"][1])} for s in data["result"]]

    def scrape_timestamps(self) -> list[float]:
        """Sample timestamps (s) of the target's `up` series within the last minute, oldest first."""
        data = self.api("query", query=f'up{{job="{self.job}"}}[1m]')
        return sorted(float(ts) for series in data["result"] for ts, _ in series["values"])

    def wait_for_scrapes_after(self, t: float, count: int = 2, timeout_s: float = 60.0) -> None:
        """Block until Prometheus has scraped the target successfully `count` times after wall time `t`."""

        def done() -> bool:
            up = self.query(f'up{{job="{self.job}"}}')
            return bool(up) and up[0]["value"] == 1 and sum(ts > t for ts in self.scrape_timestamps()) >= count

        self.wait_for(done, timeout_s, f"{count} scrapes of {self.targets} after {t:.3f}")

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        # Polling is the synchronisation here: Prometheus has no push notification for a scrape.
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{self.log_tail()}")
            time.sleep(0.2)
