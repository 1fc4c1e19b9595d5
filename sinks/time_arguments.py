"""Times on the command line, one grammar for every command (`dlq --since/--until`, `segments
offsets-for-times`): epoch milliseconds, ISO-8601 (UTC unless it names a zone) or relative to now
(`-15m`, `-2h`, `-7d`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime

RELATIVE_TIME = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
TIME_FORMS = "epoch milliseconds, ISO-8601 (e.g. 2024-05-01T12:00:00Z) or relative -15m/-2h/-7d"


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from epoch ms, ISO-8601 (naive = UTC) or a relative `-<n><ms|s|m|h|d>`.
    Raises ValueError naming the accepted forms."""
    text = text.strip()
    m = RELATIVE_TIME.match(text)
    if m:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - int(m.group(1)) * _UNIT_MS[m.group(2)]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"cannot read time {text!r}: use {TIME_FORMS}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def protect_relative_times(argv: Sequence[str], value_options: Sequence[str] = ("--since", "--until")) -> list[str]:
    """argparse reads `-2h` as an unknown option: after one of `value_options` it is passed as
    `--since=-2h`; anywhere else (a positional time) with a leading space, which argparse leaves positional
    and `parse_time` strips."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if not RELATIVE_TIME.match(arg):
            out.append(arg)
        elif i > 0 and argv[i - 1] in value_options and out and out[-1] == argv[i - 1]:
            out[-1] = f"{argv[i - 1]}={arg}"
        else:
            out.append(" " + arg)
    return out
