"""The spec schema: what users may write, with defaults. Pydantic models, frozen once validated."""

from __future__ import annotations

import functools
import re
from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from .. import catalog
from ..catalog.exporter import METRIC_NAME_RE
from .translate import did_you_mean
from .client_side import ClientSideConfig
from .deployment import RoleConfig, RoleName, TrackConfig
from .fields import (
    DURATION_RE,
    AlertLabels,
    Duration,
    K8sLabels,
    K8sName,
    LabelName,
    Matchers,
    Name,
    Number,
    PositiveDuration,
    duration,
    duration_ms,
    label_name,
    label_value,
    sample_values,
    series,
    shown,
    url_pattern,
)
from pydantic import Strict as StrictInput

RECORD_RE = re.compile(r"[a-zA-Z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+")
ALERT_RE = re.compile(r"[A-Z][A-Za-z0-9]*")
SLUG_RE = re.compile(r"[a-z][a-z0-9-]*")
UID_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")  # a Grafana dashboard uid
SEVERITIES = ("critical", "warning", "info")
MAX_EVAL_MS = 7 * 86_400_000  # promtool evaluates every rule up to `at`: a scenario is minutes, not years


@functools.lru_cache(maxsize=1024)  # the same few durations, asked thousands of times per build
def seconds(value: str) -> float:
    return duration_ms(value) / 1000


def _duration(value: str) -> str:
    return duration(value)


def _alert_name(value: str) -> str:
    if not ALERT_RE.fullmatch(value):
        raise ValueError(
            f"alert name {shown(value)} must be CamelCase (letters and digits, starting upper-case)"
        )
    return value


def _label(value: str) -> str:
    return label_name(value)


def _with_defaults(defaults: dict):
    """A mapping that names some keys keeps the defaults of the others (targets: {dcgm: ...})."""
    return lambda v: {**defaults, **v} if isinstance(v, dict) else v


DEFAULT_SELECTORS = {"dcgm": "", "vllm": ""}
DEFAULT_TARGETS = {"dcgm": 'job=~".*dcgm.*"', "vllm": 'job=~".*vllm.*"'}


def _target(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty target selector would take every scrape target for this source")
    return text


def _dashboard_url(value: str) -> str:
    url_pattern(value, ("uid", "slug"), required=("uid",))
    if "?" in value or "#" in value:
        raise ValueError(f"{shown(value)}: servewatch adds the ?var-... query itself; leave out ? and #")
    return value


SignalName = Annotated[
    str, AfterValidator(lambda v: _match(re.compile(r"[a-z][a-z0-9_]*"), v, "a signal name"))
]
GrafanaVar = Annotated[
    str, AfterValidator(lambda v: _match(re.compile(r"[A-Za-z0-9_]+"), v, "a Grafana variable"))
]
# a label name, or a [[token]] that config turns into one
LabelOrToken = Annotated[
    str, AfterValidator(lambda v: v if re.fullmatch(r"\[\[[a-z_]+\]\]", v) else label_name(v))
]


def _match(pattern: re.Pattern, value: str, what: str) -> str:
    if not pattern.fullmatch(value):
        raise ValueError(f"{shown(value)} is not {what} ({pattern.pattern})")
    return value


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
    hostname_label: str = "Hostname"  # exporter 4.8.3 renamed it hostname
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
    dcgm: tuple[LabelName, ...] = ("UUID", "GPU_I_ID")
    vllm: tuple[LabelName, ...] = ("namespace", "pod", "model_name", "engine")
    model: tuple[LabelName, ...] = ("namespace", "model_name")

    @field_validator("dcgm", "vllm", "model")
    @classmethod
    def _labels(cls, v):
        if not v:
            raise ValueError("an identity needs at least one label")
        twice = sorted({x for x in v if v.count(x) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice")
        return v

    @field_validator("model")
    @classmethod
    def _models_sum_engines(cls, v, info):
        # the engine records keep identity.vllm's labels only: a model label missing there is lost
        engine = info.data.get("vllm")
        unsummed = [x for x in v if engine is not None and x not in engine]
        if unsummed:
            raise ValueError(
                f"{', '.join(unsummed)} must be in identity.vllm too: a model's engines are summed by it"
            )
        return v


class Remember(Strict):
    """How long the rules remember what they saw (docs/alert-labels.md)."""

    workload: PositiveDuration = (
        "1h"  # the workload last seen on a GPU stays its namespace (and pod) this long
    )
    targets: PositiveDuration = "12h"  # targets that vanished are reported until this long after they went
    # an engine (data-parallel rank) or GPU that vanished while its target is up is reported until this
    # long after it went: the horizon is how a rank or GPU is retired (docs/alert-labels.md)
    parts: PositiveDuration = "1h"
    # how often the parts' memory is recorded: it reads `parts` of samples, so it runs in a slow group
    parts_every: PositiveDuration = "5m"


def whole_seconds(value: str | None) -> str | None:
    """A duration in whole seconds: the generated promtool tests place samples and checks on them."""
    if value is not None and seconds(value) != int(seconds(value)):
        raise ValueError(f"{value} is not a whole number of seconds; use 1s or more, in whole seconds")
    return value


class Config(Strict):
    cluster_label: LabelName | None = None
    scrape_interval: PositiveDuration = "30s"
    rate_window: PositiveDuration = "5m"
    # A map that names one source keeps the default of the other.
    selectors: Annotated[
        dict[Literal["dcgm", "vllm"], Matchers], BeforeValidator(_with_defaults(DEFAULT_SELECTORS))
    ] = Field(default_factory=lambda: dict(DEFAULT_SELECTORS))
    targets: Annotated[
        dict[Literal["dcgm", "vllm"], Annotated[Matchers, AfterValidator(_target)]],
        BeforeValidator(_with_defaults(DEFAULT_TARGETS)),
    ] = Field(default_factory=lambda: dict(DEFAULT_TARGETS))
    identity: Identity = Identity()
    # prefill/decode role and stable/canary track of vLLM series (spec/deployment.py); null: one
    # aggregated, single-track deployment per model
    role: RoleConfig | None = None
    track: TrackConfig | None = None
    # the client's side of latency: a gateway or frontend source (spec/client_side.py); null: the
    # latency alerts read the engines' own histograms
    client_side: ClientSideConfig | None = None
    remember: Remember = Remember()
    dcgm: DcgmProfile = DcgmProfile()
    # how the Prometheus names vLLM's series: a profile of catalog/vllm.yaml (vllm: its own names;
    # kserve: KServe's LLMInferenceService, which renames each to kserve_<name>)
    vllm_profile: str = "vllm"
    rule_namespace: K8sName = "monitoring"
    rule_labels: K8sLabels = Field(default_factory=lambda: {"role": "alert-rules"})
    # Placeholders: {alert} (required) and {alert_lower}; {uid} (required) and {slug}. No other braces.
    runbook_url: Annotated[
        str, AfterValidator(lambda v: url_pattern(v, ("alert", "alert_lower"), ("alert",)))
    ] = "https://github.com/example-org/servewatch/blob/main/runbooks/{alert}.md"
    dashboard_url: Annotated[str, AfterValidator(_dashboard_url)] = (
        "https://grafana.example.com/d/{uid}/{slug}"
    )
    rule_prefix: K8sName = "servewatch"
    # How the Prometheus stores vLLM's histograms (docs/histograms.md): classic _bucket/_count/_sum
    # series, native histograms with custom buckets (convert_classic_histograms_to_nhcb), or either.
    histograms: Literal["classic", "native", "both"] = "classic"

    @field_validator("vllm_profile")
    @classmethod
    def _vllm_profile(cls, v):
        return _one_of(v, catalog.load().vllm_profiles, "a vLLM profile of catalog/vllm.yaml")

    @property
    def client_pool(self) -> ClientSideConfig | None:
        """config.client_side where its source reports the inference pool it routes to (a group's
        `needs: [client_pool]`); None otherwise."""
        cs = self.client_side
        return cs if cs is not None and cs.client.pool else None

    @property
    def client_errors(self) -> ClientSideConfig | None:
        """config.client_side where its source counts requests and failed requests (a group's
        `needs: [client_errors]`, a client-side availability SLI); None otherwise."""
        cs = self.client_side
        return cs if cs is not None and cs.client.measures_errors else None

    def selector(self, source: str) -> str:
        """The extra matchers of a source's series: config.selectors, or for a gateway or frontend
        source config.client_side's."""
        if source == "gateway":
            return self.client_side.selector if self.client_side is not None else ""
        return self.selectors.get(source, "")

    @field_validator("cluster_label", mode="before")
    @classmethod
    def _cluster(cls, v):
        return v or None

    @model_validator(mode="after")
    def _cluster_not_identity(self):
        for level in ("dcgm", "vllm", "model"):
            if self.cluster_label and self.cluster_label in getattr(self.identity, level):
                raise ValueError(
                    f"cluster_label {self.cluster_label!r} is added to every identity; "
                    f"leave it out of identity.{level}"
                )
        return self

    @model_validator(mode="after")
    def _deployment_labels(self):
        named = [(f, getattr(self, f).label) for f in ("role", "track") if getattr(self, f)]
        if len(named) == 2 and named[0][1] == named[1][1]:
            raise ValueError(f"role and track both read label {named[0][1]!r}; they need a label each")
        for field, label in named:
            if label == self.cluster_label:
                raise ValueError(f"{field}.label {label!r} is the cluster_label")
            for level in ("vllm", "model"):
                if label in getattr(self.identity, level):
                    raise ValueError(
                        f"{field}.label {label!r} is added to the vLLM identities; "
                        f"leave it out of identity.{level}"
                    )
        return self

    _whole = field_validator("scrape_interval")(classmethod(lambda cls, v: whole_seconds(v)))

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

    kind: Literal["gauge", "matched_ratio", "rate", "quantile", "counter_ratio", "bucket_rate", "track_ratio"]
    record: str
    level: Level
    metric: str | None = None  # gauge, rate, quantile, counter_ratio, bucket_rate (a histogram)
    numerator: str | None = None  # matched_ratio: the part, e.g. fb_used
    partner: str | None = None  # matched_ratio: the rest, e.g. fb_free
    by: tuple[LabelName, ...] = ()  # extra labels kept (e.g. finished_reason)
    matchers: Matchers = ""  # counter_ratio: the numerator's extra matchers; gauge: which series
    quantiles: tuple[Number, ...] = ()
    # track_ratio: the signal compared, each other track's value over the stable track's (config.track)
    of: SignalName | None = None
    # where config.role is set: the roles whose series the signal reads (empty: every role)
    roles: tuple[RoleName, ...] = ()
    help: str = ""

    @field_validator("record")
    @classmethod
    def _record(cls, v):
        if not RECORD_RE.fullmatch(v):
            raise ValueError(f"{shown(v)} does not follow the level:metric:operations naming convention")
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
            "bucket_rate": ["metric"],
            "counter_ratio": ["metric", "matchers"],
            "matched_ratio": ["numerator", "partner"],
            "track_ratio": ["of"],
        }[self.kind]
        missing = [f for f in need if not getattr(self, f)]
        if missing:
            raise ValueError(f"a {self.kind} signal needs {', '.join(missing)}")
        if self.roles and "both" not in self.roles:
            raise ValueError("roles must include both: an aggregated engine does every role's work")
        if self.kind == "bucket_rate" and self.level == "gpu":
            raise ValueError("a bucket_rate signal is per engine or per model (level: engine or model)")
        return self


class Absence(Strict):
    """What a 'never silently blind' companion alert watches."""

    kind: Literal[
        "partner_missing",
        "target_down",
        "metrics_absent",
        "inputs_missing",
        "no_progress",
        "part_missing",
        "rank_idle",
        "client_missing",
        "pool_missing",
        "pool_gone",
    ]
    source: Literal["dcgm", "vllm"]
    signal: str | None = None  # partner_missing: the matched_ratio signal
    absent_fires: bool = True  # target_down, metrics_absent: fire when no target exists at all
    # metrics_absent: a target that has not been up since it appeared is starting (loading its
    # weights), not down, for this long
    startup_grace: PositiveDuration | None = None
    # no_progress, rank_idle: gauge signals that say work is in flight, and rate signals that say it advances;
    # client_missing: rate signals that say a model has traffic
    work: tuple[str, ...] = ()
    progress: tuple[str, ...] = ()
    # rank_idle: the progress (tokens per second) a sibling rank of the same pod must make for an idle
    # rank beside it to be a fault, not light traffic the load balancer has not spread yet
    busy: Number | None = None

    @model_validator(mode="after")
    def _needs(self):
        if self.kind in ("no_progress", "rank_idle") and not (self.work and self.progress):
            raise ValueError(f"a {self.kind} absence needs `work` and `progress` signals")
        if self.kind == "client_missing" and not self.progress:
            raise ValueError(
                "a client_missing absence needs `progress`: rate signals that say a model has traffic"
            )
        if self.kind == "rank_idle" and self.busy is None:
            raise ValueError("a rank_idle absence needs `busy`: the progress per second of a serving sibling")
        return self


class Dashboard(Strict):
    uid: Annotated[str, AfterValidator(lambda v: _match(UID_RE, v, "a Grafana uid"))]
    slug: Annotated[str, AfterValidator(lambda v: v and _match(SLUG_RE, v, "a URL slug"))] = ""
    vars: dict[GrafanaVar, LabelOrToken] = Field(default_factory=dict)  # grafana variable -> alert label


class Alert(Strict):
    alert: str
    signal: str | None = None
    quantile: Number | None = None
    op: Literal[">", ">=", "<", "<="] = ">"
    threshold: Number | None = None
    # counter_ratio signals: fire only where the ratio's denominator (e.g. finished requests per
    # second) is at least this, so a handful of events at low traffic cannot page
    min_traffic: Number | None = None
    absence: Absence | None = None
    for_: Duration = Field("5m", alias="for")
    keep_firing_for: Duration | None = None
    severity: Literal["critical", "warning", "info"] = "warning"
    summary: str
    description: str
    labels: AlertLabels = Field(default_factory=dict)
    annotations: dict[LabelName, str] = Field(default_factory=dict)
    dashboard: Dashboard | None = None
    enabled: bool = True

    _whole = field_validator("for_", "keep_firing_for")(classmethod(lambda cls, v: whole_seconds(v)))

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _name = field_validator("alert")(classmethod(lambda cls, v: _alert_name(v)))

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
    interval: PositiveDuration | None = None
    records: tuple[str, ...] = ()
    alerts: tuple[Alert, ...] = ()
    enabled: bool = True
    # the deployment dimensions the group is about (config.role, config.track): generated only
    # where each is configured
    needs: tuple[Literal["role", "track", "client_side", "client_pool", "client_errors"], ...] = ()

    @field_validator("name", "family")
    @classmethod
    def _slug(cls, v):
        if not SLUG_RE.fullmatch(v):
            raise ValueError(f"{shown(v)} must be lower-case letters, digits and dashes")
        return v


class AlertOverride(Strict):
    threshold: Number | None = None
    min_traffic: Number | None = None
    for_: Duration | None = Field(None, alias="for")
    keep_firing_for: Duration | None = None
    severity: Literal["critical", "warning", "info"] | None = None
    labels: AlertLabels = Field(default_factory=dict)
    annotations: dict[LabelName, str] = Field(default_factory=dict)
    enabled: bool | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    _whole = field_validator("for_", "keep_firing_for")(classmethod(lambda cls, v: whole_seconds(v)))


class GroupOverride(Strict):
    enabled: bool | None = None
    interval: PositiveDuration | None = None


class ScenarioOverride(Strict):
    enabled: bool = True


class Overrides(Strict):
    alerts: dict[str, AlertOverride] = Field(default_factory=dict)
    groups: dict[str, GroupOverride] = Field(default_factory=dict)
    scenarios: dict[str, ScenarioOverride] = Field(default_factory=dict)


# Scenario expressions (scenarios.py reads them; here only their alphabet and a sketch of the notation).
EXPRESSION_RE = re.compile(r"[A-Za-z0-9_ +\-*/().,]+")
EXPR_RE = re.compile(r"\$\{([^}]*)\}")
REPEAT_RE = re.compile(r"\(([^()]*)\)\*([0-9]+)")


def _expression(value: str) -> str:
    text = value.strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    if not EXPRESSION_RE.fullmatch(text):
        raise ValueError(f"{shown(value)} is not an expression like '80000 * above' (README, Tuning)")
    return value


def _let_name(name: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"{shown(name)} must be a lower-case name (letters, digits, _)")
    return name


def _sketch(text: str) -> str:
    """`text` with each `${...}` as 1 and each `(samples)*n` once: promtool's notation to check."""
    for expr in EXPR_RE.findall(text):
        _expression(expr)
    return REPEAT_RE.sub(lambda m: m.group(1), EXPR_RE.sub("1", text))


def _at(value: str) -> str:
    """A duration (whole seconds, at most 7d), or an expression of durations like 'for + 2m'."""
    if isinstance(value, str) and value and DURATION_RE.fullmatch(value):
        return _eval_time(duration(value))
    if isinstance(value, str) and EXPRESSION_RE.fullmatch(value):
        return value
    raise ValueError(
        f"{shown(value)} is neither a duration like 10m nor an expression like 'for + 2m' (README, Tuning)"
    )


class ExpectedAlert(Strict):
    labels: dict[LabelOrToken, Annotated[str, AfterValidator(label_value)]] = Field(default_factory=dict)
    # needed when the description shows $value: a number, or an expression like '${above}' (scenarios.py)
    value: (
        Annotated[float, StrictInput(), AllowInfNan(False)]
        | Annotated[str, AfterValidator(_expression)]
        | None
    ) = None
    # what the description's lookup finds at run time (templates.py), e.g. {pod: deepseek-v3-0}
    context: dict[LabelName, Annotated[str, AfterValidator(label_value)]] = Field(default_factory=dict)


def _eval_time(value: str) -> str:
    ms = duration_ms(value)
    if ms % 1000:
        raise ValueError(f"{shown(value)}: promtool evaluates at whole seconds")
    if ms > MAX_EVAL_MS:
        raise ValueError(f"{shown(value)} is later than a scenario may run (7d)")
    return value


class Expectation(Strict):
    at: Annotated[str, AfterValidator(_at)]
    alert: str | None = None  # defaults to the scenario's alert
    firing: tuple[ExpectedAlert, ...] = ()


class SeriesInput(Strict):
    series: Annotated[str, AfterValidator(lambda v: series(_sketch(v)) and v)]
    values: Annotated[str, AfterValidator(lambda v: sample_values(_sketch(v)) and v)]
    # input only where each deployment dimension is configured (config.role, config.track): a series
    # that only the rules of such a dimension read
    needs: tuple[Literal["role", "track", "client_side", "client_pool", "client_errors"], ...] = ()


class Scenario(Strict):
    name: Name
    alert: str
    why: str = ""
    interval: PositiveDuration = "1m"
    # names for expressions of this scenario, computed in order (scenarios.py): {used: '80000 * above'}
    let: dict[Annotated[str, AfterValidator(_let_name)], Annotated[str, AfterValidator(_expression)]] = Field(
        default_factory=dict
    )
    series: tuple[SeriesInput, ...]
    expect: tuple[Expectation, ...]
    # the alert's guards this scenario proves (a silence below min_traffic): written only where the
    # resolved alert has each (min_traffic > 0); without one, its silence would prove nothing
    proves: tuple[Literal["min_traffic"], ...] = ()
    # the identity dimensions of config it is about (a decode canary names the role): written only
    # where config sets each; elsewhere its labels name dimensions the rules do not have
    needs: tuple[Literal["role", "track", "client_side"], ...] = ()
