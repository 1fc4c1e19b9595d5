"""Liveness and readiness of the gateway, served beside the metrics (`/healthz`, `/readyz`) for
Kubernetes probes and load balancers. The supervisor (streaming/supervisor.py) sets them:

- live: the driver is supervising — running a query, or waiting to restart one. It turns false only
  when the supervisor gave up (an error a restart cannot fix): a liveness probe then restarts the pod.
- ready: a query is running and has started or completed a micro-batch since its last (re)start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class HealthState:
    live: bool
    ready: bool
    detail: str


class Health:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = HealthState(live=True, ready=False, detail="starting")

    def set(self, *, live: bool = True, ready: bool, detail: str) -> None:
        with self._lock:
            self._state = HealthState(live, ready, detail)

    @property
    def state(self) -> HealthState:
        with self._lock:
            return self._state
