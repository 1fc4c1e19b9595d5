"""KIP-937 window arithmetic with Java long wrap-around (`LogValidator.validateTimestamp`, KIP-937; KIP-937)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from validators.timestamps import (
    FUTURE_TIMESTAMP_WARN_MS,
    LONG_MAX,
    LONG_MIN,
    is_future,
    is_out_of_range,
    out_of_range_message,
    safe_window,
    to_long,
    window_bounds,
)

NOW = 1_700_000_000_000
longs = st.integers(min_value=LONG_MIN, max_value=LONG_MAX)
windows = st.integers(min_value=0, max_value=LONG_MAX)


def test_to_long_wraps_like_java() -> None:
    assert to_long(LONG_MAX + 1) == LONG_MIN
    assert to_long(LONG_MIN - 1) == LONG_MAX
    assert to_long(0) == 0
    assert to_long(-1) == -1
    assert to_long(LONG_MAX + 1) == LONG_MIN
    assert to_long(LONG_MIN - 1) == LONG_MAX
    assert to_long(NOW - LONG_MAX) == NOW - LONG_MAX  # no wrap: stays a large negative number


def test_bounds_are_inclusive() -> None:
    before, after = 1000, 2000
    assert not is_out_of_range(NOW - before, NOW, before, after)
    assert is_out_of_range(NOW - before - 1, NOW, before, after)
    assert not is_out_of_range(NOW + after, NOW, before, after)
    assert is_out_of_range(NOW + after + 1, NOW, before, after)
    assert not is_out_of_range(NOW, NOW, 0, 0)
    assert is_out_of_range(NOW + 1, NOW, 0, 0)
    assert is_out_of_range(NOW - 1, NOW, 0, 0)


def test_default_before_accepts_ordinary_negatives_but_not_long_min() -> None:
    # KIP-937: other negatives are accepted under before = Long.MAX_VALUE; Long.MIN_VALUE wraps
    # `now - ts` negative, so `-diff` is huge and it is rejected as "future"
    assert not is_out_of_range(-5, NOW, LONG_MAX, 3_600_000)
    assert not is_out_of_range(0, NOW, LONG_MAX, 3_600_000)
    assert is_out_of_range(LONG_MIN, NOW, LONG_MAX, 3_600_000)
    assert is_out_of_range(LONG_MAX, NOW, LONG_MAX, 3_600_000)


def test_window_bounds_print_like_java() -> None:
    assert window_bounds(NOW, LONG_MAX, 3_600_000) == (NOW - LONG_MAX, NOW + 3_600_000)
    assert window_bounds(NOW, LONG_MAX, 3_600_000)[0] == -9223370336854775807
    # after = Long.MAX_VALUE overflows to a negative upper bound in Kafka's text
    assert window_bounds(NOW, 1000, LONG_MAX) == (NOW - 1000, to_long(NOW + LONG_MAX))
    assert window_bounds(NOW, 1000, LONG_MAX)[1] < 0


def test_out_of_range_message_is_kafkas_text() -> None:
    assert out_of_range_message(NOW - 1001, 2, NOW, 1000, 1000) == (
        f"Timestamp {NOW - 1001} of message with offset 2 is out of range. "
        f"The timestamp should be within [{NOW - 1000}, {NOW + 1000}]"
    )
    assert out_of_range_message(LONG_MIN, 0, NOW, LONG_MAX, 3_600_000) == (
        "Timestamp -9223372036854775808 of message with offset 0 is out of range. "
        "The timestamp should be within [-9223370336854775807, 1700003600000]"
    )


def test_future_threshold_is_strictly_more_than_one_hour() -> None:
    assert FUTURE_TIMESTAMP_WARN_MS == 3_600_000
    assert not is_future(NOW + 3_600_000, NOW)
    assert is_future(NOW + 3_600_001, NOW)
    assert not is_future(-1, NOW)


@given(ts=longs, now=longs, before=windows, after=windows)
def test_safe_window_agrees_with_java(ts: int, now: int, before: int, after: int) -> None:
    lo, hi = safe_window(now, before, after)
    if lo <= ts <= hi:
        assert not is_out_of_range(ts, now, before, after)
    elif LONG_MIN < now - ts <= LONG_MAX:
        assert is_out_of_range(ts, now, before, after)


@given(ts=longs, now=st.integers(min_value=0, max_value=1 << 50), before=windows, after=windows)
def test_exact_check_matches_unbounded_arithmetic_when_nothing_overflows(ts: int, now: int, before: int, after: int) -> None:
    if LONG_MIN < now - ts <= LONG_MAX:
        assert is_out_of_range(ts, now, before, after) == (not now - before <= ts <= now + after)
