"""A broker of the front door's cluster as clients see it (Metadata's `MetadataResponseBroker`), and an address
a listener is bound to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int


@dataclass(frozen=True)
class Node:
    """One broker of the front door's cluster: a node id with a listener of its own, and the address
    Metadata advertises for it."""

    node_id: int
    host: str
    port: int
