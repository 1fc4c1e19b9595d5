"""The soak's report (tests/soak.py): growth per hour from the samples, after the warm-up and over the last half."""

from __future__ import annotations

from tests.soak import _slope_per_hour, report


def test_growth_per_hour_is_the_least_squares_slope() -> None:
    assert _slope_per_hour([(0.0, 10.0), (30.0, 15.0), (60.0, 20.0)]) == 10.0
    assert _slope_per_hour([(0.0, 1.0), (1.0, 1.0)]) is None  # too few samples


def test_a_series_that_levels_off_grows_less_in_the_last_half() -> None:
    # grows 1 MB a minute for 50 minutes, then stays: growth after warm-up, 0/h over the last half of 120 min
    rows = [{"minutes": float(m), "jvm_rss_mb": float(min(m, 50))} for m in range(0, 121, 5)]
    text, summary = report(rows, 120)
    rss = summary["jvm_rss_mb"]
    assert isinstance(rss, dict)
    assert rss["first"] == 0 and rss["last"] == 50 and rss["max"] == 50
    assert rss["growth_per_h_last_half"] == 0
    assert rss["growth_per_h"] > 0
    assert "| jvm_rss_mb | 0.0 | 50.0 |" in text
    assert rss["level"] is True and rss["peak_last_half"] == 50
    assert "heap_used_mb" not in summary  # series without samples are left out


def test_a_sawtooth_levels_off_and_a_climb_does_not() -> None:
    # G1's committed heap: grows, is given back after a full GC, grows again to the same peak
    saw = [{"minutes": float(m), "heap_committed_mb": 500.0 + (m % 30) * 30} for m in range(0, 121, 5)]
    climb = [{"minutes": float(m), "state_memory_mb": 1.0 + m * 0.06} for m in range(0, 121, 5)]
    _, summary = report([a | b for a, b in zip(saw, climb, strict=True)], 120)
    heap, state = summary["heap_committed_mb"], summary["state_memory_mb"]
    assert isinstance(heap, dict) and isinstance(state, dict)
    assert heap["level"] is True and heap["growth_per_h_last_half"] != 0
    assert state["level"] is False
