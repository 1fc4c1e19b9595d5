"""Default names of the gateway's own topics (DESIGN §3); each is configurable."""

from __future__ import annotations

DEFAULT_INGRESS_TOPIC = "gateway.ingress"
DEFAULT_RESPONSE_TOPIC = "gateway.responses"
DEFAULT_DLQ_TOPIC = "gateway.dlq"
DEFAULT_GROUPS_TOPIC = "gateway.consumer_offsets"
