"""An expression on its group's evaluation grid: range queries in bounded chunks.

The grid is every multiple of the step inside the range, so every chunk, every alert of a group and
every run asks for the same timestamps. A chunk is at most ``max_points`` evaluations (Prometheus
refuses more than 11,000 points per series) and ``chunk_s`` long; when Prometheus refuses a chunk
(too many samples, a server-side timeout, an overloaded server) it is asked again in halves, down
to ``min_points``; what still fails becomes one sentence with a smaller range or chunk to try.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..errors import ServewatchError
from ..promapi import Client, PromApiError, QueryRejected

Labels = tuple[tuple[str, str], ...]
Samples = dict[Labels, list[tuple[float, float]]]

REFUSED = (400, 422, 503)


class BacktestError(ServewatchError):
    """The back-test cannot go on: a refused query, a bad range, a file it cannot read."""


@dataclass(frozen=True)
class QueryBounds:
    """How large a single query may be."""

    chunk_s: float = 86400.0
    max_points: int = 10_000
    min_points: int = 30


def grid(start: float, end: float, step: float) -> list[float]:
    """The multiples of `step` in [start, end]."""
    first = math.ceil(start / step) * step
    n = int(math.floor((end - first) / step + 1e-9)) + 1
    return [first + i * step for i in range(max(0, n))]


def chunks(points: list[float], step: float, bounds: QueryBounds) -> list[tuple[float, float]]:
    """(first, last) grid points of each chunk."""
    per = max(1, min(bounds.max_points, int(bounds.chunk_s // step) or 1))
    return [(points[i], points[min(i + per, len(points)) - 1]) for i in range(0, len(points), per)]


def _fmt(s: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n and s % n == 0:
            return f"{int(s // n)}{unit}"
    return f"{s:g}s"


def _advice(what: str, lo: float, hi: float, step: float, exc: PromApiError) -> BacktestError:
    """The sentence for a chunk that failed even at the smallest size: what to change, and why."""
    chunk = _fmt(hi - lo + step)
    timed_out = getattr(exc, "error_type", "") == "timeout" or exc.status == 503
    if timed_out:
        hint = f"try a longer --timeout, or a smaller --chunk (it failed on {chunk})"
    else:
        hint = (
            f"one chunk of {chunk} already loads too many samples at step {_fmt(step)}: back-test a shorter "
            f"--range with a coarser --evaluation-interval (e.g. {_fmt(step * 2)}; an alert's `for` is then "
            "rounded to it), or raise the server's --query.max-samples"
        )
    return BacktestError(f"Prometheus refused the range query of {what} ({exc}); {hint}")


def range_samples(
    client: Client,
    expr: str,
    points: list[float],
    step: float,
    bounds: QueryBounds,
    what: str,
    progress: Callable[[int, int], None] = lambda i, n: None,
) -> Samples:
    """Every series the expression returns on the grid, its samples in time order."""
    out: Samples = {}
    parts = chunks(points, step, bounds)
    for i, (lo, hi) in enumerate(parts):
        progress(i, len(parts))
        for labels, values in _ask(client, expr, lo, hi, step, bounds, what).items():
            out.setdefault(labels, []).extend(values)
    progress(len(parts), len(parts))
    return out


def _ask(client, expr, lo, hi, step, bounds, what) -> Samples:
    try:
        rows = client.query_range(expr, lo, hi, step)
    except PromApiError as exc:
        refused = isinstance(exc, QueryRejected) and exc.error_type != "bad_data" or exc.status in REFUSED
        if isinstance(exc, QueryRejected) and exc.error_type == "bad_data" and "resolution" not in exc.error:
            raise BacktestError(f"Prometheus cannot parse the expression of {what}: {exc}") from None
        if not refused:  # unreachable, unauthorized, not a Prometheus: promapi's sentence says which
            raise BacktestError(f"{what}: {exc}") from None
        points = int(round((hi - lo) / step)) + 1
        if points <= bounds.min_points:
            raise _advice(what, lo, hi, step, exc) from None
        mid = lo + (points // 2) * step
        first = _ask(client, expr, lo, mid - step, step, bounds, what)
        for labels, values in _ask(client, expr, mid, hi, step, bounds, what).items():
            first.setdefault(labels, []).extend(values)
        return first
    out: Samples = {}
    for row in rows:
        labels = tuple(sorted((k, v) for k, v in row["metric"].items() if k != "__name__"))
        out.setdefault(labels, []).extend((float(t), float(v)) for t, v in row["values"])
    return out
