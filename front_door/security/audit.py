"""Denied requests, logged and counted: Kafka's authorizer writes one INFO line per denied action on
`kafka.authorizer.logger` (`StandardAuthorizer.logAuditMessage`); here the same line, in the same words,
at most once a minute per (principal, API, resource) — a client retrying a denied produce would otherwise
write a line per retry — and the next line after a quiet minute says how many were not written. Every
denial is counted, by API, and handed to `on_denied` (the front door's metrics).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from front_door.network.principal import KafkaPrincipal
from front_door.security.acls import AclOperation, PatternType, ResourcePattern, ResourceType

log = logging.getLogger("gateway.front_door.authorizer")

WINDOW_S = 60.0
# distinct (principal, API, resource) keys remembered before the quiet ones are forgotten
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


class DenialAudit:
    """`denied(...)` for every denial a handler reports; `counts` by API since the start."""

    def __init__(self, on_denied: Callable[[str], None] | None = None, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log) -> None:
        self.on_denied = on_denied
        self.window_s = window_s
        self._once = OncePerWindow(window_s, clock)
        self._log = logger
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def denied(self, principal: KafkaPrincipal, host: str, api: str, operation: AclOperation,
               resource_type: ResourceType, name: str) -> None:
        self.counts[api] += 1
        if self.on_denied is not None:
            self.on_denied(api)
        resource = ResourcePattern(resource_type, name, PatternType.LITERAL)
        suppressed = self._once.due((str(principal), api, resource))
        if suppressed is None:
            return
        self._log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s for request = %s%s",
                       principal, operation.name, host, resource, api, self._once.more(suppressed))
