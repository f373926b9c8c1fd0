"""Input series that give a signal a chosen value, per signal kind, from the same config and catalog
facts as the rules; and the value each signal then has, computed the way Prometheus 3.5 does. The
generated boundary tests and recording-rule checks (render/rule_tests.py) are built from them.

Every series starts at 0 and keeps its shape for `steps` samples `interval` apart, so a signal has its
value from `onset` on: a gauge at once; a ratio of rates as soon as two samples exist; a plain rate
once its window is full (before that rate() counts from the counter's start at 0 and ramps up).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import scenarios
from ..promql import builders as b

REQUESTS = 100.0  # observations (or events) per sample of the synthetic histograms and ratios


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

    # -- who ------------------------------------------------------------------------------------
    def pinned(self, source: str) -> dict[str, str]:
        """The label values config.selectors requires of a source's series."""
        matchers = b.parse_matchers(self.model.config.selectors.get(source, ""))
        return {label: value for label, op, value in matchers if op == "="}

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

    def key(self, level: str, labels: dict[str, str]) -> dict[str, str]:
        """The labels a result per `level` keeps of a series with `labels`."""
        return {k: labels[k] for k in self.labels.identity(level) if k in labels}

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

    def signal(self, signal, value: float, labels: dict[str, str], min_traffic: float = 0.0) -> Input | None:
        """Series that give `signal` the value `value` for the thing with `labels`; None when the kind
        or the value cannot be made (a quantile past the last finite bucket, a matcher it cannot
        read)."""
        name = self.sb.metric_name
        if signal.kind == "gauge":
            out = [(series_text(name(signal.metric), labels), self.flat(value))]
        elif signal.kind == "matched_ratio":
            total = exact_total(value)
            used = value * total
            out = [
                (series_text(name(signal.numerator), labels), self.flat(used)),
                (series_text(name(signal.partner), labels), self.flat(total - used)),
            ]
        elif signal.kind == "rate":
            out = [(series_text(name(signal.metric), {**labels, **self._by(signal)}), self.counter(value))]
        elif signal.kind == "counter_ratio":
            split = matcher_split(signal.matchers)
            if split is None:
                return None
            part, rest = split
            rate = max(1.0, 100 * min_traffic)  # its rate() ramps up too: past the guard at once
            out = [
                (series_text(name(signal.metric), {**labels, **part}), self.counter(value * rate)),
                (series_text(name(signal.metric), {**labels, **rest}), self.counter((1 - value) * rate)),
            ]
        elif signal.kind == "quantile":
            counts = self.quantile_counts(signal, value)
            if counts is None:
                return None
            out = self.histogram(signal.metric, labels, counts)
        else:
            return None
        return Input(tuple(out), self.onset(signal))

    def _by(self, signal) -> dict[str, str]:
        return {label: f"{label}-a" for label in signal.by}

    # -- histograms -----------------------------------------------------------------------------
    def quantile_counts(self, signal, value: float, q: float | None = None) -> dict[float, float] | None:
        """Observations per sample, per bucket upper bound, that put quantile q (the alert's) at `value`:
        in the bucket holding `value`, a share past its lower bound such that the linear interpolation
        lands on `value`, the rest just below it or above every finite bucket."""
        bounds = self.buckets_of(signal.metric)
        q = q if q is not None else signal.quantiles[0]
        i = next((i for i, bound in enumerate(bounds) if value <= bound), None)
        if i is None:
            return None  # past the last finite bucket
        lo, hi = (bounds[i - 1] if i > 0 else 0.0), bounds[i]
        f = (value - lo) / (hi - lo)
        n = REQUESTS
        if f >= q:
            inside = q * n / f
            return {hi: inside, float("inf"): n - inside}
        if i == 0:
            return None  # the rest would have to lie below 0
        below = n * (q - f) / (1 - f)
        return {lo: below, hi: n - below}

    def histogram(
        self,
        metric: str,
        labels: dict[str, str],
        counts: dict[float, float],
        bounds: tuple[float, ...] | None = None,
    ) -> list[tuple[str, str]]:
        """Cumulative _bucket counters for every bound (the catalog's unless given) and +Inf, and
        _count, from observations per sample in the buckets that end at the keys of `counts`."""
        bounds = [*(self.buckets_of(metric) if bounds is None else bounds), float("inf")]
        out = []
        for bound in bounds:
            cumulative = sum(c for upper, c in counts.items() if upper <= bound)
            le = "+Inf" if bound == float("inf") else scenarios.number(bound)
            out.append(
                (series_text(f"{metric}_bucket", {**labels, "le": le}), self.counter_per_sample(cumulative))
            )
        out.append((series_text(f"{metric}_count", labels), self.counter_per_sample(sum(counts.values()))))
        return out

    def buckets_of(self, metric: str) -> tuple[float, ...]:
        entry = self.sb.catalog.lookup(self.sb.metric_name(metric))
        return tuple(entry.buckets or ()) if entry else ()

    def counter_per_sample(self, per_sample: float) -> str:
        return f"0+{scenarios.number(per_sample)}x{self.steps}"


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


def matcher_split(matchers: str) -> tuple[dict[str, str], dict[str, str]] | None:
    """Label values a counter_ratio's numerator selects, and values only its denominator sees; None
    for matchers other than `=` or a `=~` list of plain alternatives."""
    part, rest = {}, {}
    for label, op, value in b.parse_matchers(matchers):
        if op == "=" or (op == "=~" and MATCHER_VALUE_RE.match(value)):
            part[label] = value.split("|")[0]
            rest[label] = "boundary_other"
        else:
            return None
    return part, rest


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile over (upper bound, cumulative count) pairs sorted by bound, +Inf last, as
    Prometheus interpolates inside the bucket that holds the rank."""
    total = buckets[-1][1]
    rank = q * total
    for i, (upper, count) in enumerate(buckets):
        if count >= rank:
            if upper == float("inf"):
                return buckets[-2][0]
            lower, below = (buckets[i - 1][0], buckets[i - 1][1]) if i > 0 else (0.0, 0.0)
            return lower + (upper - lower) * (rank - below) / (count - below)
    return buckets[-2][0]
