"""CreateTime window checks of KIP-937 with Java `long` arithmetic (`LogValidator.validateTimestamp`, KIP-937; KIP-937).

Kafka's `LogValidator.validateTimestamp` / `recordHasInvalidTimestamp`:

    diff = now - ts                              // Java long: wraps on overflow
    invalid = diff > beforeMaxMs || -1 * diff > afterMaxMs

and the record error text prints `now - beforeMaxMs` and `now + afterMaxMs`, also with wrap-around
(with the default before = Long.MAX_VALUE the lower bound prints as a large negative number).
`-1` (`RecordBatch.NO_TIMESTAMP`) is exempt; bounds are inclusive.

Everything here is a pure function of integers. The hot path uses `safe_window`, a plain integer
interval proven equal to the Java check for every timestamp inside it; anything outside it is
re-checked with the exact emulation (`is_out_of_range`).
"""

from __future__ import annotations

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
_TWO_64 = 1 << 64


# KIP-937: "we will add a WARN-level log when we encounter messages with future timestamps that are
# ahead of the proposed one-hour threshold" (docs/design.md: what the stage decides: logged at WARN and counted even when accepted).
FUTURE_TIMESTAMP_WARN_MS = 3_600_000


def to_long(value: int) -> int:
    """Wrap an unbounded int to a Java `long` (two's complement, 64 bits)."""
    return ((value - LONG_MIN) % _TWO_64) + LONG_MIN


def is_out_of_range(ts: int, now: int, before_max_ms: int, after_max_ms: int) -> bool:
    """Exact `LogValidator.recordHasInvalidTimestamp` (the caller exempts -1 first)."""
    diff = to_long(now - ts)
    return diff > before_max_ms or to_long(-diff) > after_max_ms


def window_bounds(now: int, before_max_ms: int, after_max_ms: int) -> tuple[int, int]:
    """The `[now - before, now + after]` pair exactly as Kafka prints it (Java long wrap-around)."""
    return to_long(now - before_max_ms), to_long(now + after_max_ms)


def out_of_range_message(ts: int, offset: int, now: int, before_max_ms: int, after_max_ms: int) -> str:
    """Kafka's per-record INVALID_TIMESTAMP text (`LogValidator.validateTimestamp`, KIP-937); `offset` is the offset as sent."""
    lower, upper = window_bounds(now, before_max_ms, after_max_ms)
    return (
        f"Timestamp {ts} of message with offset {offset} is out of range. "
        f"The timestamp should be within [{lower}, {upper}]"
    )


def safe_window(now: int, before_max_ms: int, after_max_ms: int) -> tuple[int, int]:
    """A plain integer interval [lo, hi] such that, for every Java long `ts` in it, the exact Java
    check accepts `ts`, and for every `ts` outside it whose `now - ts` does not overflow, the check
    rejects it. Timestamps outside the interval must be re-checked with `is_out_of_range` (that is
    where the wrap-around cases live, e.g. ts = Long.MIN_VALUE). May be empty (lo > hi)."""
    lo = max(now - before_max_ms, LONG_MIN, now - LONG_MAX)
    hi = min(now + after_max_ms, LONG_MAX, now - LONG_MIN - 1)
    return lo, hi


def is_future(ts: int, now: int) -> bool:
    """KIP-937's WARN threshold: more than one hour ahead of the broker clock."""
    return ts - now > FUTURE_TIMESTAMP_WARN_MS
