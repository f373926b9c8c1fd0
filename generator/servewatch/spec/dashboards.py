"""The `dashboards:` section of the specs: what users may tune, validated with file:line errors.

Panels and queries come from the signals and config; this section only chooses titles, folder,
datasource, refresh and time range, the price used for cost per million tokens, the optional
kube_pod_labels join, the Kubernetes delivery details and which optional panels are shown.
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import Location, SpecError, SpecErrors
from .schema import Strict, _duration, _label

UID_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
TIME_RE = re.compile(r"^now(-[0-9]+[smhdwMy])?(/[smhdwMy])?$")
# Currencies Grafana has a unit for; anything else is shown with the code as a suffix.
GRAFANA_CURRENCIES = {
    "USD",
    "GBP",
    "EUR",
    "JPY",
    "RUB",
    "UAH",
    "BRL",
    "DKK",
    "ISK",
    "NOK",
    "SEK",
    "CZK",
    "CHF",
    "PLN",
    "BTC",
    "ZAR",
    "INR",
    "KRW",
    "IDR",
    "PHP",
    "VND",
}


def _uid(v: str) -> str:
    if not UID_RE.match(v):
        raise ValueError(f"{v!r} is not a Grafana uid (letters, digits, - and _, at most 40)")
    return v


def _check(ok, message: str):
    """A field validator body: `message` unless `ok(value)`."""

    def validate(cls, v):
        if not ok(v):
            raise ValueError(message.format(v=v))
        return v

    return classmethod(validate)


class Datasource(Strict):
    """The Prometheus datasource: the default of the `datasource` variable and the provisioning file."""

    name: str = "Prometheus"
    uid: str = "prometheus"
    url: str = "http://prometheus-operated.monitoring.svc:9090"

    _u = field_validator("uid")(classmethod(lambda cls, v: _uid(v)))


class TimeRange(Strict):
    from_: str = Field("now-6h", alias="from")
    to: str = "now"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _t = field_validator("from_", "to")(
        _check(TIME_RE.match, "{v!r} is not a Grafana relative time like now-6h or now")
    )


class Cost(Strict):
    """Cost per million output tokens = price_per_gpu_hour x GPUs / 3600 / output tokens per second x 1e6."""

    price_per_gpu_hour: float = Field(2.5, gt=0)
    currency: str = "USD"
    # null: count the GPUs (and MIG instances) the model's pods hold, from DCGM's workload labels.
    # A number: GPUs per engine (data-parallel rank), for clusters without DCGM pod mapping.
    gpus_per_engine: int | None = Field(None, ge=1)

    _cur = field_validator("currency")(
        _check(lambda v: re.match(r"^[A-Z]{3}$", v), "{v!r} is not a three-letter currency code like USD")
    )

    @property
    def unit(self) -> str:
        return (
            f"currency{self.currency}" if self.currency in GRAFANA_CURRENCIES else f"suffix: {self.currency}"
        )


class Kubernetes(Strict):
    """ConfigMaps for the kube-prometheus-stack sidecar and Grafana Operator GrafanaDashboard resources."""

    namespace: str = "monitoring"
    sidecar_label: str = "grafana_dashboard"
    sidecar_label_value: str = "1"
    folder_annotation: str = "grafana_folder"
    operator_instance_selector: dict[str, str] = Field(default_factory=lambda: {"dashboards": "grafana"})
    resync_period: str = "10m"

    _dur = field_validator("resync_period")(classmethod(lambda cls, v: _duration(v)))
    _ns = field_validator("namespace")(_check(K8S_NAME_RE.match, "{v!r} is not a Kubernetes namespace name"))
    _sel = field_validator("operator_instance_selector")(
        _check(bool, "the Grafana Operator needs at least one instance selector label")
    )


class Defaults(Strict):
    folder: str = "Serving"
    tags: tuple[str, ...] = ("servewatch",)
    refresh: str = "30s"
    time: TimeRange = TimeRange()
    timezone: str = "browser"
    datasource: Datasource = Datasource()
    cost: Cost = Cost()
    kubernetes: Kubernetes = Kubernetes()

    _dur = field_validator("refresh")(classmethod(lambda cls, v: _duration(v)))
    _tags = field_validator("tags")(
        _check(bool, "at least one tag: the dashboard links find each other by the first tag")
    )


class KubePodLabels(Strict):
    """Join through kube-state-metrics' kube_pod_labels so every pod of a multi-node leader/worker
    group counts for the deployment, also the workers that export no vLLM metrics."""

    enabled: bool = False
    group_label: str = "label_leaderworkerset_sigs_k8s_io_name"

    _l = field_validator("group_label")(classmethod(lambda cls, v: _label(v)))


class BoardSettings(Strict):
    """Settings of one dashboard. `panels` switches optional panels on or off."""

    title: str
    uid: str
    refresh: str | None = None
    time: TimeRange | None = None
    panels: dict[str, bool] = Field(default_factory=dict)
    kube_pod_labels: KubePodLabels = KubePodLabels()

    _dur = field_validator("refresh")(classmethod(lambda cls, v: v if v is None else _duration(v)))
    _u = field_validator("uid")(classmethod(lambda cls, v: _uid(v) if v else v))


# The dashboards servewatch builds: default settings, and the optional panels each one has.
BOARDS: dict[str, dict] = {
    "vllm-serving": {
        "title": "vLLM serving",
        "uid": "servewatch-vllm-serving",
        "optional": ("cost", "per_engine_latency", "length_heatmaps", "prefix_cache", "spec_decode"),
    },
    "gpu-fleet": {
        "title": "GPU fleet (DCGM)",
        "uid": "servewatch-gpu-fleet",
        "optional": ("sm_active", "nvlink", "pcie", "xid"),
    },
    "moe-deployment": {
        "title": "MoE deployment",
        "uid": "servewatch-moe-deployment",
        "optional": ("alerts", "tokens_per_rank"),
    },
}


class Settings(Strict):
    defaults: Defaults = Defaults()
    boards: dict[str, BoardSettings]

    def board(self, name: str) -> BoardSettings:
        return self.boards[name]

    def shows(self, name: str, panel: str) -> bool:
        return self.boards[name].panels.get(panel, True)

    def refresh(self, name: str) -> str:
        return self.boards[name].refresh or self.defaults.refresh

    def time(self, name: str) -> TimeRange:
        return self.boards[name].time or self.defaults.time


class _BoardInput(BoardSettings):
    """What a user writes: title and uid fall back to the built-in defaults."""

    title: str = ""
    uid: str = ""


def _near(name: str, options) -> str:
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _messages(exc: ValidationError, model: type[BaseModel]) -> list[tuple[tuple, str]]:
    out = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not str(p).startswith("function"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}" + _near(loc[-1], _fields_at(model, loc[:-1]))
        elif err["type"] == "missing":
            msg = f"missing required field {loc[-1]!r}"
        out.append((loc, msg))
    return out


def _fields_at(model: type[BaseModel], path: tuple) -> list[str]:
    """Field names (aliases) of the model reached by walking `path` through nested models."""
    current = model
    for part in path:
        f = current.model_fields.get(str(part)) or next(
            (fi for fi in current.model_fields.values() if fi.alias == part), None
        )
        if f is None:
            return []
        ann = f.annotation
        for candidate in getattr(ann, "__args__", (ann,)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                current = candidate
                break
        else:
            return []
    return [fi.alias or n for n, fi in current.model_fields.items()]


def load_settings(spec) -> Settings:
    """Validate the raw `dashboards:` data of a Spec; every mistake names its file, line and field."""
    errors: list[SpecError] = []
    raw = spec.dashboards or {}

    def where(name: str, path: tuple = ()) -> Location:
        if hasattr(spec, "locate"):
            return spec.locate("dashboard", name, *path)
        doc = spec.where.get(("dashboard-doc", name))  # older loaders kept the document here
        if doc is None:
            return Location("specs", None, ".".join(("dashboards", name) + tuple(map(str, path))))
        return doc.locate(("dashboards", name) + tuple(path))

    defaults = Defaults()
    if "defaults" in raw:
        try:
            defaults = Defaults.model_validate(raw["defaults"] if raw["defaults"] is not None else {})
        except ValidationError as exc:
            errors.extend(SpecError(msg, where("defaults", loc)) for loc, msg in _messages(exc, Defaults))
    boards: dict[str, BoardSettings] = {}
    for name, value in raw.items():
        if name == "defaults":
            continue
        if name not in BOARDS:
            errors.append(
                SpecError(
                    f"unknown dashboard {name!r}{_near(name, ['defaults', *BOARDS])}; "
                    f"known: defaults, {', '.join(BOARDS)}",
                    where(name),
                )
            )
            continue
        if value is not None and not isinstance(value, dict):
            errors.append(SpecError("expected a mapping of settings", where(name)))
            continue
        try:
            board = _BoardInput.model_validate(value or {})
        except ValidationError as exc:
            errors.extend(SpecError(msg, where(name, loc)) for loc, msg in _messages(exc, BoardSettings))
            continue
        optional = BOARDS[name]["optional"]
        for panel in board.panels:
            if panel not in optional:
                errors.append(
                    SpecError(
                        f"unknown optional panel {panel!r}{_near(panel, optional)}; "
                        f"known: {', '.join(optional)}",
                        where(name, ("panels", panel)),
                    )
                )
        if board.kube_pod_labels.enabled and name != "moe-deployment":
            errors.append(
                SpecError(
                    "kube_pod_labels applies to the moe-deployment dashboard only",
                    where(name, ("kube_pod_labels",)),
                )
            )
        boards[name] = BoardSettings(
            title=board.title or BOARDS[name]["title"],
            uid=board.uid or BOARDS[name]["uid"],
            refresh=board.refresh,
            time=board.time,
            panels=dict(board.panels),
            kube_pod_labels=board.kube_pod_labels,
        )
    for name, facts in BOARDS.items():
        boards.setdefault(name, BoardSettings(title=facts["title"], uid=facts["uid"]))
    uids: dict[str, str] = {}
    for name, board in boards.items():
        if board.uid in uids:
            errors.append(
                SpecError(
                    f"uid {board.uid!r} is already used by dashboard {uids[board.uid]!r}",
                    where(name, ("uid",)),
                )
            )
        uids[board.uid] = name
    if errors:
        raise SpecErrors(errors)
    return Settings(defaults=defaults, boards=boards)
