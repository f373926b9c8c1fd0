"""The `dashboards:` section of the specs: what users may tune.

Panels and queries come from the signals and config; this section only chooses titles, folder,
datasource, refresh and time range, the price used for cost per million tokens, the optional
kube_pod_labels join, the Kubernetes delivery details and which optional panels are shown.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field, create_model, field_validator, model_validator

from .fields import K8sLabelKey, K8sLabels, K8sLabelValue, Number, PositiveDuration
from .schema import Strict, _label

UID_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
TIME_RE = re.compile(r"now(-[0-9]+[smhdwMy])?(/[smhdwMy])?")
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
    if not UID_RE.fullmatch(v):
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
    # the `datasource` variable lists only the Prometheus datasources whose name matches (e.g. /^prod-/)
    regex: str = ""

    _u = field_validator("uid")(classmethod(lambda cls, v: _uid(v)))


class TimeRange(Strict):
    from_: str = Field("now-6h", alias="from")
    to: str = "now"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _t = field_validator("from_", "to")(
        _check(TIME_RE.fullmatch, "{v!r} is not a Grafana relative time like now-6h or now")
    )


PositivePrice = Annotated[float, Field(gt=0)]


class Cost(Strict):
    """Cost per million output tokens = the hourly price of the GPUs a model holds / 3600 / output
    tokens per second x 1e6. Each GPU is priced by its MIG profile, else its GPU model, else
    price_per_gpu_hour."""

    price_per_gpu_hour: Number = Field(2.5, gt=0)
    # DCGM's modelName (e.g. "NVIDIA H200") -> price per GPU-hour; GPU_I_PROFILE (e.g. "3g.40gb") ->
    # price per MIG-instance-hour. A MIG instance's profile price wins over its GPU's model price.
    gpu_model_prices: dict[str, PositivePrice] = Field(default_factory=dict)
    mig_profile_prices: dict[str, PositivePrice] = Field(default_factory=dict)
    currency: str = "USD"
    # null: count the GPUs (and MIG instances) the model's pods hold, from DCGM's workload labels.
    # A number: GPUs per engine (data-parallel rank), for clusters without DCGM pod mapping.
    gpus_per_engine: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _priced_by_type_needs_the_gpus(self):
        if self.gpus_per_engine and (self.gpu_model_prices or self.mig_profile_prices):
            raise ValueError(
                "gpu_model_prices and mig_profile_prices price each GPU by its DCGM labels, which "
                "gpus_per_engine does without (it counts GPUs, not their kinds): drop one of them"
            )
        return self

    @property
    def by_type(self) -> bool:
        return bool(self.gpu_model_prices or self.mig_profile_prices)

    @property
    def per_gpu_hour(self) -> str:
        """The price as the panels' descriptions state it."""
        if not self.by_type:
            return f"{self.price_per_gpu_hour:g} {self.currency} per GPU-hour"
        kinds = [f"MIG {k} {v:g}" for k, v in sorted(self.mig_profile_prices.items())]
        kinds += [f"{k} {v:g}" for k, v in sorted(self.gpu_model_prices.items())]
        return (
            f"each GPU's own price per hour in {self.currency} ({', '.join(kinds)}, "
            f"any other {self.price_per_gpu_hour:g})"
        )

    _cur = field_validator("currency")(
        _check(lambda v: re.fullmatch(r"[A-Z]{3}", v), "{v!r} is not a three-letter currency code like USD")
    )

    def per_million(
        self, gpus: float, seconds: float, good_tokens: float, price: float | None = None
    ) -> float | None:
        """Cost per 1M good output tokens over a period of `gpus` GPUs of one price (the formula above,
        summed over the period): price x GPUs x hours / good tokens x 1e6; undefined (None) when no
        token was good. `price` defaults to price_per_gpu_hour."""
        if not good_tokens:
            return None
        return (
            (self.price_per_gpu_hour if price is None else price) * gpus * seconds / 3600 / good_tokens * 1e6
        )

    @property
    def unit(self) -> str:
        return (
            f"currency{self.currency}" if self.currency in GRAFANA_CURRENCIES else f"suffix: {self.currency}"
        )


class Kubernetes(Strict):
    """ConfigMaps for the kube-prometheus-stack sidecar and Grafana Operator GrafanaDashboard resources."""

    namespace: str = "monitoring"
    sidecar_label: K8sLabelKey = "grafana_dashboard"
    sidecar_label_value: K8sLabelValue = "1"
    folder_annotation: K8sLabelKey = "grafana_folder"
    operator_instance_selector: K8sLabels = Field(default_factory=lambda: {"dashboards": "grafana"})
    resync_period: PositiveDuration = "10m"
    _ns = field_validator("namespace")(
        _check(K8S_NAME_RE.fullmatch, "{v!r} is not a Kubernetes namespace name")
    )
    _sel = field_validator("operator_instance_selector")(
        _check(bool, "the Grafana Operator needs at least one instance selector label")
    )


class Defaults(Strict):
    folder: str = "Serving"
    tags: tuple[str, ...] = ("servewatch",)
    refresh: PositiveDuration = "30s"
    time: TimeRange = TimeRange()
    timezone: str = "browser"
    datasource: Datasource = Datasource()
    cost: Cost = Cost()
    kubernetes: Kubernetes = Kubernetes()

    _tags = field_validator("tags")(
        _check(bool, "at least one tag: the dashboard links find each other by the first tag")
    )


class KubePodLabels(Strict):
    """Join through kube-state-metrics' kube_pod_labels so every pod of a multi-node leader/worker
    group counts for the deployment, also the workers that export no vLLM metrics."""

    enabled: bool = False
    group_label: str = "label_leaderworkerset_sigs_k8s_io_name"

    _l = field_validator("group_label")(classmethod(lambda cls, v: _label(v)))


# The optional panels of each dashboard, declared once: the key under `panels:` and what it shows.
# A dashboard module marks each such panel with `optional=<key>`; the board frame switches it.
OPTIONAL_PANELS: dict[str, dict[str, str]] = {
    "vllm-serving": {
        "cost": "cost per 1M output tokens (overview stat and time series)",
        "per_engine_latency": "time to first token and inter-token latency p95 per engine",
        "length_heatmaps": "prompt and generation length heatmaps, one per model",
        "iteration_heatmap": "tokens per engine step (the batch size) heatmap",
        "prefix_cache": "prefix cache hit ratio",
        "spec_decode": "speculative decoding acceptance",
    },
    "gpu-fleet": {
        "sm_active": "SM active (a profiling field the counters CSV may leave out)",
        "nvlink": "NVLink throughput",
        "pcie": "PCIe throughput",
        "xid": "GPUs with new or recent XIDs and the last XID per GPU (stat and tables)",
    },
    "moe-deployment": {
        "alerts": "alerts firing for the deployment (stat and table)",
        "tokens_per_rank": "generated tokens per rank (and its imbalance)",
        "kv_transfer": "NIXL KV transfer time and failures (disaggregated serving)",
    },
    "slo": {
        "goodput": "good output tokens per second (goodput) per model",
        "cost_per_good_token": "cost per 1M good output tokens over the selected time range, per model",
    },
}


class Panels(Strict):
    """Which optional panels a dashboard shows; each is on unless switched off."""

    key_noun: ClassVar[str] = "optional panel"
    lists_keys: ClassVar[bool] = True


def _panels(board: str, model_name: str) -> type[Panels]:
    fields = {key: (bool, Field(True, description=what)) for key, what in OPTIONAL_PANELS[board].items()}
    return create_model(model_name, __base__=Panels, **fields)


VllmServingPanels = _panels("vllm-serving", "VllmServingPanels")
GpuFleetPanels = _panels("gpu-fleet", "GpuFleetPanels")
MoeDeploymentPanels = _panels("moe-deployment", "MoeDeploymentPanels")
SloPanels = _panels("slo", "SloPanels")


class BoardSettings(Strict):
    """Settings of one dashboard; each dashboard's subclass gives its title, uid and optional panels."""

    joins_pod_labels: ClassVar[bool] = False  # whether kube_pod_labels applies to this dashboard

    title: str
    uid: str
    refresh: PositiveDuration | None = None
    time: TimeRange | None = None
    panels: Panels
    kube_pod_labels: KubePodLabels = KubePodLabels()

    @field_validator("title", "uid")
    @classmethod
    def _default_when_empty(cls, v, info):
        v = v or cls.model_fields[info.field_name].default
        return _uid(v) if info.field_name == "uid" else v

    @field_validator("kube_pod_labels")
    @classmethod
    def _joins(cls, v):
        if v.enabled and not cls.joins_pod_labels:
            raise ValueError("kube_pod_labels applies to the moe-deployment dashboard only")
        return v


class VllmServingBoard(BoardSettings):
    title: str = "vLLM serving"
    uid: str = "servewatch-vllm-serving"
    panels: VllmServingPanels = VllmServingPanels()


class GpuFleetBoard(BoardSettings):
    title: str = "GPU fleet (DCGM)"
    uid: str = "servewatch-gpu-fleet"
    panels: GpuFleetPanels = GpuFleetPanels()


class MoeDeploymentBoard(BoardSettings):
    joins_pod_labels: ClassVar[bool] = True

    title: str = "MoE deployment"
    uid: str = "servewatch-moe-deployment"
    panels: MoeDeploymentPanels = MoeDeploymentPanels()


class SloBoard(BoardSettings):
    title: str = "Service-level objectives"
    uid: str = "servewatch-slo"
    panels: SloPanels = SloPanels()


class Settings(Strict):
    """The `dashboards:` section: shared defaults and one entry per dashboard servewatch builds."""

    key_noun: ClassVar[str] = "dashboard"
    lists_keys: ClassVar[bool] = True

    defaults: Defaults = Defaults()
    vllm_serving: VllmServingBoard = Field(VllmServingBoard(), alias="vllm-serving")
    gpu_fleet: GpuFleetBoard = Field(GpuFleetBoard(), alias="gpu-fleet")
    moe_deployment: MoeDeploymentBoard = Field(MoeDeploymentBoard(), alias="moe-deployment")
    slo: SloBoard = Field(SloBoard(), alias="slo")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("defaults", "vllm_serving", "gpu_fleet", "moe_deployment", "slo", mode="before")
    @classmethod
    def _mapping(cls, v, info):
        if v is None:  # a key written with nothing under it keeps the defaults
            return {}
        if info.field_name != "defaults" and not isinstance(v, (dict, BoardSettings)):
            raise ValueError("expected a mapping of settings")
        return v

    @property
    def boards(self) -> dict[str, BoardSettings]:
        """name (the key in specs/dashboards.yaml) -> its settings."""
        return {f.alias: getattr(self, name) for name, f in type(self).model_fields.items() if f.alias}

    def board(self, name: str) -> BoardSettings:
        return self.boards[name]

    def shows(self, name: str, panel: str) -> bool:
        return getattr(self.board(name).panels, panel)

    def refresh(self, name: str) -> str:
        return self.board(name).refresh or self.defaults.refresh

    def time(self, name: str) -> TimeRange:
        return self.board(name).time or self.defaults.time


# The dashboards servewatch builds, by the name the specs and the output files use, with their defaults.
BOARDS: dict[str, BoardSettings] = Settings().boards
