"""Cost of a PromQL query as Prometheus itself reports it (``stats=all``), as a median of repeats.

``samples`` is ``samples.totalQueryableSamples``: every sample the query loaded from the TSDB,
summed over the steps of a range query; it does not depend on the machine. ``eval_s`` is
``timings.evalTotalTime``: the engine's time to prepare and evaluate the query, without queueing
and without encoding the answer; it does, so it is the median of ``repeats`` runs after ``warmup``
unmeasured ones (which load the chunks into the page cache).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

from servewatch.promapi import Client, timestamp


@dataclass(frozen=True)
class Cost:
    samples: int
    peak: int  # samples.peakSamples: the most samples held at once
    eval_s: float

    @classmethod
    def from_stats(cls, stats: Any) -> "Cost":
        """Read the ``stats`` object of a ``/api/v1/query`` or ``query_range`` answer."""
        try:
            return cls(
                int(stats["samples"]["totalQueryableSamples"]),
                int(stats["samples"]["peakSamples"]),
                float(stats["timings"]["evalTotalTime"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"answer has no query statistics (was stats=all sent?): {str(stats)[:200]}"
            ) from None

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.samples + other.samples, max(self.peak, other.peak), self.eval_s + other.eval_s)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "peak_samples": self.peak, "eval_ms": round(self.eval_s * 1000, 3)}


ZERO = Cost(0, 0, 0.0)


def total(costs: Iterable[Cost]) -> Cost:
    return sum(costs, ZERO)


def median(runs: Sequence[Cost]) -> Cost:
    """The median evaluation time of runs of one query; its samples must not change between runs."""
    if not runs:
        raise ValueError("no runs to take the median of")
    touched = {r.samples for r in runs}
    if len(touched) > 1:
        raise ValueError(f"samples touched changed between runs of one query: {sorted(touched)}")
    return Cost(runs[0].samples, max(r.peak for r in runs), statistics.median(r.eval_s for r in runs))


class Api(Protocol):
    def api(self, path: str, **params: Any) -> Any: ...


class Uncompressed:
    """A Prometheus' query API asked for answers as they are, not gzipped.

    Prometheus compresses an answer for a client that accepts it (as `requests` does by default),
    with a new compressor per answer: in the bench's queries of the rule set at 4,096 GPUs a fifth
    of all the bytes Prometheus allocated (bench/README.md, "Head or blocks"), and so a share of
    its garbage collection. Its rule manager evaluates rules without an HTTP answer at all.
    """

    def __init__(self, url: str, timeout: float = 600.0):
        self.client = Client(url, timeout=timeout, compressed=False)

    def api(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params)


class Runner:
    """Runs queries with ``stats=all`` against a Prometheus (``LocalPrometheus.api``)."""

    def __init__(self, prom: Api, repeats: int = 5, warmup: int = 1):
        if repeats < 1 or warmup < 0:
            raise ValueError("repeats must be >= 1 and warmup >= 0")
        self.prom, self.repeats, self.warmup = prom, repeats, warmup

    def instant(self, expr: str, time: float) -> Cost:
        return self._median("/api/v1/query", query=expr, time=timestamp(time))

    def range(self, expr: str, start: float, end: float, step: float) -> Cost:
        return self._median(
            "/api/v1/query_range",
            query=expr,
            start=timestamp(start),
            end=timestamp(end),
            step=timestamp(step),
        )

    def _median(self, path: str, **params: str) -> Cost:
        runs = []
        for i in range(self.warmup + self.repeats):
            cost = Cost.from_stats(self.prom.api(path, stats="all", **params).get("stats"))
            if i >= self.warmup:
                runs.append(cost)
        return median(runs)


__all__ = ["Cost", "ZERO", "Runner", "Uncompressed", "median", "total"]
