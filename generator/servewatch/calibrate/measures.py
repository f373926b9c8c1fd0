"""What a load test measures, each named once.

A measure key is what `--target` names and what both sources report per step: a latency
percentile `<metric>_p<P>` (seconds) or `errors` (failed share of finished requests). The latency
metrics are vLLM bench's names (`ttft`, `tpot`, `itl`, `e2el`), each the client-side view of one
vLLM histogram: the alert on that histogram's quantile is the one a latency target tunes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# vLLM bench's metric name -> the server histogram that measures the same latency
HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2el": "vllm:e2e_request_latency_seconds",
}
ALIASES = {"e2e": "e2el"}
FINISHED = "vllm:request_success_total"  # finished requests by finished_reason: the error share's counter
ERRORS = "errors"
KEY_RE = re.compile(r"(?P<metric>[a-z0-9]+)_p(?P<p>[0-9]+(?:\.[0-9]+)?)")


@dataclass(frozen=True)
class Measure:
    metric: str  # a HISTOGRAMS key, or ERRORS
    percentile: float | None = None  # 95, 99.9; None for errors

    @property
    def key(self) -> str:
        return ERRORS if self.percentile is None else f"{self.metric}_p{percentile_word(self.percentile)}"

    @property
    def quantile(self) -> float | None:
        return None if self.percentile is None else self.percentile / 100

    @property
    def histogram(self) -> str | None:
        return HISTOGRAMS.get(self.metric)

    @property
    def unit(self) -> str:
        return "ratio" if self.percentile is None else "s"


def percentile_word(p: float) -> str:
    """95 -> '95', 99.9 -> '99.9': how vLLM bench writes a percentile in its keys."""
    return str(int(p)) if int(p) == p else f"{p:g}"


def parse_key(text: str) -> Measure:
    """`ttft_p95`, `e2e_p99.9`, `errors` -> a Measure; ValueError with what is known otherwise."""
    if text == ERRORS:
        return Measure(ERRORS)
    m = KEY_RE.fullmatch(text)
    metric = ALIASES.get(m["metric"], m["metric"]) if m else None
    if not m or metric not in HISTOGRAMS or not 0 < float(m["p"]) < 100:
        known = ", ".join(f"{k}_p<P>" for k in HISTOGRAMS)
        raise ValueError(f"{text!r} is not a measure: use {known} (P between 0 and 100) or {ERRORS}")
    return Measure(metric, float(m["p"]))


def for_histogram(histogram: str, quantile: float) -> Measure | None:
    """The measure an alert on `histogram`'s `quantile` watches, if a load test measures it."""
    for metric, name in HISTOGRAMS.items():
        if name == histogram:
            return Measure(metric, round(quantile * 100, 6))
    return None


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile with linear interpolation between ranks (numpy's default, which vLLM
    bench uses for its `p<P>_<metric>_ms` keys)."""
    if not values:
        return math.nan
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def signal_alerts(model) -> list:
    """The alerts a load test can calibrate: those on a signal (absence alerts and SLO burn rows have
    no threshold of their own to move)."""
    return [a for a in model.alerts() if getattr(a.spec, "signal", None)]
