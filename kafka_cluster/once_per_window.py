"""A line about the same thing at most once per window, the next one saying how many were held back: the front door's
denials and closed connections (`front_door.security.audit`, `front_door.processor`) and librdkafka's repeated
lines (`kafka_cluster.client_log`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

WINDOW_S = 60.0
# distinct keys remembered before the quiet ones are forgotten
MAX_KEYS = 10_000


@dataclass
class _Seen:
    logged_at: float
    suppressed: int = 0


class OncePerWindow:
    """Whether a line about `key` is due: the first time, then once per window, with how many were held back
    since the last one (0: none). At most MAX_KEYS keys are remembered."""

    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._seen: dict[Hashable, _Seen] = {}

    def due(self, key: Hashable) -> int | None:
        """None: hold this one back; otherwise log it, with this many held back before it."""
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen.logged_at < self.window_s:
            seen.suppressed += 1
            return None
        if len(self._seen) >= MAX_KEYS:
            self._forget_quiet(now)
        self._seen[key] = _Seen(now)
        return seen.suppressed if seen is not None else 0

    def more(self, suppressed: int) -> str:
        return f" ({suppressed} more like it not logged in the last {self.window_s:.0f}s)" if suppressed else ""

    def _forget_quiet(self, now: float) -> None:
        """Keys whose window has passed (their suppressed counts go unreported); all of them if none has."""
        quiet = [k for k, s in self._seen.items() if now - s.logged_at >= self.window_s]
        for k in quiet or list(self._seen):
            del self._seen[k]
