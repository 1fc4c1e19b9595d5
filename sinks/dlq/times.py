"""Times and positions on the `dlq` command line: UTC rendering and `partition:offset` positions (times
are read by `sinks.time_arguments`, shared with the `segments` command).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime


def format_utc(ms: int | None) -> str:
    """Human-readable UTC with milliseconds (`2024-05-01T12:00:00.123Z`); Kafka's -1 is `none`."""
    if ms is None:
        return "-"
    if ms == -1:
        return "none"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return "out of range"


def parse_position(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"a dead letter's position is PARTITION:OFFSET, got {text!r}")
    return int(m.group(1)), int(m.group(2))
