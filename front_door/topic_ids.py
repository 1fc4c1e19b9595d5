"""Topic ids (KIP-516) for the registry's topics.

A Kafka cluster gives each topic a random UUID when it is created; the gateway's topics are created by
naming them in the registry, so their ids are derived from the name (UUID v5), the same on every front
door and across restarts. Clients that speak ids (Produce v13, Fetch v13+, Metadata v10+) get them
from Metadata and send them back.
"""

from __future__ import annotations

import uuid

_NAMESPACE = uuid.UUID("5f6d1a3e-8c2b-4e7a-9b1d-2c4e6a8b0d1f")


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, name)
