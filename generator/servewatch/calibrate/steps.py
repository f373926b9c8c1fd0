"""One load step as a source saw it: the load, the requests, the measures and (Prometheus) each
alert's own signal over the step."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Trace:
    """An alert's signal over a step, at its group's evaluation interval: the worst series
    (fullest engine, slowest model) at each evaluation and the labels of the worst overall."""

    interval_s: float
    values: tuple[float, ...]
    worst_labels: dict[str, str] = field(default_factory=dict)

    def median(self) -> float | None:
        xs = sorted(self.values)
        return None if not xs else (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2

    def peak(self) -> float | None:
        return max(self.values) if self.values else None

    def longest_above(self, threshold: float) -> float:
        """Seconds of the longest run of evaluations above `threshold` (what a `for` must outlast)."""
        best = run = 0
        for v in self.values:
            run = run + 1 if v > threshold else 0
            best = max(best, run)
        return best * self.interval_s


@dataclass(frozen=True)
class LoadStep:
    source: str  # the file, or the Prometheus and its range
    label: str  # "4 req/s", "concurrency 64", "12:00:00-12:10:00"
    load: float  # what orders the steps (request rate, concurrency, or the position in the run)
    requests: int  # finished requests (completed + failed)
    seconds: float
    measures: dict[str, float]  # measure key -> value (seconds, or a ratio for errors)
    good_tokens: float | None = None  # output tokens of requests that met every goodput SLO
    observed: dict[str, float] = field(default_factory=dict)  # alert name -> its signal over the step
    traces: dict[str, Trace] = field(default_factory=dict)  # alert name -> its signal over time
    unmeasured: dict[str, str] = field(default_factory=dict)  # measure key -> why it is not there
    # measure key -> the bucket bounds its histogram has (Prometheus, at the client: undocumented)
    bounds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # measure key -> the requests an error share is over where they are not `requests` (at the
    # client: the gateway's, which counts the requests it failed before any engine saw them)
    totals: dict[str, int] = field(default_factory=dict)
