"""Input series that give a signal a chosen value, per signal kind, from the same config and catalog
facts as the rules; and the value each signal then has, computed the way Prometheus 3.5 does. The
generated boundary tests and recording-rule checks (plan/rule_tests.py) are built from them.

Every series starts at 0 and keeps its shape for `steps` samples `interval` apart, so a signal has its
value from `onset` on: a gauge at once; a ratio of rates as soon as two samples exist; a plain rate
once its window is full (before that rate() counts from the counter's start at 0 and ramps up).
"""

from __future__ import annotations

import re
import sys
from itertools import pairwise
from fractions import Fraction
from dataclasses import dataclass

from .. import scenarios
from ..alert_context import PART_FIELD
from ..promql import builders as b
from ..spec.deployment import ROLES
from .conform import Conform

REQUESTS = 100.0  # observations (or events) per sample of the synthetic histograms and ratios


def canary(track) -> str:
    """A track value other than config.track's stable one."""
    return "canary" if track.stable != "canary" else "next"


def deployment_apart(model, signal) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Where config.role or config.track is set, (label, value) pairs other than the aggregated
    stable engine's that synthetic series carry: (the ones `signal` reads: each other role it reads,
    a canary track; the ones it does not: each role it leaves out). A label config.selectors pins is
    left alone, and a track_ratio's tracks are its own business."""
    role, track = model.config.role, model.config.track
    read, unread = [], []
    if role is not None:
        wanted = signal.roles or ROLES
        read += [(role.label, role.values[r][0]) for r in ROLES if r in wanted and r != "both"]
        unread += [(role.label, role.values[r][0]) for r in ROLES if r not in wanted]
    if track is not None and signal.kind != "track_ratio":
        read.append((track.label, canary(track)))
    selected = {label for label, _, _ in Conform(model).matchers("vllm")}
    return [p for p in read if p[0] not in selected], [p for p in unread if p[0] not in selected]


@dataclass(frozen=True)
class Input:
    series: tuple[tuple[str, str], ...]  # (series, values) in promtool's notation
    onset_s: float  # from when the signal has its value


def series_text(name: str, labels: dict[str, str]) -> str:
    body = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{body}}}"


class Synth:
    """Builds the inputs of one model's signals; `interval` is the sample interval in seconds."""

    def __init__(self, model, interval_s: float, steps: int):
        self.model, self.sb, self.labels = model, model.builder, model.builder.labels
        self.interval, self.steps = interval_s, steps
        self._sums: dict[float, list[float]] = {}  # increment -> counter value at each sample

    # -- who ------------------------------------------------------------------------------------
    def pinned(self, source: str) -> dict[str, str]:
        """The label values config.selectors requires of a source's series (one value per label,
        plan/conform.py: a regex gives the first string it matches); a vLLM series also carries the
        role and track of an aggregated stable engine (config.role, config.track), which every
        signal reads."""
        conform = Conform(self.model)
        labels = {label for label, _, _ in conform.matchers(source)}
        chosen = conform.labels(source, {label: f"{label.lower()}-a" for label in labels})
        selected = {label: value for label, value in chosen.items() if value != f"{label.lower()}-a"}
        return {**self.labels.deployment_defaults(), **selected} if source == "vllm" else selected

    def identity(self, level: str, variant: str = "a", change: str | None = None) -> dict[str, str]:
        """Label values of one GPU, engine or model (what config.selectors pins, as pinned); `change`
        gives that one label another value."""
        level = "engine" if level == "model" else level  # a model's series come from its engines
        out = {label: f"{label.lower()}-{variant}" for label in self.labels.identity(level)}
        if change is not None:
            out[change] = f"{change.lower()}-other"
        if level == "gpu":
            out.update({self.labels.host: "node-" + variant, self.labels.dcgm.labels.gpu: "0"})
        return {**out, **self.pinned("dcgm" if level == "gpu" else "vllm")}

    def key(self, level: str, labels: dict[str, str], metric: str | None = None) -> dict[str, str]:
        """The labels a result per `level` (of histogram `metric`: a client source's keeps the client
        identity) keeps of a series with `labels`."""
        ident = self.sb.level_identity(metric, level) if metric else self.labels.identity(level)
        return {k: labels[k] for k in ident if k in labels}

    def onset(self, signal) -> float:
        if signal.kind in ("gauge", "matched_ratio"):
            return 0.0
        if signal.kind == "rate":
            return float(scenarios.seconds(self.model.config.rate_window))
        return self.interval

    # -- how ------------------------------------------------------------------------------------
    def counter(self, per_second: float) -> str:
        return self.counter_per_sample(per_second * self.interval)

    def flat(self, value: float) -> str:
        return f"{scenarios.number(value)}x{self.steps}"

    def signal(
        self, signal, value: float, labels: dict[str, str], min_traffic: float = 0.0, alternative: int = 0
    ) -> Input | None:
        """Series that give `signal` the value `value` for the thing with `labels`; None when the kind
        or the value cannot be made (a quantile past the last finite bucket, a matcher it cannot
        read). A counter ratio's numerator sits on its matchers' `alternative` (matcher_split)."""
        name = self.sb.metric_name
        if signal.kind == "gauge":
            split = matcher_split(signal.matchers)
            if split is None:
                return None
            out = [
                (
                    series_text(name(signal.metric), {**labels, **split[0], **self.by(signal)}),
                    self.flat(value),
                )
            ]
            if signal.level == "gpu":  # a GPU alert names the GPUs that export a presence field
                out.append((series_text(name(PART_FIELD), labels), self.flat(50)))
        elif signal.kind == "matched_ratio":
            total = exact_total(value)
            used = value * total
            out = [
                (series_text(name(signal.numerator), labels), self.flat(used)),
                (series_text(name(signal.partner), labels), self.flat(total - used)),
            ]
        elif signal.kind == "rate":
            if value < 0:  # a counter only grows
                return None
            counted = {**self.counted(signal.metric, labels), **self.by(signal)}
            out = [(series_text(name(signal.metric), counted), self.counter(value))]
            if signal.level == "gpu":  # a GPU alert names the GPUs that export a presence field
                out.append((series_text(name(PART_FIELD), labels), self.flat(50)))
        elif signal.kind == "counter_ratio":
            out = self.counter_ratio(signal, value, labels, ratio_traffic(min_traffic), alternative)
            if out is None:
                return None
        elif signal.kind == "quantile":
            counts = self.quantile_counts(signal, value)
            if counts is None:
                return None
            out = self.histogram(signal.metric, labels, counts)
        elif signal.kind == "track_ratio":
            window = float(scenarios.seconds(self.model.config.rate_window))
            out = self.track_ratio(signal, value, labels, max(REQUESTS, 2 * min_traffic * window))
            if out is None:
                return None
        else:
            return None
        return Input(tuple(out), self.onset(signal))

    def counter_ratio(
        self, signal, value: float, labels: dict[str, str], per_second: float, alternative: int = 0
    ) -> list | None:
        """Counters of `per_second` events, `value` of them matching the ratio's numerator (on its
        matchers' `alternative`); None for matchers servewatch cannot split."""
        split = matcher_split(signal.matchers, alternative)
        if split is None:
            return None
        part, rest = split
        name = self.sb.metric_name(signal.metric)
        return [
            (series_text(name, {**labels, **part}), self.counter(value * per_second)),
            (series_text(name, {**labels, **rest}), self.counter((1 - value) * per_second)),
        ]

    def counter_ratio_rates(
        self, value: float, per_second: float, at_s: float, window_s: float
    ) -> tuple[float, float] | None:
        """The rates of the two counters `counter_ratio` writes, at `at_s`, as Prometheus computes them."""
        part = self.rate_at(value * per_second * self.interval, at_s, window_s)
        rest = self.rate_at((1 - value) * per_second * self.interval, at_s, window_s)
        return None if part is None or rest is None else (part, rest)

    def counter_ratio_at(self, value: float, per_second: float, at_s: float, window_s: float) -> float | None:
        """The ratio of the counters `counter_ratio` writes at `at_s`, as Prometheus divides the rates."""
        rates = self.counter_ratio_rates(value, per_second, at_s, window_s)
        if rates is None or sum(rates) == 0:
            return None
        return rates[0] / (rates[0] + rates[1])

    def other_track(self, labels: dict[str, str]) -> dict[str, str]:
        """`labels` moved to a track other than the stable one (config.track): a canary."""
        track = self.model.config.track
        return {**labels, track.label: canary(track)}

    def track_ratio(self, signal, value: float, labels: dict[str, str], per_sample: float) -> list | None:
        """Histograms of the compared quantile on `labels` (a track other than the stable one, with
        `per_sample` observations a sample) and on its stable twin whose quantiles' ratio is `value`
        (the first of track_ratio_layouts).
        `signal` gives the other track twice min_traffic a second (at least REQUESTS a sample) from its
        first rate on, while the rate window still fills. None for a compared signal other than a
        quantile or values past the catalog's buckets."""
        layouts = self.track_ratio_layouts(signal, value, per_sample)
        if not layouts or layouts[0] is None:
            return None
        return self.track_ratio_series(signal, labels, layouts[0])

    def track_ratio_layouts(self, signal, value: float, per_sample: float) -> list[tuple[dict, dict] | None]:
        """(stable, other) observations per sample per bucket (quantile_counts) whose quantiles' ratio is
        `value`, one per bucket of the compared histogram: the stable's quantile in the middle of the
        bucket, the other's `value` times it, each well inside its bucket (float noise at a bound would
        move the quantile to the next bucket); None where quantile_counts cannot place one. [] for a
        compared signal other than a quantile."""
        of = self.model.signal(signal.of)
        if of.kind != "quantile" or value <= 0:
            return []
        q = signal.quantiles[0]
        bounds = self.buckets_of(of.metric)
        out = []
        for base in ((lo + hi) / 2 for lo, hi in pairwise(bounds)):
            if not _well_inside(bounds, value * base):
                continue
            stable = self.quantile_counts(of, base, q)
            other = self.quantile_counts(of, value * base, q, per_sample)
            out.append(None if stable is None or other is None else (stable, other))
        return out

    def track_ratio_series(self, signal, labels: dict[str, str], layout: tuple[dict, dict]) -> list:
        """The histograms of one of track_ratio_layouts: the other track's on `labels`, the stable's
        on its twin."""
        of, (stable, other) = self.model.signal(signal.of), layout
        twin = {**labels, self.model.config.track.label: self.model.config.track.stable}
        return [*self.histogram(of.metric, twin, stable), *self.histogram(of.metric, labels, other)]

    def track_ratio_at(self, signal, layout: tuple[dict, dict], at_s: float, window_s: float) -> float | None:
        """The track_ratio of one of track_ratio_layouts at `at_s`, as Prometheus divides the two
        quantiles; None where either has no value or the stable's is not above 0."""
        of, q = self.model.signal(signal.of), signal.quantiles[0]
        stable, other = (self.quantile_at(of, counts, q, at_s, window_s) for counts in layout)
        if stable is None or other is None or not stable > 0:
            return None
        return other / stable

    def counted(self, metric: str, labels: dict[str, str]) -> dict[str, str]:
        """The labels of a series a rate counts: a client source's counter carries the model name in
        its own label and the values its outcome's `=` matchers ask (Dynamo's status="error")."""
        if not self.labels.client_metric(metric):
            return labels
        asked = {
            k: v for k, op, v in b.parse_matchers(", ".join(self.labels.client_matchers(metric))) if op == "="
        }
        return {(self.labels.client_model if k == "model_name" else k): v for k, v in labels.items()} | asked

    def by(self, signal) -> dict[str, str]:
        """The values a signal's `by` labels take in the series made for it."""
        return {label: f"{label}-a" for label in signal.by}

    # -- histograms -----------------------------------------------------------------------------
    def quantile_counts(
        self, signal, value: float, q: float | None = None, requests: float = REQUESTS
    ) -> dict[float, float] | None:
        """Observations per sample, per bucket upper bound, that put quantile q (the alert's) at `value`:
        in the bucket holding `value`, a share past its lower bound such that the linear interpolation
        lands on `value`, the rest just below it or above every finite bucket; `requests` of them.
        Worked out on the numbers as written (decimal, exactly), so round inputs give whole counts."""
        bounds = self.buckets_of(signal.metric)
        q = q if q is not None else signal.quantiles[0]
        i = next((i for i, bound in enumerate(bounds) if value <= bound), None)
        if i is None:
            return None  # past the last finite bucket
        lo, hi = (bounds[i - 1] if i > 0 else 0.0), bounds[i]
        f = (_decimal(value) - _decimal(lo)) / (_decimal(hi) - _decimal(lo))
        n, q_ = _decimal(requests), _decimal(q)
        if f >= q_:
            inside = q_ * n / f
            return {hi: float(inside), float("inf"): float(n - inside)}
        if i == 0:
            return None  # the rest would have to lie below 0
        below = n * (q_ - f) / (1 - f)
        return {lo: float(below), hi: float(n - below)}

    def histogram(
        self,
        metric: str,
        labels: dict[str, str],
        counts: dict[float, float],
        bounds: tuple[float, ...] | None = None,
        per_sample: bool = True,
    ) -> list[tuple[str, str]]:
        """Cumulative _bucket counters for every bound (the catalog's unless given) and +Inf, and
        _count, from observations per sample in the buckets that end at the keys of `counts`; with
        `per_sample` off, every series flat at 7 (an idle histogram). A client source's histogram
        carries the model name in its own label (config.client_side)."""
        bounds = [*(self.buckets_of(metric) if bounds is None else bounds), float("inf")]
        name = self.sb.metric_name(metric)
        if self.sb.source(name) == "gateway":
            labels = {
                (self.labels.client_model if k == "model_name" else k): v
                for k, v in labels.items()
                if k not in self.labels.vllm_only()
            }
            labels.update(self.pinned("gateway"))
            measuring = self.labels.client.measuring(name)  # the series that measure it, unless told
            labels.update({k: v for k, v in measuring.items() if k not in labels})
        value = self.counter_per_sample if per_sample else (lambda _: f"7x{self.steps}")
        out = []
        for bound in bounds:
            le = "+Inf" if bound == float("inf") else scenarios.number(bound)
            out.append(
                (series_text(f"{name}_bucket", {**labels, "le": le}), value(cumulative(counts, bound)))
            )
        out.append((series_text(f"{name}_count", labels), value(sum(counts.values()))))
        return out

    def buckets_of(self, metric: str) -> tuple[float, ...]:
        return self.sb.catalog.test_buckets(self.sb.metric_name(metric))

    def counter_per_sample(self, per_sample: float) -> str:
        return f"0+{scenarios.number(per_sample)}x{self.steps}"

    # -- what Prometheus computes from them, to the last bit -----------------------------------------
    def _counter_values(self, increment: float, upto: int) -> list[float]:
        """The counter's value at samples 0..upto, by repeated addition as promtool expands `0+ixN`."""
        values = self._sums.setdefault(increment, [0.0])
        while len(values) <= upto:
            values.append(values[-1] + increment)
        return values

    def rate_at(self, per_sample: float, at_s: float, window_s: float) -> float | None:
        """rate(x[window]) at `at_s` of the counter `counter_per_sample(per_sample)` writes, operation by
        operation as Prometheus 3.5's rate() computes it: the samples
        promtool expands by repeated addition, a left-open window, extrapolation to the window's edges
        or to the counter's zero point. None with fewer than two samples in the window."""
        increment = float(scenarios.number(per_sample))
        step_ms, end_ms = round(self.interval * 1000), round(at_s * 1000)
        start_ms = end_ms - round(window_s * 1000)
        first_i = max(start_ms // step_ms + 1, 0)  # the samples in the left-open window
        last_i = min(end_ms // step_ms, self.steps)
        if last_i - first_i < 1:
            return None
        values = self._counter_values(increment, last_i)
        first_t, first, last_t, last = first_i * step_ms, values[first_i], last_i * step_ms, values[last_i]
        result = last - first  # a steady increment never resets
        to_start, to_end = (first_t - start_ms) / 1000, (end_ms - last_t) / 1000
        sampled = (last_t - first_t) / 1000
        average = sampled / (last_i - first_i)
        if to_start >= average * 1.1:
            to_start = average / 2
        if result > 0 and first >= 0:
            to_start = min(to_start, sampled * (first / result))
        if to_end >= average * 1.1:
            to_end = average / 2
        factor = (sampled + to_start + to_end) / sampled
        factor /= window_s
        return result * factor

    def quantile_at(
        self, signal, counts: dict[float, float], q: float, at_s: float, window_s: float
    ) -> float | None:
        """histogram_quantile(q, rate(bucket[window])) at `at_s` of the histogram `histogram` writes from
        `counts`, as Prometheus 3.5 computes it (one engine: its max and sum change nothing)."""
        buckets = []
        for bound in [*self.buckets_of(signal.metric), float("inf")]:
            rate = self.rate_at(cumulative(counts, bound), at_s, window_s)
            if rate is None:
                return None
            buckets.append((bound if bound == float("inf") else float(scenarios.number(bound)), rate))
        return bucket_quantile(q, buckets)


def _well_inside(bounds: tuple[float, ...], x: float) -> bool:
    """Whether x lies inside a finite bucket, a tenth of its width or more from either bound."""
    return any(lo + (hi - lo) / 10 <= x <= hi - (hi - lo) / 10 for lo, hi in pairwise(bounds))


def ratio_traffic(min_traffic: float) -> float:
    """Events per second of a synthetic counter ratio: its rate() ramps up too, so past any
    `min_traffic` guard at once."""
    return max(1.0, 100 * min_traffic)


MARGIN_S = 300  # samples past the last evaluation, so every lookback still sees data


def exact_total(ratio: float) -> float:
    """A total whose part `ratio * total` and rest give back exactly `ratio` as part / (part + rest),
    in the floating point Prometheus uses; a power of two does for most ratios."""
    for k in range(0, 40):
        total = float(2**k) * 1000
        part = ratio * total
        if part / (part + (total - part)) == ratio:
            return total
    return 80000.0


MATCHER_VALUE_RE = re.compile(r"^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*$")


def matcher_split(matchers: str, alternative: int = 0) -> tuple[dict[str, str], dict[str, str]] | None:
    """Label values a counter_ratio's numerator selects (each `=~` list's `alternative`-th, its first
    where it has fewer), and values only its denominator sees; None for matchers other than `=` or a
    `=~` list of plain alternatives."""
    part, rest = {}, {}
    for label, op, value in b.parse_matchers(matchers):
        if op == "=" or (op == "=~" and MATCHER_VALUE_RE.match(value)):
            options = value.split("|")
            part[label] = options[alternative] if alternative < len(options) else options[0]
            rest[label] = "boundary_other"
        else:
            return None
    return part, rest


def numerator_alternatives(matchers: str) -> int:
    """How many alternatives the longest `=~` list of `matchers` names (1: none)."""
    lists = [value.split("|") for _, op, value in b.parse_matchers(matchers or "") if op == "=~"]
    return max((len(options) for options in lists), default=1)


def _decimal(x: float) -> Fraction:
    return Fraction(scenarios.number(x))


def cumulative(counts: dict[float, float], bound: float) -> float:
    """Observations per sample at or below `bound`: what its `le` bucket counts."""
    return sum(c for upper, c in counts.items() if upper <= bound)


SMALL_DELTA = 1e-12  # relative: Prometheus reads bucket counts this close as equal


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile over (upper bound, cumulative count) pairs sorted by bound, +Inf last,
    operation by operation as Prometheus 3.5's histogram_quantile() computes it: counts
    made monotonic, then a linear interpolation inside the bucket that holds the rank."""
    counts = [count for _, count in buckets]
    previous = counts[0]
    for i in range(1, len(counts)):
        current = counts[i]
        if current == previous:
            continue
        if _almost_equal(previous, current) or current < previous:
            counts[i] = previous
            continue
        previous = current
    rank = q * counts[-1]
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, end, count = 0.0, buckets[b][0], counts[b]
    if b > 0:
        start = buckets[b - 1][0]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def _almost_equal(a: float, b: float) -> bool:
    if a == b:
        return True
    if a == 0 or b == 0:
        return abs(a - b) < SMALL_DELTA * sys.float_info.min
    return abs(a - b) / (abs(a) + abs(b)) < SMALL_DELTA
