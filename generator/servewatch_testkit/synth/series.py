"""One synthetic time series on a shared step grid, and small helpers to shape its values.

A Series knows nothing about wall-clock time: sample ``i`` sits at ``start + i * step``, and
``start``/``step`` are chosen only when the series are written (``to_openmetrics``). ``None``
means "no sample at this step" (the series is absent there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence, Union

Value = Union[float, None]
# A per-step value spec: a constant, one value per step, or a function of the step index.
Values = Union[float, int, None, Sequence[Value], Callable[[int], Value]]

KINDS = ("gauge", "counter", "histogram", "unknown")
_HIST_SUFFIXES = ("_bucket", "_count", "_sum")
_METRIC_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _family_of(name: str, kind: str) -> str:
    if kind == "counter" and name.endswith("_total"):
        return name[: -len("_total")]
    if kind == "histogram":
        for suffix in _HIST_SUFFIXES:
            if name.endswith(suffix):
                return name[: -len(suffix)]
        raise ValueError(f"histogram sample {name!r} must end in one of {_HIST_SUFFIXES}")
    return name


@dataclass(frozen=True)
class Series:
    """A named, labelled series with one value (or None) per step.

    ``name`` is the sample name as stored in the TSDB (``vllm:prompt_tokens_total``,
    ``vllm:e2e_request_latency_seconds_bucket``); ``kind`` is the metric type; ``family`` is the
    OpenMetrics family name and defaults from ``name`` and ``kind`` (counters drop ``_total``,
    histogram parts drop ``_bucket``/``_sum``/``_count``).
    """

    name: str
    labels: tuple[tuple[str, str], ...]
    values: tuple[Value, ...]
    kind: str = "gauge"
    family: str = field(default="")

    def __init__(
        self,
        name: str,
        labels: Mapping[str, str] | Iterable[tuple[str, str]],
        values: Iterable[Value],
        kind: str = "gauge",
        family: str = "",
    ):
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
        if not _METRIC_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        items = dict(labels.items() if isinstance(labels, Mapping) else labels)
        for k, v in items.items():
            if not _LABEL_RE.match(k) or k.startswith("__"):
                raise ValueError(f"invalid label name {k!r} on {name}")
            if not isinstance(v, str):
                raise TypeError(f"label {k}={v!r} on {name} must be a string")
        vals = tuple(None if v is None else float(v) for v in values)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "labels", tuple(sorted(items.items())))
        object.__setattr__(self, "values", vals)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "family", family or _family_of(name, kind))

    @property
    def labelmap(self) -> dict[str, str]:
        return dict(self.labels)

    def label(self, key: str, default: str | None = None) -> str | None:
        return self.labelmap.get(key, default)

    def matches(self, name: str | None = None, **labels: str | None) -> bool:
        """True if the name (when given) and every given label agree; a None label value means "absent"."""
        if name is not None and self.name != name:
            return False
        lm = self.labelmap
        return all(lm.get(k) == v for k, v in labels.items())

    def __repr__(self) -> str:  # the default repr would print every value
        present = sum(v is not None for v in self.values)
        return f"Series({self.name}{dict(self.labels)}, {present}/{len(self.values)} samples, {self.kind})"


def resolve(spec: Values, steps: int) -> tuple[Value, ...]:
    """Expand a per-step value spec to exactly ``steps`` values."""
    if spec is None or isinstance(spec, (int, float)):
        return (None if spec is None else float(spec),) * steps
    if callable(spec):
        out = tuple(spec(i) for i in range(steps))
    else:
        out = tuple(spec)
        if len(out) != steps:
            raise ValueError(f"expected {steps} per-step values, got {len(out)}")
    return tuple(None if v is None else float(v) for v in out)


def in_active(i: int, active: tuple[int, int] | None) -> bool:
    """Whether step ``i`` lies in the half-open ``active`` range (None = always)."""
    return active is None or active[0] <= i < active[1]


def step_fn(default: float, changes: Mapping[int, float]) -> Callable[[int], float]:
    """A piecewise-constant value: ``default`` until the first key, then the value of the last key <= i."""
    points = sorted(changes.items())

    def at(i: int) -> float:
        v = default
        for k, x in points:
            if i >= k:
                v = x
        return v

    return at


def ramp(a: float, b: float, start: int, end: int) -> Callable[[int], float]:
    """``a`` before ``start``, ``b`` from ``end`` on, linear in between (rounded to 6 decimals)."""

    def at(i: int) -> float:
        if i <= start:
            return a
        if i >= end:
            return b
        return round(a + (b - a) * (i - start) / (end - start), 6)

    return at


def drop_metrics(series: Iterable[Series], names: Iterable[str] | Callable[[str], bool]) -> list[Series]:
    """Remove whole metrics by sample name (or family name), or by a predicate on the sample name."""
    if callable(names):
        return [s for s in series if not names(s.name)]
    gone = set(names)
    return [s for s in series if s.name not in gone and s.family not in gone]


def rename_metric(series: Iterable[Series], old: str, new: str, scale: float = 1.0) -> list[Series]:
    """Rename one sample name (e.g. an exporter upgrade), multiplying values by ``scale``."""
    out = []
    for s in series:
        if s.name == old:
            vals = [None if v is None else v * scale for v in s.values]
            s = Series(new, s.labels, vals, s.kind)
        out.append(s)
    return out


def with_labels(series: Iterable[Series], **labels: str) -> list[Series]:
    """Add (or overwrite) labels on every series, e.g. ``cluster="prod-eu1"``."""
    return [Series(s.name, {**s.labelmap, **labels}, s.values, s.kind, s.family) for s in series]


__all__ = [
    "Series",
    "Value",
    "Values",
    "KINDS",
    "resolve",
    "in_active",
    "step_fn",
    "ramp",
    "drop_metrics",
    "rename_metric",
    "with_labels",
]
