"""Ground truth for tests: what Prometheus 3.5 answers for simple queries over synthetic series.

Everything works on step indices: the evaluation time is ``start + at * step``, so the answers do
not depend on ``start``. Prometheus 3 selects ranges and the instant lookback left-open,
``(t - window, t]``; ``rate``/``increase`` extrapolate exactly as ``extrapolatedRate`` does
(including the "do not extrapolate below zero" limit that bites in the first minutes of a
counter's life). Backfilled data carries no staleness markers, so a series that stops is still
returned by instant queries for the 5m lookback after its last sample.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from servewatch.slo.simulate import extrapolated

from .histogram import expected_histogram_quantile
from .series import Series

LOOKBACK_S = 300.0  # Prometheus' default --query.lookback-delta


def fb_ratio(used: float, free: float) -> float | None:
    """Framebuffer used fraction ``used / (used + free)``; None where the denominator is 0 (never fires)."""
    total = used + free
    return None if total <= 0 else used / total


def _window(series: Series, at: int, window_s: float, step: float) -> list[tuple[float, float]]:
    """(seconds relative to the evaluation time, value) of the samples in ``(t - window, t]``."""
    out = []
    lo = at - window_s / step
    for i in range(max(0, math.floor(lo)), min(at, len(series.values) - 1) + 1):
        v = series.values[i]
        if v is not None and i > lo:
            out.append(((i - at) * step, v))
    return out


def instant(series: Series, at: int, step: float = 30.0, lookback_s: float = LOOKBACK_S) -> float | None:
    """The value an instant query returns at step ``at`` (latest sample within the lookback)."""
    w = _window(series, at, lookback_s, step)
    return w[-1][1] if w else None


def increase(series: Series, at: int, window_s: float, step: float = 30.0) -> float | None:
    """``increase(series[window])`` at step ``at``; None where Prometheus returns no sample."""
    return _extrapolated(series, at, window_s, step, is_rate=False)


def rate(series: Series, at: int, window_s: float, step: float = 30.0) -> float | None:
    """``rate(series[window])`` at step ``at``; None where Prometheus returns no sample."""
    return _extrapolated(series, at, window_s, step, is_rate=True)


def _extrapolated(series: Series, at: int, window_s: float, step: float, is_rate: bool) -> float | None:
    # Prometheus' rate() extrapolation as slo/simulate.py computes it (the generated SLO tests use it too)
    return extrapolated(series.values, at, window_s, step, is_rate)


def _bucket_parts(series: Iterable[Series]) -> dict[float, list[Series]]:
    by_le: dict[float, list[Series]] = {}
    for s in series:
        if s.name.endswith("_bucket"):
            by_le.setdefault(float(s.label("le")), []).append(s)
    return dict(sorted(by_le.items()))


def histogram_quantile_over(
    q: float, series: Iterable[Series], at: int, window_s: float, step: float = 30.0
) -> float | None:
    """``histogram_quantile(q, sum by (le) (rate(x_bucket[window])))`` over the given bucket series.

    Pass exactly the ``_bucket`` series that the query's selector and ``sum by`` would combine
    (other series are ignored). Returns None where Prometheus returns no sample: no bucket has a
    rate (fewer than two samples in the window), or the rates are all zero (idle -> NaN -> the
    generated queries drop it).
    """
    by_le = _bucket_parts(series)
    if not by_le:
        return None
    sums: list[float] = []
    any_rate = False
    for parts in by_le.values():
        rates = [r for r in (rate(s, at, window_s, step) for s in parts) if r is not None]
        any_rate |= bool(rates)
        sums.append(sum(rates))
    if not any_rate:
        return None
    bounds = list(by_le)
    result = expected_histogram_quantile(q, bounds, sums)
    return None if math.isnan(result) else result


def select(series: Iterable[Series], name: str | None = None, **labels: str | None) -> list[Series]:
    """Series whose name and labels match (``label=None`` means the label must be absent)."""
    return [s for s in series if s.matches(name, **labels)]


def one(series: Iterable[Series], name: str | None = None, **labels: str | None) -> Series:
    """The single matching series; raises if there are none or several."""
    hits = select(series, name, **labels)
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} series match {name}{labels}")
    return hits[0]


def values_at(series: Sequence[Series], at: int) -> list[float | None]:
    return [s.values[at] if at < len(s.values) else None for s in series]


__all__ = [
    "LOOKBACK_S",
    "fb_ratio",
    "instant",
    "increase",
    "rate",
    "histogram_quantile_over",
    "select",
    "one",
    "values_at",
]
