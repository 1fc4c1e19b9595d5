"""Times and positions on the `dlq` command line: UTC rendering, absolute or relative (`-2h`) times,
`partition:offset` positions.
"""

from __future__ import annotations

import re
import time
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


_RELATIVE = re.compile(r"^-(\d+)(ms|s|m|h|d)$")


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from epoch ms, ISO-8601 (naive = UTC) or a relative `-<n><ms|s|m|h|d>`."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text) and not _RELATIVE.match(text):
        return int(text)
    m = _RELATIVE.match(text)
    if m:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - int(m.group(1)) * _UNIT_MS[m.group(2)]
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(
            f"cannot read time {text!r}: use epoch milliseconds, ISO-8601 (e.g. 2024-05-01T12:00:00Z) or -15m/-2h/-7d"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_position(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"a dead letter's position is PARTITION:OFFSET, got {text!r}")
    return int(m.group(1)), int(m.group(2))
