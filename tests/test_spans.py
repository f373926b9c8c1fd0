"""servewatch_testkit.spans: scenarios laid out on one axis never see each other's samples."""

from __future__ import annotations

from servewatch_testkit.spans import HOUR, LOOKBACK_S, horizon, starts


def test_horizon_is_the_longest_window_plus_the_largest_offset_plus_the_lookback():
    rules = ["rate(x[5m]) > 0", "sum_over_time(y[28d]) and z offset 45m", "max_over_time(a[1h:5m])"]
    assert horizon(rules) == 28 * 86400 + 45 * 60 + LOOKBACK_S


def test_horizon_reads_subquery_windows_and_compound_durations():
    assert horizon(["max_over_time(rate(a[5m])[1h30m:1m])"]) == 5400 + LOOKBACK_S
    assert horizon(["up"]) == LOOKBACK_S


def test_spans_are_hour_aligned_in_order_in_the_past_and_a_gap_apart():
    now = 1_800_000_123.0
    lengths = [7200.0, 100.0, 3 * 86400.0 + 1]
    gap = horizon(["x[3d]"])
    got = starts(lengths, gap, now=now)
    assert all(s % HOUR == 0 for s in got)
    for (s, length), nxt in zip(zip(got, lengths, strict=True), got[1:], strict=False):
        assert nxt - (s + length) >= gap  # the next span's earliest read stays clear of this one
    assert got[-1] + lengths[-1] <= now - HOUR
    assert starts(lengths, gap, now=now) == got  # deterministic for a given now
