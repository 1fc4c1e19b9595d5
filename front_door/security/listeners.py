"""The front door's listeners in Kafka's notation (`listeners`, `advertised.listeners`,
`listener.security.protocol.map`; KIP-103):

    "listeners": "SASL_SSL://0.0.0.0:9094,PLAINTEXT://127.0.0.1:9093"
    "advertised.listeners": "SASL_SSL://gateway.example.com:9094,PLAINTEXT://127.0.0.1:9093"

Each listener is `NAME://host:port`; its security protocol is the name's entry in the protocol map, or the
name itself when it is one of Kafka's four protocols. An empty host binds every interface, `[::1]` is IPv6.
Every front-door node has a port on every listener (node i on the listener's port + i - 1), and Metadata
answers a client with the addresses of the listener its connection came in on, as Kafka does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_cluster.security import SecurityProtocol

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


class ListenerError(ValueError):
    """A listener setting Kafka would refuse; the message names the setting."""


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: SecurityProtocol
    host: str  # the bind address ("0.0.0.0" for every interface)
    port: int  # node 1's port (0: a free port per node)
    advertised_host: str | None = None  # what Metadata gives clients of this listener (None: the bound address)
    advertised_port: int | None = None

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _split(text: str, setting: str) -> list[tuple[str, str, int]]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _LISTENER.match(item)
        if match is None:
            raise ListenerError(f"{setting}: {item!r} is not NAME://host:port (e.g. SASL_SSL://0.0.0.0:9094)")
        port = int(match["port"])
        if port > 65535:
            raise ListenerError(f"{setting}: port {port} of {item!r} is above 65535")
        out.append((match["name"].upper(), match["host"].strip("[]"), port))
    return out


def parse_listeners(listeners: str, advertised: str | None = None,
                    protocol_map: Mapping[str, str] | None = None) -> tuple[Listener, ...]:
    """The listeners of `listeners` with their advertised addresses; ListenerError on a name listed twice, a
    name with no security protocol, an advertised listener that is not a listener, or none at all."""
    protocols = {p.value: p for p in SecurityProtocol}
    for name, protocol in (protocol_map or {}).items():
        try:
            protocols[name.upper()] = SecurityProtocol(protocol.upper())
        except ValueError:
            raise ListenerError(f"listener.security.protocol.map: {protocol!r} of {name} is not one of "
                                f"{', '.join(p.value for p in SecurityProtocol)}") from None
    bound = _split(listeners, "listeners")
    if not bound:
        raise ListenerError("listeners: at least one listener is needed, e.g. PLAINTEXT://127.0.0.1:9093")
    names = [name for name, _, _ in bound]
    if len(set(names)) != len(names):
        raise ListenerError(f"listeners: each listener name must appear once, got {', '.join(names)}")
    ad = {name: (host, port) for name, host, port in _split(advertised or "", "advertised.listeners")}
    unknown = sorted(set(ad) - set(names))
    if unknown:
        raise ListenerError(f"advertised.listeners: {', '.join(unknown)} not in listeners ({', '.join(names)})")
    out = []
    for name, host, port in bound:
        if name not in protocols:
            raise ListenerError(f"listeners: {name} has no security protocol; name it after one "
                                f"({', '.join(p.value for p in SecurityProtocol)}) or map it in "
                                "listener.security.protocol.map (e.g. INTERNAL:SASL_SSL)")
        ad_host, ad_port = ad.get(name, (None, None))
        out.append(Listener(name, protocols[name], host or "0.0.0.0", port, ad_host or None, ad_port))
    return tuple(out)


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map` as Kafka writes it: `NAME:PROTOCOL,NAME:PROTOCOL`."""
    out = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name or not protocol:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        out[name.strip().upper()] = protocol.strip()
    return out


def plaintext_listener(address: str, advertised: str | None) -> Listener:
    """The single PLAINTEXT listener of `front_door_address` (and `front_door_advertised_address`)."""
    return parse_listeners(f"PLAINTEXT://{address}", f"PLAINTEXT://{advertised}" if advertised else None)[0]
