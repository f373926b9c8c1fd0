"""The spec schema: what users may write, with defaults. Pydantic models, frozen once validated."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .. import catalog
from ..catalog.exporter import METRIC_NAME_RE
from .translate import did_you_mean

DURATION_RE = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RECORD_RE = re.compile(r"^[a-zA-Z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+$")
ALERT_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
SEVERITIES = ("critical", "warning", "info")
UNITS_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    return sum(int(n) * UNITS_S[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", duration))


def _duration(value: str) -> str:
    if not isinstance(value, str) or not DURATION_RE.match(value):
        raise ValueError(f"{value!r} is not a Prometheus duration like 30s, 5m or 1h30m")
    return value


def _label(value: str) -> str:
    if not LABEL_RE.match(value):
        raise ValueError(f"{value!r} is not a valid label name")
    return value


Duration = Annotated[str, Field(description="Prometheus duration")]


class Strict(BaseModel):
    """The base of every spec model: unknown keys are mistakes, and a validated spec never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # How spec/translate.py words an unknown key here: "unknown <key_noun> 'x'", with the known
    # keys listed after it when `lists_keys` (for a fixed set of names rather than fields).
    key_noun: ClassVar[str] = "field"
    lists_keys: ClassVar[bool] = False


def _one_of(value: str, known, what: str, listed: bool = True) -> str:
    if value not in known:
        listing = f" (known: {', '.join(known)})" if listed else ""
        raise ValueError(f"{value!r} is not {what}{listing}{did_you_mean(value, known)}")
    return value


class DcgmProfile(Strict):
    """How the deployed dcgm-exporter names things: which exporter profile of catalog/dcgm.yaml,
    which host label spelling, where workload labels land, and single metric names overridden."""

    fb_units: str = "mib"  # the exporter profile: mib (<= 4.8, FB in MiB), bytes (4.9+, FB in bytes)
    hostname_label: str = "Hostname"  # 4.6.0-4.8.3 renamed it hostname
    workload_labels: str = "exported"  # honorLabels false -> exported_pod; plain: pod
    metric_names: dict[str, str] = Field(default_factory=dict)  # DCGM field -> metric name

    @field_validator("fb_units", "hostname_label", "workload_labels")
    @classmethod
    def _in_catalog(cls, v, info):
        dcgm = catalog.load().dcgm
        known, what = {
            "fb_units": (dcgm.profiles, "an exporter profile of catalog/dcgm.yaml"),
            "hostname_label": (dcgm.host_labels, "a dcgm-exporter host label"),
            "workload_labels": (dcgm.workload_labels, "a workload label layout"),
        }[info.field_name]
        return _one_of(v, known, what)

    @field_validator("metric_names")
    @classmethod
    def _names(cls, v):
        fields = catalog.load().dcgm.fields
        for field, name in v.items():
            _one_of(field, fields, "a DCGM field of catalog/dcgm.yaml", listed=False)
            if not METRIC_NAME_RE.match(name):
                raise ValueError(f"{name!r} (for {field}) is not a Prometheus metric name")
        return dict(sorted(v.items()))


class Identity(Strict):
    dcgm: tuple[str, ...] = ("UUID", "GPU_I_ID")
    vllm: tuple[str, ...] = ("namespace", "pod", "model_name", "engine")
    model: tuple[str, ...] = ("namespace", "model_name")

    @field_validator("dcgm", "vllm", "model")
    @classmethod
    def _labels(cls, v):
        if not v:
            raise ValueError("an identity needs at least one label")
        return tuple(_label(x) for x in v)


class Config(Strict):
    cluster_label: str | None = None
    scrape_interval: str = "30s"
    rate_window: str = "5m"
    selectors: dict[Literal["dcgm", "vllm"], str] = Field(default_factory=lambda: {"dcgm": "", "vllm": ""})
    targets: dict[Literal["dcgm", "vllm"], str] = Field(
        default_factory=lambda: {"dcgm": 'job=~".*dcgm.*"', "vllm": 'job=~".*vllm.*"'}
    )
    identity: Identity = Identity()
    dcgm: DcgmProfile = DcgmProfile()
    rule_namespace: str = "monitoring"
    rule_labels: dict[str, str] = Field(default_factory=lambda: {"role": "alert-rules"})
    runbook_url: str = "https://github.com/example-org/servewatch/blob/main/runbooks/{alert}.md"
    dashboard_url: str = "https://grafana.example.com/d/{uid}/{slug}"
    rule_prefix: str = "servewatch"

    _d_scrape = field_validator("scrape_interval", "rate_window")(classmethod(lambda cls, v: _duration(v)))

    @field_validator("cluster_label")
    @classmethod
    def _cluster(cls, v):
        return _label(v) if v else None

    @field_validator("runbook_url")
    @classmethod
    def _runbook(cls, v):
        if "{alert}" not in v:
            raise ValueError("runbook_url must contain {alert}")
        return v

    @model_validator(mode="after")
    def _window(self):
        if seconds(self.rate_window) < 4 * seconds(self.scrape_interval):
            raise ValueError(
                f"rate_window {self.rate_window} is shorter than 4 x scrape_interval {self.scrape_interval}; "
                "rate() would miss samples"
            )
        return self


Level = Literal["gpu", "engine", "model"]


class Signal(Strict):
    """A quantity computed once, recorded, and shared by alerts, dashboards and runbooks."""

    kind: Literal["gauge", "matched_ratio", "rate", "quantile", "counter_ratio"]
    record: str
    level: Level
    metric: str | None = None  # gauge, rate, quantile, counter_ratio
    numerator: str | None = None  # matched_ratio: the part, e.g. fb_used
    partner: str | None = None  # matched_ratio: the rest, e.g. fb_free
    by: tuple[str, ...] = ()  # extra labels kept (e.g. finished_reason)
    matchers: str = ""  # counter_ratio: the numerator's extra matchers
    quantiles: tuple[float, ...] = ()
    help: str = ""

    @field_validator("record")
    @classmethod
    def _record(cls, v):
        if not RECORD_RE.match(v):
            raise ValueError(f"{v!r} does not follow the level:metric:operations naming convention")
        return v

    @field_validator("quantiles")
    @classmethod
    def _q(cls, v):
        for q in v:
            if not 0 < q < 1:
                raise ValueError(f"quantile {q} must be between 0 and 1")
        return v

    @model_validator(mode="after")
    def _fields(self):
        need = {
            "gauge": ["metric"],
            "rate": ["metric"],
            "quantile": ["metric", "quantiles"],
            "counter_ratio": ["metric", "matchers"],
            "matched_ratio": ["numerator", "partner"],
        }[self.kind]
        missing = [f for f in need if not getattr(self, f)]
        if missing:
            raise ValueError(f"a {self.kind} signal needs {', '.join(missing)}")
        return self


class Absence(Strict):
    """What a 'never silently blind' companion alert watches."""

    kind: Literal["partner_missing", "target_down", "metrics_absent", "inputs_missing"]
    source: Literal["dcgm", "vllm"]
    signal: str | None = None  # partner_missing: the matched_ratio signal
    absent_fires: bool = True  # target_down: fire when no target exists at all


class Dashboard(Strict):
    uid: str
    slug: str = ""
    vars: dict[str, str] = Field(default_factory=dict)  # grafana variable -> alert label


class Alert(Strict):
    alert: str
    signal: str | None = None
    quantile: float | None = None
    op: Literal[">", ">=", "<", "<="] = ">"
    threshold: float | None = None
    absence: Absence | None = None
    for_: str = Field("5m", alias="for")
    keep_firing_for: str | None = None
    severity: Literal["critical", "warning", "info"] = "warning"
    summary: str
    description: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    dashboard: Dashboard | None = None
    enabled: bool = True

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _dur = field_validator("for_", "keep_firing_for")(
        classmethod(lambda cls, v: v if v is None else _duration(v))
    )

    @field_validator("alert")
    @classmethod
    def _name(cls, v):
        if not ALERT_RE.match(v):
            raise ValueError(f"alert name {v!r} must be CamelCase (letters and digits, starting upper-case)")
        return v

    @field_validator("summary")
    @classmethod
    def _summary(cls, v):
        if "{{" in v or not v.endswith("."):
            raise ValueError("summary must be static text ending in a full stop (put details in description)")
        return v

    @model_validator(mode="after")
    def _shape(self):
        if (self.signal is None) == (self.absence is None):
            raise ValueError("an alert needs exactly one of signal (with threshold) or absence")
        if self.signal is not None and self.threshold is None:
            raise ValueError("an alert on a signal needs a threshold")
        return self


class Group(Strict):
    name: str
    family: str
    interval: str | None = None
    records: tuple[str, ...] = ()
    alerts: tuple[Alert, ...] = ()
    enabled: bool = True

    _dur = field_validator("interval")(classmethod(lambda cls, v: v if v is None else _duration(v)))

    @field_validator("name", "family")
    @classmethod
    def _slug(cls, v):
        if not re.match(r"^[a-z][a-z0-9-]*$", v):
            raise ValueError(f"{v!r} must be lower-case letters, digits and dashes")
        return v


class AlertOverride(Strict):
    threshold: float | None = None
    for_: str | None = Field(None, alias="for")
    keep_firing_for: str | None = None
    severity: Literal["critical", "warning", "info"] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    enabled: bool | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    _dur = field_validator("for_", "keep_firing_for")(
        classmethod(lambda cls, v: v if v is None else _duration(v))
    )


class GroupOverride(Strict):
    enabled: bool | None = None
    interval: str | None = None


class ScenarioOverride(Strict):
    enabled: bool = True


class Overrides(Strict):
    alerts: dict[str, AlertOverride] = Field(default_factory=dict)
    groups: dict[str, GroupOverride] = Field(default_factory=dict)
    scenarios: dict[str, ScenarioOverride] = Field(default_factory=dict)


class ExpectedAlert(Strict):
    labels: dict[str, str] = Field(default_factory=dict)
    value: float | None = None  # needed when the description shows $value


class Expectation(Strict):
    at: str
    alert: str | None = None  # defaults to the scenario's alert
    firing: tuple[ExpectedAlert, ...] = ()

    _dur = field_validator("at")(classmethod(lambda cls, v: _duration(v)))


class SeriesInput(Strict):
    series: str
    values: str


class Scenario(Strict):
    name: str
    alert: str
    why: str = ""
    interval: str = "1m"
    series: tuple[SeriesInput, ...]
    expect: tuple[Expectation, ...]

    _dur = field_validator("interval")(classmethod(lambda cls, v: _duration(v)))
