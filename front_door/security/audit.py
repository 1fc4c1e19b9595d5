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
from collections.abc import Callable

from front_door.network.principal import KafkaPrincipal
from front_door.security.acls import AclOperation, PatternType, ResourcePattern, ResourceType
from kafka_cluster.once_per_window import WINDOW_S, OncePerWindow

log = logging.getLogger("gateway.front_door.authorizer")


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
