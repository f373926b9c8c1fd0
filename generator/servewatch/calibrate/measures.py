"""What a load test measures, each named once.

A measure key is what `--target` names and what both sources report per step: a latency
percentile `<metric>_p<P>` (seconds) or `errors` (failed share of finished requests). The latency
metrics are vLLM bench's names (`ttft`, `tpot`, `itl`, `e2el`), each the client-side view of one
vLLM histogram: the alert on that histogram's quantile is the one a latency target tunes.

From Prometheus a latency is read on the side the alerts and SLOs on it read (`side_of`): at the
client where config.client_side measures the quantity (its gateway's twin of the histogram), else on
the engines each request is counted once on (the decode engines where config.role is set). The
error share follows the same rule: at the client where config.client_side counts requests and
errors (the gateway's failures over its requests), else the engines' finished requests. An SLO
that says otherwise (`sli.side`) reads its own side, under a key that names it (`ttft_p99@instance`,
`errors@instance`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from .. import catalog
from ..spec.slos import CLIENT_PREFIX, client_errors, client_read

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
SIDE = r"(?:@(?P<side>client|instance))?"  # a key naming the side it is read on
KEY_RE = re.compile(r"(?P<metric>[a-z0-9]+)_p(?P<p>[0-9]+(?:\.[0-9]+)?)" + SIDE)
ERRORS_RE = re.compile(ERRORS + SIDE)


@dataclass(frozen=True)
class Measure:
    metric: str  # a HISTOGRAMS key, or ERRORS
    percentile: float | None = None  # 95, 99.9; None for errors
    side: str | None = None  # None: where the alerts read it (side_of); else an SLO's own side

    @property
    def key(self) -> str:
        name = ERRORS if self.percentile is None else f"{self.metric}_p{percentile_word(self.percentile)}"
        return name + (f"@{self.side}" if self.side else "")

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
    errors = ERRORS_RE.fullmatch(text)
    if errors:
        return Measure(ERRORS, side=errors["side"])
    m = KEY_RE.fullmatch(text)
    metric = ALIASES.get(m["metric"], m["metric"]) if m else None
    if not m or metric not in HISTOGRAMS or not 0 < float(m["p"]) < 100:
        known = ", ".join(f"{k}_p<P>" for k in HISTOGRAMS)
        raise ValueError(
            f"{text!r} is not a measure: use {known} (P between 0 and 100) or {ERRORS}, each with "
            "@client or @instance to name a side"
        )
    return Measure(metric, float(m["p"]), m["side"])


def for_histogram(histogram: str, quantile: float) -> Measure | None:
    """The measure an alert on `histogram`'s `quantile` watches, if a load test measures it; a
    client-side quantity (`client_ttft`) is its engine histogram's twin, measured where the client is."""
    if histogram.startswith(CLIENT_PREFIX):
        histogram = catalog.load().engine_twins.get(histogram.removeprefix(CLIENT_PREFIX), histogram)
    for metric, name in HISTOGRAMS.items():
        if name == histogram:
            return Measure(metric, round(quantile * 100, 6))
    return None


def side_of(measure: Measure, client_side) -> str:
    """Where a step's `measure` is read from Prometheus: its own side, else at the client where
    config.client_side measures it (a latency's twin: the client-side alert and the SLOs read it
    there; the error share: requests and errors, which an availability SLI reads there), else on the
    engines."""
    if measure.side:
        return measure.side
    if measure.metric == ERRORS:
        return "client" if client_errors(client_side) else "instance"
    return "client" if client_read(measure.histogram, client_side) else "instance"


def for_slo(sli, objective: float, client_side) -> Measure | None:
    """The measure an SLO's objective is judged by, on the SLI's side: a latency SLO's percentile,
    an availability SLO's error share; the plain key where that is where a plain target reads it
    too, else a key naming the side (`ttft_p99@instance`, `errors@instance`)."""
    if sli.kind == "availability":
        measure = Measure(ERRORS)
    else:
        measure = for_histogram(sli.histogram, objective)
    if measure is None or side_of(measure, client_side) == sli.side:
        return measure
    return replace(measure, side=sli.side)


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
