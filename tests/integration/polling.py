"""Waiting for a condition of another process (a Connect worker, a Streams application) with a deadline: the
tests poll what they can observe instead of sleeping for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_INTERVAL_S = 0.2  # the JVMs run on their own; this only bounds how often their state is looked at


def until(condition: Callable[[], bool], what: str, timeout_s: float = 120.0,
          detail: Callable[[], str] = lambda: "") -> None:
    """Return once `condition()` holds; fail naming `what` (and `detail()`, e.g. a log's tail) at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{detail()}")
        time.sleep(POLL_INTERVAL_S)
