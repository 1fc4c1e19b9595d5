"""Serving the metrics: the Prometheus HTTP endpoint on `metrics_address`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    disable_created_metrics,
    start_http_server,
)

from sinks.metrics.gateway_metrics import GatewayMetrics


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics_address must be host:port, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass
class MetricsServer:
    url: str
    _server: Any
    _thread: threading.Thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def serve_metrics(metrics: GatewayMetrics, address: str) -> MetricsServer:
    """Serve `metrics` at http://<address>/metrics (prometheus_client's threaded HTTP server)."""
    host, port = parse_address(address)
    # `_created` series double the series count and no panel uses them.
    disable_created_metrics()
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    bound_port = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return MetricsServer(f"http://{shown}:{bound_port}/metrics", server, thread)
