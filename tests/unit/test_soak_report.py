"""The soak's report (tests/soak.py): growth per hour from the samples, after the warm-up and over the last half."""

from __future__ import annotations

from tests.soak import _slope_per_hour, report


def test_growth_per_hour_is_the_least_squares_slope() -> None:
    assert _slope_per_hour([(0.0, 10.0), (30.0, 15.0), (60.0, 20.0)]) == 10.0
    assert _slope_per_hour([(0.0, 1.0), (1.0, 1.0)]) is None  # too few samples


def test_a_series_that_levels_off_grows_less_in_the_last_half() -> None:
    # grows 1 MB a minute for an hour, then stays: 60/h after warm-up, 0/h over the last half of 120 min
    rows = [{"minutes": float(m), "jvm_rss_mb": float(min(m, 60))} for m in range(0, 121, 5)]
    text, summary = report(rows, 120)
    rss = summary["jvm_rss_mb"]
    assert isinstance(rss, dict)
    assert rss["first"] == 0 and rss["last"] == 60 and rss["max"] == 60
    assert rss["growth_per_h_last_half"] == 0
    assert rss["growth_per_h"] > 0
    assert "| jvm_rss_mb | 0.0 | 60.0 |" in text
    assert "heap_used_mb" not in summary  # series without samples are left out
