"""Topic ids (KIP-516) for the registry's topics.

A Kafka cluster gives each topic a random UUID when it is created, and so does the gateway for a topic created
through CreateTopics (`TopicConfig.topic_id`); the topics the registry was seeded with keep an id derived from
the name (UUID v5), the same on every front door and across restarts. Clients that speak ids (Produce v13,
Fetch v13+, Metadata v10+) get them from Metadata and send them back. `topic_id` is the name-derived one, also
what places a topic's partitions on the doors (`leadership.py`), which must not move when a topic is re-created.
"""

from __future__ import annotations

import uuid

from validators.topic_config import seed_topic_id as topic_id

ZERO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's `Uuid.ZERO_UUID`: no topic id (asked by name, or unknown)

__all__ = ["ZERO_TOPIC_ID", "topic_id"]
