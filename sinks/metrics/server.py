"""Serving the metrics: the Prometheus endpoint (`/metrics`) on `metrics_address`, with the health
probes beside it (`/healthz` liveness, `/readyz` readiness: 200 or 503 with a one-line reason).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, disable_created_metrics, make_wsgi_app

from sinks.addresses import address_problem, split_address
from sinks.metrics.health import Health


class Exported(Protocol):
    """What is served: the gateway's metrics, or a front door's on its own (`gateway door`)."""

    registry: CollectorRegistry


def parse_address(address: str, setting: str = "metrics_address") -> tuple[str, int]:
    """(host, port) of a `host:port` setting; an empty host is every interface, `[::1]` IPv6."""
    if (problem := address_problem(address)) is not None:
        raise ValueError(f"{setting} must be host:port: {problem}")
    return split_address(address)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # one line per scrape would drown the gateway's log


@dataclass
class MetricsServer:
    url: str
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def base_url(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _app(metrics: Exported, health: Health) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    prometheus = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            state = health.state
            ok = state.live if path == "/healthz" else state.live and state.ready
            body = json.dumps({"live": state.live, "ready": state.ready, "detail": state.detail}).encode()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        return prometheus(environ, start_response)

    return app


def serve_metrics(metrics: Exported, address: str, health: Health | None = None) -> MetricsServer:
    """Serve `metrics` at http://<address>/metrics and `health` at /healthz and /readyz, in a thread."""
    host, port = parse_address(address)
    # `_created` series double the series count and no panel uses them.
    disable_created_metrics()
    server_class = _V6Server if ":" in host else _Server
    server = make_server(host, port, _app(metrics, health or Health()), server_class, _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    bound_port = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return MetricsServer(f"http://{shown}:{bound_port}/metrics", server, thread)
