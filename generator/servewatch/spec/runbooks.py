"""What a `runbooks:` section may say: prose per alert and investigation steps, each naming a
query kind that servewatch builds from the same builders and signals as the alert.

Pydantic models; the loader validates the section with the rest of the spec.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from .fields import Matchers, Number, duration, regex
from .schema import Strict

STEP_ID_RE = re.compile(r"[a-z][a-z0-9-]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*|\[\[[a-z_]+\]\]")  # a label name or a [[token]]

Level = Literal["gpu", "engine", "model"]
Verdict = Literal["healthy", "suspicious", "unhealthy", "no-data", "info"]
Unit = Literal[
    "ratio", "seconds", "tokens", "requests", "per_second", "mib", "bytes", "count", "factor", "up"
]
Agg = Literal["max", "min", "avg", "sum"]


def _labels(values):
    for v in values:
        if not LABEL_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a label name or a [[token]]")
    return values


def _window(v):
    return v if v is None else duration(v, positive=True)


# -- query kinds: each becomes PromQL in servewatch.runbooks.queries ----------------------------


class Changeable(Strict):
    @field_validator("change", check_fields=False)
    @classmethod
    def _change(cls, v):
        return _window(v)


class SignalQuery(Changeable):
    """A spec signal, exactly as the alert computes it (optionally rolled up `by` labels)."""

    kind: Literal["signal"]
    change: str | None = None  # compare with this long ago: now / then (a factor)
    signal: str
    quantile: Number | None = None
    agg: Agg | None = None
    by: tuple[str, ...] = ()

    _by = field_validator("by")(classmethod(lambda cls, v: _labels(v)))

    @model_validator(mode="after")
    def _roll(self):
        if self.by and not self.agg:
            raise ValueError("`by` needs `agg` (max, min, avg or sum) to roll the signal up")
        return self


class QuantileQuery(Changeable):
    """histogram_quantile of any catalog histogram per level (queue time, prefill time, ...)."""

    kind: Literal["quantile"]
    change: str | None = None  # compare with this long ago: now / then (a factor)
    metric: str
    quantile: Number
    level: Level = "model"
    by: tuple[str, ...] = ()

    @field_validator("quantile")
    @classmethod
    def _q(cls, v):
        if not 0 < v < 1:
            raise ValueError(f"quantile {v} must be between 0 and 1")
        return v


class MeanQuery(Changeable):
    """Average observation of a histogram per level: rate(_sum) / rate(_count), guarded."""

    kind: Literal["mean"]
    change: str | None = None  # compare with this long ago: now / then (a factor)
    metric: str
    level: Level = "model"


class RateQuery(Changeable):
    """Per-second rate of a counter (or a histogram's _count) per level."""

    kind: Literal["rate"]
    change: str | None = None  # compare with this long ago: now / then (a factor)
    metric: str
    matchers: Matchers = ""
    level: Level = "engine"
    by: tuple[str, ...] = ()

    _by = field_validator("by")(classmethod(lambda cls, v: _labels(v)))


class RatioQuery(Strict):
    """rate(numerator) / rate(denominator) per level, matched on the level's identity and guarded."""

    kind: Literal["ratio"]
    numerator: str
    denominator: str
    numerator_matchers: Matchers = ""
    denominator_matchers: Matchers = ""
    level: Level = "engine"


class GaugeQuery(Strict):
    """A gauge per identity (deduplicated), rolled up to the level with `agg`."""

    kind: Literal["gauge"]
    metric: str
    matchers: Matchers = ""
    level: Level = "engine"
    by: tuple[str, ...] = ()
    agg: Agg = "max"

    _by = field_validator("by")(classmethod(lambda cls, v: _labels(v)))


class TrendQuery(Strict):
    """deriv() of a gauge per identity: is it growing (per second) over the window?"""

    kind: Literal["trend"]
    metric: str
    level: Level = "engine"
    window: str = "15m"

    _w = field_validator("window")(classmethod(lambda cls, v: _window(v)))


class ImbalanceQuery(Strict):
    """max / avg of a signal within groups: how much fuller the fullest member is than the group."""

    kind: Literal["imbalance"]
    signal: str
    by: tuple[str, ...]

    _by = field_validator("by")(classmethod(lambda cls, v: _labels(v)))


class NamesQuery(Strict):
    """Which metric names matching a regex exist, counted by name (and `by` labels)."""

    kind: Literal["names"]
    source: Literal["dcgm", "vllm"]
    pattern: str
    by: tuple[str, ...] = ("__name__",)
    expect: tuple[str, ...] = ()  # names (or DCGM logical fields like fb_used) that should be present

    @field_validator("pattern")
    @classmethod
    def _re(cls, v):
        regex(v)
        if '"' in v or "\\" in v:
            raise ValueError("pattern must not contain quotes or backslashes")
        return v


class LabelsQuery(Strict):
    """The label layout of a metric: which of the given labels carry values."""

    kind: Literal["labels"]
    metric: str | None = None
    source: Literal["dcgm", "vllm"] | None = None  # with pattern: every metric whose name matches
    pattern: str | None = None
    labels: tuple[str, ...]
    expect: tuple[str, ...] = ()  # labels the config relies on; missing ones make the step unhealthy

    _l = field_validator("labels", "expect")(classmethod(lambda cls, v: _labels(v)))

    @model_validator(mode="after")
    def _what(self):
        if (self.metric is None) == (self.pattern is None):
            raise ValueError("a labels query needs either `metric` or `source` with `pattern`")
        if self.pattern is not None and self.source is None:
            raise ValueError("`pattern` needs `source` (dcgm or vllm)")
        return self


class UpQuery(Strict):
    """`up` of the source's scrape targets (config.targets), per target."""

    kind: Literal["up"]
    source: Literal["dcgm", "vllm"]


class AbsenceQuery(Strict):
    """The 'never silently blind' condition of an absence alert (defaults: the runbook's alert)."""

    kind: Literal["absence"]
    absence: Literal["partner_missing", "target_down", "metrics_absent", "inputs_missing"] | None = None
    source: Literal["dcgm", "vllm"] | None = None
    signal: str | None = None


class SloQuery(Strict):
    """An SLO's recording as its burn-rate alerts read it, per model (default SLO: the runbook's own)."""

    kind: Literal["slo"]
    slo: str | None = None
    # events: the valid events in `window`; unjudged: those of models whose good events are not
    # recorded now (an input missing), 0 for the others
    measure: Literal["burn_rate", "error_ratio", "budget_left", "events", "unjudged"] = "burn_rate"
    window: str | None = None  # burn_rate, error_ratio, events, unjudged: a window the SLO records

    _w = field_validator("window")(classmethod(lambda cls, v: _window(v)))

    @model_validator(mode="after")
    def _needs_window(self):
        if self.measure != "budget_left" and self.window is None:
            raise ValueError(f"measure {self.measure} needs a `window` (e.g. 1h)")
        return self


Query = Annotated[
    Union[
        SignalQuery,
        QuantileQuery,
        MeanQuery,
        RateQuery,
        RatioQuery,
        GaugeQuery,
        TrendQuery,
        ImbalanceQuery,
        NamesQuery,
        LabelsQuery,
        UpQuery,
        AbsenceQuery,
        SloQuery,
    ],
    Field(discriminator="kind"),
]


# -- thresholds and steps -------------------------------------------------------------------


class AlertThreshold(Strict):
    """A threshold relative to an alert's (overridable) threshold: `{alert: 0.5}` = half of it."""

    alert: Number = 1.0
    of: str | None = None  # another alert's threshold; default: the runbook's own alert


Threshold = Union[Number, AlertThreshold]


class Step(Strict):
    id: str
    title: str
    why: str = ""
    query: Query
    unit: Unit = "count"
    op: Literal[">", "<"] | None = None  # which side is bad; default ">" (or the alert's op)
    suspicious: Threshold | None = None
    unhealthy: Threshold | None = None
    empty: Verdict = "no-data"  # verdict when the query returns nothing
    present: Verdict | None = None  # verdict when it returns series and has no thresholds
    healthy_means: str = ""
    unhealthy_means: str = ""
    cause: str = ""  # the cause this step names when it is not healthy
    scope: tuple[str, ...] | None = None  # firing-alert labels kept as filters (default: the runbook's)

    @field_validator("id")
    @classmethod
    def _id(cls, v):
        if not STEP_ID_RE.fullmatch(v):
            raise ValueError(
                f"step id {v!r} must be lower-case letters, digits and dashes (it is the page anchor)"
            )
        return v

    _scope = field_validator("scope")(classmethod(lambda cls, v: v if v is None else _labels(v)))


class DashboardLink(Strict):
    uid: str
    title: str
    slug: str = ""
    vars: dict[str, str] = Field(default_factory=dict)  # grafana variable -> alert label (or [[token]])


class Runbook(Strict):
    meaning: str
    not_meaning: str = ""
    impact: str = ""
    steps: tuple[Step, ...] = ()
    causes: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    dashboards: tuple[DashboardLink, ...] = ()
    scope: tuple[str, ...] | None = None  # firing-alert labels kept as filters (default: identity labels)

    _scope = field_validator("scope")(classmethod(lambda cls, v: v if v is None else _labels(v)))

    @model_validator(mode="after")
    def _unique(self):
        seen = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} is used twice on this page")
            seen.add(step.id)
        return self
