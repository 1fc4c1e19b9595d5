"""Per-IP connection counts, as Kafka's `ConnectionQuotas` keeps them (`max.connections.per.ip` and
`max.connections.per.ip.overrides`, SocketServerConfigs): every accepted connection is counted against its
IP across the door's listeners, and one that would go over the IP's maximum is closed at once, unread —
Kafka's acceptor logs "Rejected connection from …, address already has the configured maximum of N
connections." and closes the channel. Its count is released when the connection ends. Without a maximum
there is no limit (Kafka's default `Int.MaxValue`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping

log = logging.getLogger("gateway.front_door")

MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"


class ConnectionLimitError(ValueError):
    """A `max.connections.per.ip*` setting Kafka would refuse."""


def parse_overrides(text: str) -> dict[str, int]:
    """`host:N,host:N` (Kafka's CSV map: hostnames or addresses, each with its maximum)."""
    overrides: dict[str, int] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConnectionLimitError(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES}: {entry!r} is not host:count")
        overrides[host] = int(count)
    return overrides


def arrival_address(host: str) -> str | None:
    """The address connections from `host` arrive with: an address as written, a name resolved once (as Kafka's
    `InetAddress.getByName` when the setting is read); None when the name does not resolve."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return str(ipaddress.ip_address(socket.gethostbyname(host)))
    except (OSError, UnicodeError, ValueError):
        return None


class NameLookups:
    """Host names resolved off the door's event loop, which serves every connection: a lookup can wait seconds
    on a slow resolver. `address(host)` answers at once — an IP address as written; a name's address once its
    lookup (started when first asked, in a worker thread) has ended, None before then or when it does not
    resolve — and `on_resolved` is called on the loop when a lookup ends. Without a running loop (the config
    read at start) a name is looked up there and then. Each name is looked up once, as Kafka resolves one when
    it reads the setting."""

    def __init__(self, on_resolved: Callable[[], None] = lambda: None) -> None:
        self._done: dict[str, str | None] = {}
        self._pending: set[str] = set()
        self._on_resolved = on_resolved

    def address(self, host: str) -> str | None:
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            pass
        if host in self._done:
            return self._done[host]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._done[host] = arrival_address(host)
            return self._done[host]
        if host not in self._pending:
            self._pending.add(host)
            lookup = loop.run_in_executor(None, arrival_address, host)
            lookup.add_done_callback(lambda done, host=host: self._resolved(host, done))  # type: ignore[misc]
        return None

    def pending(self, host: str) -> bool:
        return host in self._pending

    def _resolved(self, host: str, done: asyncio.Future[str | None]) -> None:
        self._pending.discard(host)
        self._done[host] = None if done.cancelled() or done.exception() is not None else done.result()
        if self._done[host] is None:
            log.warning("front door: %s does not resolve; a limit or quota naming it is not enforced", host)
        self._on_resolved()


def check_per_ip(default_max: int | None, overrides: Mapping[str, int] | None) -> None:
    """`KafkaConfig.validateValues`: a maximum of 0 for every IP needs overrides naming the IPs let in."""
    if default_max == 0 and not overrides:
        raise ConnectionLimitError(f"requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero only if "
                                   f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set.")


class ConnectionsPerIp:
    """The door's open connections by client address; `admit` counts one in, `release` out."""

    def __init__(self, default_max: int | None = None, overrides: Mapping[str, int] | None = None) -> None:
        self._counts: dict[str, int] = {}
        self.reconfigure(default_max, overrides)

    def reconfigure(self, default_max: int | None, overrides: Mapping[str, int] | None,
                    lookups: NameLookups | None = None) -> None:
        """New maxima (a dynamic broker config changed); the open connections stay counted, and one over a
        lowered maximum stays open, as in Kafka's `ConnectionQuotas.updateMaxConnectionsPerIp`. Without
        `lookups` (the config at start) an override's name that does not resolve is refused; with them (a
        dynamic change, which Kafka stores and logs) it is left out, and so is one still being looked up."""
        check_per_ip(default_max, overrides)
        resolved = {}
        for host, count in (overrides or {}).items():
            address = lookups.address(host) if lookups is not None else arrival_address(host)
            if address is not None:
                resolved[address] = count
            elif lookups is None:
                raise ConnectionLimitError(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : {host}")
        self._default = default_max
        self._overrides = resolved

    def maximum(self, address: str) -> int | None:
        return self._overrides.get(address, self._default)

    def admit(self, address: str) -> int | None:
        """Count a new connection from `address`: None when it may stay, else the maximum it would exceed
        (its count is then not kept: the connection is closed at once)."""
        count = self._counts.get(address, 0)
        limit = self.maximum(address)
        if limit is not None and count >= limit:
            return limit
        self._counts[address] = count + 1
        return None

    def release(self, address: str) -> None:
        count = self._counts.get(address, 0) - 1
        if count > 0:
            self._counts[address] = count
        else:
            self._counts.pop(address, None)

    def open(self, address: str) -> int:
        return self._counts.get(address, 0)
