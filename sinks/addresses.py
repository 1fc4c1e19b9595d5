"""Network addresses as the gateway's settings and commands write them: one `host:port` (the metrics exporter, a
front-door node) and Kafka's `bootstrap.servers` list (`host:port,host:port`, each optionally `LISTENER://`-prefixed,
as Kafka's `ClientUtils.parseAndValidateAddresses` reads it). An empty host is every interface, `[::1]` IPv6.
"""

from __future__ import annotations

import re

MAX_PORT = 65535
_HOST = re.compile(r"\[[0-9A-Fa-f:.%]+\]|[A-Za-z0-9._-]*")
_LISTENER_PREFIX = re.compile(r"^[A-Za-z0-9_]+://")


def address_problem(text: str, lowest_port: int = 0, needs_host: bool = False) -> str | None:
    """What is wrong with `text` as `host:port` (port from `lowest_port` to 65535; a host unless it may be empty),
    or None."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return "no :PORT"
    if not (port.isascii() and port.isdigit()):
        return f"port {port!r} is not a number"
    if not _HOST.fullmatch(host):
        return f"host {host!r} is not a host name or an address (IPv6 in brackets: [::1])"
    if needs_host and not host:
        return "no host"
    if not lowest_port <= int(port) <= MAX_PORT:
        return f"port {int(port)} is outside {lowest_port}..{MAX_PORT}"
    return None


def bootstrap_problem(text: str) -> str | None:
    """What is wrong with `text` as Kafka's `bootstrap.servers`, or None."""
    servers = [s.strip() for s in text.split(",")]
    if not any(servers):
        return "no HOST:PORT in it"
    for server in servers:
        problem = address_problem(_LISTENER_PREFIX.sub("", server), lowest_port=1, needs_host=True)
        if problem is not None:
            return f"{server!r}: {problem}" if len(servers) > 1 else problem
    return None


def split_address(text: str) -> tuple[str, int]:
    """(host, port) of an address `address_problem` accepts; an empty host is every interface."""
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)
