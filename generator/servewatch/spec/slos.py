"""The `slos:` section: service-level objectives, each with an SLI, an objective over a window,
per-model overrides and the multi-window, multi-burn-rate alerting of the SRE workbook.

The SLI is a discriminated union on `kind`; each kind's events (which counters are good, which are
valid) live in servewatch/slo/kinds.py, so a new kind is a schema class here and a class there.
What needs the catalog (a latency threshold must be a bucket bound) is checked in
validation/slo_checks.py, where each problem gets its file and line.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from .. import catalog
from . import matchers as matcher_syntax
from .fields import AlertLabels, LabelName, Matchers, Number, label_value
from .schema import Strict, _alert_name, _duration, seconds

SLO_NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")
Tier = Literal["page", "ticket"]
Severity = Literal["critical", "warning", "info"]


def _objective(v: float | None) -> float | None:
    if v is not None and not 0 < v < 1:
        raise ValueError(f"objective {v:g} must be a ratio between 0 and 1 (exclusive), e.g. 0.99")
    return v


# -- SLI kinds ------------------------------------------------------------------------------------


Side = Literal["instance", "client"]
CLIENT_PREFIX = "client_"  # a client-side quantity's histogram, as signals name it (client_ttft)


class LatencySLI(Strict):
    """Requests observed by a catalog histogram at or below `threshold` seconds, over all of them.
    `side: client` measures the same quantity where the client sees it: the histogram of the
    gateway or frontend of config.client_side (validation/slo_checks.py)."""

    kind: Literal["latency"]
    histogram: str  # e.g. vllm:time_to_first_token_seconds (without _bucket)
    threshold: Number  # seconds; must be one of the histogram's bucket bounds
    # instance: the engines' histogram; client: the gateway's twin of it; left out: the client where
    # config.client_side measures the quantity, else the engines (resolved by the loader: with_side)
    side: Side | None = None

    @property
    def reads(self) -> str:
        """The histogram the SLI reads, as signals name it: the engines' own, or at the client the
        configured source's of the same quantity (client_ttft), which the signal builder resolves."""
        if self.side != "client":
            return self.histogram
        return CLIENT_PREFIX + (catalog.load().client_quantity(self.histogram) or self.histogram)


ENGINE_REQUESTS = "vllm:request_success_total"  # the engines' finished requests, by finished_reason


class AvailabilitySLI(Strict):
    """Finished requests whose `finished_reason` is not one of `bad`, over all finished requests.
    `side: client` counts where the client sees them instead: the requests of the gateway of
    config.client_side less those it failed (any error code), which no engine may have seen."""

    kind: Literal["availability"]
    metric: str = ENGINE_REQUESTS
    label: LabelName = "finished_reason"
    bad: tuple[Annotated[str, AfterValidator(label_value)], ...] = ("error",)
    # instance: the engines' counter; client: the gateway's counters of requests and errors; left
    # out: the client where config.client_side counts errors, else the engines (with_side)
    side: Side | None = None

    @property
    def reads(self) -> str:
        """The counter of every request the SLI reads, as signals name it: the engines' own, or at
        the client the configured source's (client_requests), which the signal builder resolves."""
        return self.metric if self.side != "client" else CLIENT_PREFIX + "requests"

    @property
    def errors(self) -> str:
        """At the client, the source's counter of failed requests, as signals name it."""
        return CLIENT_PREFIX + "errors"

    @field_validator("bad")
    @classmethod
    def _bad(cls, v):
        if not v:
            raise ValueError("name at least one finished_reason that counts as a failure")
        return tuple(sorted(set(v)))


SLI = Annotated[Union[LatencySLI, AvailabilitySLI], Field(discriminator="kind")]


# -- alerting -------------------------------------------------------------------------------------


class BurnWindow(Strict):
    """One row of the workbook's table: alert when both windows burn faster than `burn_rate`."""

    tier: Tier
    burn_rate: Number = Field(gt=0)
    long: str
    short: str

    _dur = field_validator("long", "short")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _order(self):
        if seconds(self.short) >= seconds(self.long):
            raise ValueError(f"short window {self.short} must be shorter than long window {self.long}")
        return self


# The SRE workbook's recommendation (chapter "Alerting on SLOs"), for a 30-day window.
WORKBOOK = (
    BurnWindow(tier="page", burn_rate=14.4, long="1h", short="5m"),
    BurnWindow(tier="page", burn_rate=6, long="6h", short="30m"),
    BurnWindow(tier="ticket", burn_rate=3, long="1d", short="2h"),
    BurnWindow(tier="ticket", burn_rate=1, long="3d", short="6h"),
)


class Alerting(Strict):
    alert: str  # CamelCase alert name; every row of `windows` is a rule of this name
    severity: dict[Tier, Severity] = Field(default_factory=lambda: {"page": "critical", "ticket": "warning"})
    # The low-traffic guard: a row fires only when its long window holds at least this many valid
    # events, so a handful of requests cannot page (0 switches the guard off).
    min_events: int = Field(100, ge=0)
    for_: str = Field("0s", alias="for")
    windows: tuple[BurnWindow, ...] = WORKBOOK
    labels: AlertLabels = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _dur = field_validator("for_")(classmethod(lambda cls, v: _duration(v)))

    _name = field_validator("alert")(classmethod(lambda cls, v: _alert_name(v)))

    @field_validator("severity", mode="before")
    @classmethod
    def _both_tiers(cls, v):
        if isinstance(v, dict):  # a partial mapping keeps the other tier's default
            return {"page": "critical", "ticket": "warning", **v}
        return v

    @field_validator("windows")
    @classmethod
    def _windows(cls, v):
        if not v:
            raise ValueError("an SLO needs at least one burn-rate window")
        seen = set()
        for w in v:
            if (w.long, w.short) in seen:
                raise ValueError(f"windows {w.long}/{w.short} are listed twice")
            seen.add((w.long, w.short))
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v):
        reserved = {"slo", "tier", "severity", "long", "short"} & set(v)
        if reserved:
            raise ValueError(f"label {sorted(reserved)[0]!r} is set by servewatch on every SLO alert")
        return v


# -- the SLO --------------------------------------------------------------------------------------


class ModelOverride(Strict):
    """A different objective or latency threshold for one model (by its `model_name`)."""

    objective: Number | None = None
    threshold: Number | None = None

    _obj = field_validator("objective")(classmethod(lambda cls, v: _objective(v)))

    @model_validator(mode="after")
    def _something(self):
        if self.objective is None and self.threshold is None:
            raise ValueError("a per-model override needs an objective, a threshold or both")
        return self


class SloScope(Strict):
    """The deployments an SLO covers: the models listed (by `model_name`) and those whose identity
    labels the matchers accept, both where both are given. Its events are counted only there, so
    every record, alert, test and panel of the SLO covers only them (docs/slo.md)."""

    models: tuple[Annotated[str, AfterValidator(label_value)], ...] = ()
    matchers: Matchers = ""  # e.g. 'namespace="llm-prod"'; identity labels only (validation/slo_checks.py)

    @field_validator("models")
    @classmethod
    def _models(cls, v):
        twice = sorted({m for m in v if v.count(m) > 1})
        if twice:
            raise ValueError(f"{twice[0]!r} is listed twice")
        return v

    @model_validator(mode="after")
    def _something(self):
        if not self.models and not self.matchers:
            raise ValueError("a scope needs models, matchers or both (leave scope out to cover every model)")
        return self

    def parsed(self) -> list[matcher_syntax.Matcher]:
        return matcher_syntax.parse(self.matchers) if self.matchers else []

    def accepts(self, labels: dict[str, str], model_label: str) -> bool:
        """Whether a deployment with these identity labels is covered (an absent label is "")."""
        if self.models and labels.get(model_label, "") not in self.models:
            return False
        return all(matcher_syntax.accepts(m.op, m.value, labels.get(m.label, "")) for m in self.parsed())

    @property
    def text(self) -> str:
        """The scope in words, for summaries: e.g. `model_name` "a" or "b", `namespace="x"`."""
        parts = []
        if self.models:
            parts.append("model " + " or ".join(f'"{m}"' for m in self.models))
        if self.matchers:
            parts.append(self.matchers)
        return " and ".join(parts)


# what a good event of an availability SLI is, by the side it reads: its description where the spec
# leaves it out (with_side)
AVAILABILITY_GOOD = {
    "instance": "finished without an engine error",
    "client": "answered without an error at the gateway",
}


class SLO(Strict):
    # one line: what a good event is, e.g. "first token within 2.5 s"; an availability SLO may leave
    # it out and says what its side counts (AVAILABILITY_GOOD)
    description: str | None = None
    sli: SLI
    objective: Number
    window: str = "28d"
    scope: SloScope | None = None  # the deployments it covers; none: every model
    per_model: dict[Annotated[str, AfterValidator(label_value)], ModelOverride] = Field(default_factory=dict)
    alerting: Alerting
    goodput: bool = True  # whether a request must meet this SLO for its tokens to count as good

    @field_validator("description")
    @classmethod
    def _text(cls, v):
        if v is not None and ("{{" in v or "[[" in v or not v.strip()):
            raise ValueError("description is one line of static text (no templates or [[tokens]])")
        return v if v is None else v.strip()

    @model_validator(mode="after")
    def _described(self):
        if self.description is None and self.sli.kind != "availability":
            raise ValueError(
                "description is required: one line saying what a good event is (e.g. 'first token "
                "within 2.5 s'); the burn-rate alerts tell on-call in those words"
            )
        return self

    _obj = field_validator("objective")(classmethod(lambda cls, v: _objective(v)))
    _dur = field_validator("window")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _window_covers_rows(self):
        longest = max(self.alerting.windows, key=lambda w: seconds(w.long))
        if seconds(self.window) < seconds(longest.long):
            raise ValueError(f"window {self.window} is shorter than the {longest.long} burn-rate window")
        return self

    @property
    def summary(self) -> str:
        """e.g. "99% of requests: first token within 2.5 s, over 28d" ("of token gaps" where the
        histogram observes each gap); a client-side SLI says so."""
        metric = catalog.load().lookup(getattr(self.sli, "histogram", ""))
        events = metric.observes if metric else "requests"
        text = f"{self.objective * 100:.10g}% of {events}: {self.description}, over {self.window}"
        text += ", measured at the client" if self.side == "client" else ""
        return text + (f", for {self.scope.text}" if self.scope else "")

    @property
    def side(self) -> str:
        """Where the SLI is measured: on the engines (instance) or at the gateway (client)."""
        return self.sli.side or "instance"

    def objective_of(self, model_name: str | None) -> float:
        over = self.per_model.get(model_name or "")
        return over.objective if over is not None and over.objective is not None else self.objective

    def threshold_of(self, model_name: str | None) -> float | None:
        """The latency threshold that applies to `model_name` (None for an SLI without one)."""
        own = getattr(self.sli, "threshold", None)
        over = self.per_model.get(model_name or "")
        return over.threshold if over is not None and over.threshold is not None else own

    def covers_model(self, model_name: str) -> bool:
        """Whether the scope lets `model_name` in by name (its matchers need the other labels)."""
        return self.scope is None or not self.scope.models or model_name in self.scope.models


def with_side(slo: SLO, client_side) -> SLO:
    """`slo` with its SLI's side decided where the spec leaves it out: the client's wait and the
    client's failures are what an objective promises, so where config.client_side names a source
    that measures the quantity (a latency's twin; for availability, requests and errors) the SLI
    reads it there; else, and where the spec says `side: instance`, the engines'. An availability
    SLO without a description gets its side's (AVAILABILITY_GOOD)."""
    sli = slo.sli
    if sli.side is not None and slo.description is not None:
        return slo
    if sli.side is None:
        if isinstance(sli, LatencySLI):
            at_client = client_read(sli.histogram, client_side)
        else:
            at_client = sli.metric == ENGINE_REQUESTS and client_errors(client_side)
        sli = sli.model_copy(update={"side": "client" if at_client else "instance"})
    update = {"sli": sli}
    if slo.description is None:  # only an availability SLO may leave it out (SLO._described)
        update["description"] = AVAILABILITY_GOOD[sli.side]
    return slo.model_copy(update=update)


def client_errors(client_side) -> bool:
    """Whether config.client_side names a source that counts requests and failed requests."""
    return client_side is not None and client_side.client.measures_errors


def client_read(histogram: str, client_side) -> str | None:
    """The client-side quantity (`client_ttft`, as signals name it) that config.client_side measures
    of the engines' `histogram`; None without a source, or where it has no twin of it."""
    quantity = catalog.load().client_quantity(histogram)
    if client_side is None or quantity is None or not client_side.metric(quantity):
        return None
    return CLIENT_PREFIX + quantity


def _slo_name(name: str) -> str:
    if not SLO_NAME_RE.match(name):
        raise ValueError(
            f"SLO name {name!r} must be lower-case letters, digits and dashes (it is a label value)"
        )
    return name


# The key of an SLO under `slos:`: the `slo` label of every rule and alert it generates.
SloName = Annotated[str, AfterValidator(_slo_name)]
