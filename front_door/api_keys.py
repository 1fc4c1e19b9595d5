"""The API keys the front door serves or names (Kafka's `ApiKeys`; the numbers are the protocol's)."""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22
