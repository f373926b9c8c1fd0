"""Classic histograms: vLLM v0.25.0 bucket bounds, an exact per-step observation model, and
Prometheus' ``histogram_quantile`` re-implemented so tests can know the answer in advance.

Observation model: each step contributes a list of ``(value, count)`` pairs. Buckets are
cumulative and follow Prometheus' ``le`` rule (an observation equal to a bound counts in that
bound's bucket); ``_sum`` and ``_count`` grow by the same observations, so every bucket, the sum
and the count are consistent and monotonic between resets.

How to know a quantile exactly: ``histogram_quantile`` finds the bucket holding rank ``q * total``
and interpolates linearly between that bucket's lower and upper bound (the first bucket starts at
0, a rank in the ``+Inf`` bucket returns the highest finite bound). So if every observation of a
window falls in the bucket ``(lo, hi]``, the p95 is ``lo + (hi - lo) * 0.95`` whatever the exact
values were. ``expected_histogram_quantile`` does that arithmetic the way Prometheus 3.5 does.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left
from typing import Iterable, Mapping, Sequence

from servewatch import catalog
from .openmetrics import prom_float
from .series import Series

# vLLM v0.25.0 bounds, read from the catalog so the synthetic data and the generator share one source.
_METRICS = catalog.load().metrics
TTFT_BUCKETS = _METRICS["vllm:time_to_first_token_seconds"].buckets
ITL_BUCKETS = _METRICS["vllm:inter_token_latency_seconds"].buckets
REQ_BUCKETS = _METRICS["vllm:e2e_request_latency_seconds"].buckets
ITER_BUCKETS = tuple(int(b) for b in _METRICS["vllm:iteration_tokens_total"].buckets)
NIXL_XFER_BUCKETS = _METRICS["vllm:nixl_xfer_time_seconds"].buckets


def token_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's 1-2-5 series capped at ``max_model_len`` (``build_1_2_5_buckets``): 8192 -> 1 ... 5000."""
    out, exp = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > max_model_len:
                return tuple(out)
            out.append(v)
        exp += 1


Observations = Sequence[tuple[float, int]]  # (value, how many requests observed it)


def allocate(n: int, weights: Sequence[float]) -> list[int]:
    """Split ``n`` into integer parts proportional to ``weights``.

    Largest remainder; ties go to the earlier index.
    """
    total = float(sum(weights))
    if n <= 0 or total <= 0:
        return [0] * len(weights)
    exact = [round(n * w / total, 9) for w in weights]  # so 12 * 0.3 is 3.6, not 3.5999999999999996
    parts = [math.floor(x) for x in exact]
    left = n - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:left]:
        parts[i] += 1
    return parts


def bucket_index(value: float, bounds: Sequence[float]) -> int:
    """Index of the first bucket whose bound is >= value (``len(bounds)`` is ``+Inf``)."""
    return bisect_left(bounds, value)


def observe(obs: Observations, bounds: Sequence[float]) -> tuple[list[int], float, int]:
    """Per-bucket (non-cumulative, last = +Inf) counts, sum and count of one step's observations."""
    per = [0] * (len(bounds) + 1)
    total, count = 0.0, 0
    for value, n in obs:
        if n:
            per[bucket_index(value, bounds)] += n
            total += value * n
            count += n
    return per, total, count


def cumulative(per_bucket: Iterable[float]) -> list[float]:
    out, acc = [], 0.0
    for c in per_bucket:
        acc += c
        out.append(acc)
    return out


def histogram_series(
    name: str,
    labels: Mapping[str, str],
    bounds: Sequence[float],
    per_step: Sequence[Observations | None],
    prior: int = 0,
) -> list[Series]:
    """``<name>_bucket`` (one per bound + ``+Inf``), ``_sum`` and ``_count`` series.

    ``per_step[i]`` is step i's observations, or None where the series is absent. Each active run
    starts from zero (a new process): its first step holds ``prior`` times that step's observations
    (history before the window) and its own observations only count from the next step on.
    """
    nb = len(bounds) + 1
    buckets: list[list[float | None]] = [[] for _ in range(nb)]
    sums: list[float | None] = []
    counts: list[float | None] = []
    acc, s_acc, c_acc = [0] * nb, 0.0, 0
    was_active = False
    memo: dict[tuple, tuple[list[int], float, int]] = {}
    for obs in per_step:
        if obs is None:
            was_active = False
            for b in buckets:
                b.append(None)
            sums.append(None)
            counts.append(None)
            continue
        key = tuple(obs)
        if key not in memo:
            memo[key] = observe(obs, bounds)
        per, s, c = memo[key]
        if not was_active:  # counters of a fresh process
            acc, s_acc, c_acc = [x * prior for x in per], s * prior, c * prior
            was_active = True
        else:
            acc = [a + x for a, x in zip(acc, per, strict=True)]
            s_acc += s
            c_acc += c
        run = 0
        for k in range(nb):
            run += acc[k]
            buckets[k].append(run)
        sums.append(round(s_acc, 6))
        counts.append(c_acc)
    out = []
    les = [prom_float(b) for b in bounds] + ["+Inf"]
    for le, vals in zip(les, buckets, strict=True):
        out.append(Series(name + "_bucket", {**labels, "le": le}, vals, "histogram", name))
    out.append(Series(name + "_sum", labels, sums, "histogram", name))
    out.append(Series(name + "_count", labels, counts, "histogram", name))
    return out


# --------------------------------------------------------------- histogram_quantile

_SMALL_DELTA = 1e-12  # Prometheus' smallDeltaTolerance
_MIN_NORMAL = sys.float_info.min


def _almost_equal(a: float, b: float, eps: float) -> bool:
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < eps * _MIN_NORMAL
    return diff / min(abs_sum, sys.float_info.max) < eps


def expected_histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> float:
    """What Prometheus 3.5's ``histogram_quantile(q, ...)`` returns for classic buckets.

    ``bounds``: the finite upper bounds, ascending (``+Inf`` may be included as the last bound).
    ``counts``: the cumulative count of each bucket, with the ``+Inf`` bucket last
    (``len(bounds) + 1`` values if ``bounds`` has no ``+Inf``). Counts may be rates or increases.
    Returns NaN when there are no observations (an idle histogram).
    """
    bs = [float(b) for b in bounds]
    if not bs or not math.isinf(bs[-1]):
        bs.append(math.inf)
    cs = [float(c) for c in counts]
    if len(cs) != len(bs):
        raise ValueError(f"{len(cs)} counts for {len(bs)} buckets (incl. +Inf)")
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(bs) < 2:
        return math.nan
    # ensureMonotonicAndIgnoreSmallDeltas: float noise is ignored, real decreases are flattened.
    prev = cs[0]
    for i in range(1, len(cs)):
        cur = cs[i]
        if cur == prev:
            continue
        if _almost_equal(prev, cur, _SMALL_DELTA) or cur < prev:
            cs[i] = prev
            continue
        prev = cur
    observations = cs[-1]
    if observations == 0 or math.isnan(observations):
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(bs) - 1) if cs[i] >= rank), len(bs) - 1)
    if b == len(bs) - 1:
        return bs[-2]
    if b == 0 and bs[0] <= 0:
        return bs[0]
    start, end, count = 0.0, bs[b], cs[b]
    if b > 0:
        start = bs[b - 1]
        count -= cs[b - 1]
        rank -= cs[b - 1]
    return start + (end - start) * (rank / count)


def quantile_of_observations(q: float, obs: Observations, bounds: Sequence[float]) -> float:
    """``expected_histogram_quantile`` of a set of observations (e.g. one stationary step)."""
    per, _, _ = observe(obs, bounds)
    return expected_histogram_quantile(q, bounds, cumulative(per))


__all__ = [
    "TTFT_BUCKETS",
    "ITL_BUCKETS",
    "REQ_BUCKETS",
    "ITER_BUCKETS",
    "NIXL_XFER_BUCKETS",
    "token_buckets",
    "allocate",
    "bucket_index",
    "observe",
    "cumulative",
    "histogram_series",
    "expected_histogram_quantile",
    "quantile_of_observations",
    "Observations",
]
