"""promtool input series in the form the rules read (config.histograms).

Scenarios and the synthetic inputs are written the way vLLM exposes a histogram: `x_bucket` per
`le`, `x_count`, `x_sum`. A Prometheus with `convert_classic_histograms_to_nhcb` stores the same
exposition as one native histogram with custom buckets per label set (schema -53). `native_inputs`
does that conversion for a test's input series, sample by sample, so every scenario, boundary and
record test runs unchanged against the native rules. In `both` form the classic series are kept
and the native ones added: a Prometheus that stores both (`always_scrape_classic_histograms`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import templates
from ..promql import builders as b
from ..promql.histograms import LE, Histograms

STALE = "stale"
NOISE = 1e-9  # relative: what a bucket may fall by from float rounding alone
_NUMBER = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Inf|NaN)"
_TOKEN_RE = re.compile(rf"^(?P<a>{_NUMBER})(?:(?P<op>[+-])(?P<b>{_NUMBER}))?(?:x(?P<n>\d+))?$")
_SERIES_RE = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$", re.S)


class NotAHistogram(ValueError):
    """Classic bucket counts that no native histogram can hold (a bucket below the one before it)."""


def expand(values: str) -> list[float | str | None]:
    """promtool's expanding notation, one entry per sample: a float, None (`_`) or "stale"."""
    out: list[float | str | None] = []
    for token in values.split():
        if token == STALE:
            out.append(STALE)
        elif token.startswith("_"):
            out += [None] * (int(token[2:]) if token.startswith("_x") else 1)
        else:
            m = _TOKEN_RE.match(token)
            if not m:
                raise ValueError(f"cannot read series value {token!r}")
            current, step = float(m.group("a")), float(m.group("b") or 0)
            step = -step if m.group("op") == "-" else step
            out.append(current)
            for _ in range(int(m.group("n") or 0)):
                current += step  # promtool adds the step, it does not multiply
                out.append(current)
    return out


@dataclass
class _Group:
    """The classic series of one histogram label set, as they arrive."""

    base: str
    labels: str
    buckets: dict[float, list]
    count: list | None = None
    total: list | None = None


def native_tests(tests: list[dict], histograms: Histograms) -> list[dict]:
    """promtool tests with their input series in the configured histogram form."""
    if not histograms.native:
        return tests
    return [{**t, "input_series": native_inputs(t["input_series"], histograms)} for t in tests]


def native_inputs(input_series: list[dict], histograms: Histograms) -> list[dict]:
    """`input_series` ({series, values} each) with every histogram's classic series folded into one
    native histogram series; unchanged in classic form."""
    if not histograms.native:
        return input_series
    out: list = []
    groups: dict[tuple[str, str], _Group] = {}
    for item in input_series:
        comp = histograms.component(item["series"])
        if comp is None:
            out.append(item)
            continue
        le, labels = _split_le(comp.matchers)
        key = (comp.base, labels)
        if key not in groups:
            groups[key] = _Group(comp.base, labels, {})
            out.append(key)
        group, values = groups[key], expand(item["values"])
        if comp.suffix == "_bucket":
            group.buckets[float("inf") if le == "+Inf" else float(le)] = values
        elif comp.suffix == "_count":
            group.count = values
        else:
            group.total = values
        if histograms.form == "both":
            out.append(item)
    return [_native(groups[x]) if isinstance(x, tuple) else x for x in out]


def _split_le(matchers: str) -> tuple[str | None, str]:
    parts = b.parse_matchers(matchers) if matchers.strip() else []
    le = next((value for label, _, value in parts if label == LE), None)
    return le, ", ".join(f'{label}{op}"{value}"' for label, op, value in parts if label != LE)


def _native(group: _Group) -> dict:
    bounds = sorted(x for x in group.buckets if x != float("inf"))
    every = group.buckets.get(float("inf"), group.count)
    steps = max(len(v) for v in [*group.buckets.values(), group.count or [], group.total or []])
    samples, before = [], None
    for i in range(steps):
        total = _at(every, i)
        if total is None or total == STALE:
            samples.append(total)
            continue
        cumulative, below = [], 0.0
        for bound in bounds:
            value = _at(group.buckets[bound], i)
            below = below if value is None or value == STALE else value
            cumulative.append(below)
        counts = [c - p for c, p in zip([*cumulative, total], [0.0, *cumulative], strict=True)]
        if any(c < -NOISE * total for c in counts):
            raise NotAHistogram(f"{group.base}{{{group.labels}}}: buckets fall with le at sample {i}")
        counts = [max(c, 0.0) for c in counts]
        if before is not None and total >= before[0]:
            counts = _steady(counts, before[2])
        observed = _at(group.total, i)
        before = (total, observed if isinstance(observed, float) else 0.0, tuple(counts))
        samples.append(before)
    name = f"{group.base}{{{group.labels}}}" if group.labels else group.base
    return {"series": name, "values": _notation(samples, bounds)}


def _steady(counts: list[float], previous: tuple[float, ...]) -> list[float]:
    """Bucket counts that fell by float noise only (a difference of two cumulative floats) kept at
    their previous value: Prometheus takes any bucket that falls for a counter reset of the whole
    histogram, which the classic series never had."""
    return [p if p - NOISE * max(abs(p), 1.0) <= c < p else c for c, p in zip(counts, previous, strict=True)]


def _at(values: list | None, i: int):
    return values[i] if values is not None and i < len(values) else None


def _notation(samples: list, bounds: list[float]) -> str:
    """The samples in promtool's notation: `{{h}}+{{d}}xn` where adding d n times to h gives the
    very samples (as promtool adds them), each histogram on its own elsewhere."""
    parts, i = [], 0
    while i < len(samples):
        start = samples[i]
        if not isinstance(start, tuple):
            parts.append("_" if start is None else STALE)
            i += 1
            continue
        j, current, step = i + 1, start, None
        if j < len(samples) and isinstance(samples[j], tuple):
            step = _minus(samples[j], start)
        while step is not None and j < len(samples) and isinstance(samples[j], tuple):
            following = _plus(current, step)
            if following != samples[j]:
                break
            current, j = following, j + 1
        if j - i > 1 and min(step[0], step[1], *step[2]) >= 0:
            parts.append(f"{_histogram(start, bounds)}+{_histogram(step, bounds)}x{j - i - 1}")
        else:
            parts.append(_histogram(start, bounds))
            j = i + 1
        i = j
    return " ".join(parts)


def _plus(h, d):
    return (h[0] + d[0], h[1] + d[1], tuple(x + y for x, y in zip(h[2], d[2], strict=True)))


def _minus(h, d):
    return (h[0] - d[0], h[1] - d[1], tuple(x - y for x, y in zip(h[2], d[2], strict=True)))


def _histogram(h, bounds: list[float]) -> str:
    count, total, counts = h
    f = templates.go_float
    # promtool reads no empty list: a histogram with only the +Inf bucket names no custom values
    custom = f"custom_values:[{' '.join(f(x) for x in bounds)}] " if bounds else ""
    buckets = " ".join(f(x) for x in counts)
    return f"{{{{schema:-53 sum:{f(total)} count:{f(count)} {custom}buckets:[{buckets}]}}}}"
