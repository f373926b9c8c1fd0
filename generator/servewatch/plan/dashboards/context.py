"""What the dashboards share: the label roles taken from config, the variable matchers each group of
panels is narrowed by, the alerts (thresholds, runbooks), legends, and the pieces every dashboard
starts from (variables, links, firing-alert annotations). What a panel reads is asked of a
Selection (selection.py), made here from the variable matchers."""

from __future__ import annotations

from dataclasses import dataclass

from ... import grafana
from ...grafana import slug
from ...errors import SpecError, SpecErrors
from ...model import AlertRule, Model
from ...promql import builders as promql
from ...promql import labels as promql_labels
from ...spec.dashboards import Settings
from . import recorded
from .selection import Selection

# vLLM's own labels (not configuration); dcgm-exporter's come from the catalog (catalog/dcgm.yaml).
VLLM_MODEL, VLLM_ENGINE = "model_name", "engine"
# A repeated panel's one model: `raw` keeps the name as it is inside an exact `=` matcher.
ONE_MODEL = '"${model:raw}"'

# Catalog units -> Grafana units. Grafana's `mbytes` is MiB (1024^2); `decmbytes` would be MB.
UNITS = {
    "MiB": "mbytes",
    "bytes": "bytes",
    "percent": "percent",
    "ratio": "percentunit",
    "celsius": "celsius",
    "watts": "watt",
    "MHz": "rotmhz",
    "hertz": "hertz",
    "seconds": "s",
    "bytes_per_second": "Bps",
    "megabytes_per_second": "MBs",
}
# The axis a bounded unit spans.
RANGES = {"percent": (0, 100), "ratio": (0, 1)}
# Grafana's per-second units for what vLLM counts: requests (finished, preempted) and tokens.
REQUESTS_PER_SECOND = "reqps"
TOKENS_PER_SECOND = "count:tok/s"  # Grafana's custom count unit: SI-scaled, "1.2K tok/s"


def var_matcher(label: str, var: str) -> str:
    return f'{label}=~"${var}"'


@dataclass(frozen=True)
class Roles:
    """Label names the dashboards filter and join on, all derived from config."""

    cluster: str | None
    namespace: str  # vLLM target namespace (scrape label)
    pod: str  # vLLM target pod (scrape label)
    host: str  # dcgm-exporter host label (config.dcgm.hostname_label)
    host_others: tuple[str, ...]  # the other spellings: in legends and the host filter, for mixed fleets
    uuid: str  # the GPU part of the DCGM identity
    wl_namespace: str  # namespace of the pod holding a GPU, as DCGM labels it
    wl_pod: str
    gpu_index: str  # dcgm-exporter's per-host GPU index label
    mig_id: str  # the MIG instance label, part of the GPU identity
    mig_profile: str
    model: str = VLLM_MODEL
    engine: str = VLLM_ENGINE

    @property
    def host_spellings(self) -> tuple[str, ...]:
        """Every host label, the configured one first."""
        return (self.host, *self.host_others)

    @classmethod
    def of(cls, model: Model) -> "Roles":
        cfg, labels = model.config, model.builder.labels
        gpu = labels.dcgm.labels
        where = model.spec.locate("config", "config", "identity")
        model_ident = [x for x in cfg.identity.model if x != VLLM_MODEL]
        engine_ident = [x for x in cfg.identity.vllm if x not in cfg.identity.model and x != VLLM_ENGINE]
        gpu_ident = [x for x in cfg.identity.dcgm if x != gpu.mig_instance]
        problems = []
        if (
            VLLM_MODEL not in cfg.identity.model
            or VLLM_MODEL not in cfg.identity.vllm
            or VLLM_ENGINE not in cfg.identity.vllm
        ):
            problems.append(
                f"the dashboards need {VLLM_MODEL} in identity.model and identity.vllm, "
                f"and {VLLM_ENGINE} in identity.vllm"
            )
        if len(model_ident) != 1 or len(engine_ident) != 1 or len(gpu_ident) != 1:
            problems.append(
                "the dashboards need identity.model = [<namespace label>, model_name], identity.vllm = "
                "[<namespace label>, <pod label>, model_name, "
                f"engine] and identity.dcgm = [<uuid label>, {gpu.mig_instance}]"
            )
        if problems:
            raise SpecErrors([SpecError(p, where) for p in problems])
        return cls(
            cluster=cfg.cluster_label,
            namespace=model_ident[0],
            pod=engine_ident[0],
            host=labels.host,
            host_others=tuple(h for h in labels.host_spellings if h != labels.host),
            uuid=gpu_ident[0],
            wl_namespace=labels.workload_namespace,
            wl_pod=labels.workload_pod,
            gpu_index=gpu.gpu,
            mig_id=gpu.mig_instance,
            mig_profile=gpu.mig_profile,
        )


class DashboardContext:
    """What all dashboards share: the model, the settings, label roles, variable matchers, alerts."""

    def __init__(self, model: Model, settings: Settings):
        self.model = model
        self.settings = settings
        self.roles = Roles.of(model)
        self.alerts = model.alerts()
        self.recorded = {r.signal for r in model.records()}
        self.record_labels = promql_labels.record_labels(model.records())
        self.rate_rules, self.quantile_rules = recorded.rules(model.records(), model.builder)

    # -- identities --------------------------------------------------------------------------------
    def identity(self, level: str) -> list[str]:
        """The labels of one GPU, engine, model or deployment; none for everything the variables
        select."""
        if level == "deployment":
            return [label for label in self.identity("model") if label != self.role_label]
        return [] if level == "all" else self.model.builder.labels.identity(level)

    @property
    def role_label(self) -> str | None:
        role = self.model.config.role
        return role.label if role is not None else None

    @property
    def cluster_labels(self) -> list[str]:
        return [self.roles.cluster] if self.roles.cluster else []

    @property
    def pod_identity(self) -> list[str]:
        return self.cluster_labels + [self.roles.namespace, self.roles.pod]

    # -- what the variables select ---------------------------------------------------------------
    @property
    def cluster_filter(self) -> list[str]:
        return [var_matcher(self.roles.cluster, "cluster")] if self.roles.cluster else []

    @property
    def namespace_filters(self) -> list[str]:
        """vLLM series of the selected cluster and namespace."""
        return self.cluster_filter + [var_matcher(self.roles.namespace, "namespace")]

    @property
    def model_filters(self) -> list[str]:
        """vLLM series of the selected cluster, namespace and model (and role and track, where
        configured)."""
        dims = [var_matcher(label, var) for var, _, label in self.dimensions]
        return self.namespace_filters + [var_matcher(self.roles.model, "model")] + dims

    @property
    def deployment_filters(self) -> list[str]:
        """vLLM series of the selected models, every role: a deployment's prefill and decode pools
        serve the same requests, so what it costs is read over both whatever $role selects."""
        role = self.role_label
        return [m for m in self.model_filters if role is None or m != var_matcher(role, "role")]

    @property
    def dimensions(self) -> list[tuple[str, str, str]]:
        """(variable, title, label) of each configured deployment dimension (config.role, .track)."""
        cfg = self.model.config
        wanted = (("role", "Role (prefill/decode)", cfg.role), ("track", "Track", cfg.track))
        return [(var, title, dim.label) for var, title, dim in wanted if dim is not None]

    @property
    def engine_filters(self) -> list[str]:
        """vLLM series of the selected models, narrowed to the selected pods and engines."""
        return self.model_filters + [
            var_matcher(self.roles.pod, "pod"),
            var_matcher(self.roles.engine, "engine"),
        ]

    @property
    def one_model_filters(self) -> list[str]:
        """One model exactly: a panel repeated per model sees one value of $model in each copy."""
        return self.namespace_filters + [f"{self.roles.model}={ONE_MODEL}"]

    @property
    def workload_filters(self) -> list[str]:
        """DCGM series of GPUs held by pods in the selected cluster and namespace."""
        return self.cluster_filter + [var_matcher(self.roles.wl_namespace, "namespace")]

    def selection(self, vllm: list[str] = (), dcgm: list[str] = (), host: bool = False) -> Selection:
        """What a group of panels reads, narrowed by these matchers (and by $host under every host
        spelling when `host`)."""
        return Selection(self, list(vllm), list(dcgm), self.roles.host_spellings if host else ())

    # -- alerts -------------------------------------------------------------------------------------
    def alerts_of(self, signal: str) -> list[AlertRule]:
        return [a for a in self.alerts if a.spec.signal == signal]

    def absence_alerts(self, source: str) -> list[AlertRule]:
        """The 'never silently blind' alerts of a source."""
        return [a for a in self.alerts if a.spec.absence and a.spec.absence.source == source]

    def saturates(self, signal: str) -> bool:
        """Whether a signal fills up (the catalog's saturation flag): shown from 0 to 1, orange early."""
        sig, builder = self.model.signal(signal), self.model.builder
        name = sig.metric or sig.numerator
        if builder.is_dcgm_field(name):
            return builder.catalog.dcgm.field(name).saturation
        entry = builder.catalog.lookup(name)
        return bool(entry and entry.saturation)

    def threshold(self, signal: str, quantile: float | None = None) -> float | None:
        """The resolved threshold (overrides applied) of the alert on this signal (and quantile)."""
        for a in self.alerts_of(signal):
            if quantile is None or a.spec.quantile == quantile:
                return a.spec.threshold
        return None

    def alert_names(self, uid: str) -> str:
        names = sorted({a.alert for a in self.alerts if a.spec.dashboard and a.spec.dashboard.uid == uid})
        return "|".join(names)

    def firing(self, *matchers: str) -> str:
        return promql.selector("ALERTS", 'alertstate="firing"', *matchers)

    # -- units ----------------------------------------------------------------------------------------
    def unit(self, metric: str, default: str = "short") -> str:
        """The Grafana unit of a DCGM field (in the configured profile) or catalog metric."""
        return UNITS.get(self.model.builder.unit(metric) or "", default)

    def value_range(self, metric: str) -> dict[str, float]:
        """min and max of a panel showing a bounded unit (percent, ratio); none for others."""
        bounds = RANGES.get(self.model.builder.unit(metric) or "")
        return {"min": bounds[0], "max": bounds[1]} if bounds else {}

    def metric(self, name: str) -> str:
        """The metric name a DCGM field has in the configured profile (any other name as it is)."""
        return self.model.builder.metric_name(name)

    @property
    def liveness(self) -> str:
        """The vLLM gauge every running engine exports (catalog/vllm.yaml)."""
        return self.model.builder.liveness

    # -- legends ------------------------------------------------------------------------------------
    def model_legend(self, suffix: str = "", level: str = "model") -> str:
        """The legend of a series per model (or per deployment: every role together)."""
        roles, kept = self.roles, self.identity(level)
        dims = "".join(f" {{{{{label}}}}}" for _, _, label in self.dimensions if label in kept)
        return f"{{{{{roles.namespace}}}}}/{{{{{roles.model}}}}}{dims}" + (f" {suffix}" if suffix else "")

    def engine_legend(self, suffix: str = "") -> str:
        return f"{{{{{self.roles.pod}}}}} engine {{{{{self.roles.engine}}}}}" + (
            f" {suffix}" if suffix else ""
        )

    def gpu_legend(self, physical: bool = False) -> str:
        roles = self.roles
        mig = "" if physical else f" {{{{{roles.mig_profile}}}}} {{{{{roles.mig_id}}}}}"
        hosts = "".join(f"{{{{{h}}}}}" for h in roles.host_spellings)
        return f"{hosts} GPU {{{{{roles.gpu_index}}}}}{mig}"

    def whole_gpu(self, field: str) -> bool:
        """Whether a DCGM field describes the whole GPU (repeated on each of its MIG instances)."""
        return self.model.builder.catalog.dcgm.field(field).scope == "gpu"

    def field_legend(self, field: str) -> str:
        return self.gpu_legend(physical=self.whole_gpu(field))

    # -- variables, links, annotations ----------------------------------------------------------------
    def datasource_variable(self) -> grafana.Variable:
        ds = self.settings.defaults.datasource
        return grafana.Variable(
            grafana.DS_VAR, "Data source", kind="datasource", current=(ds.name, ds.uid), regex=ds.regex
        )

    def cluster_variable(self, metric_selector: str) -> list[grafana.Variable]:
        if not self.roles.cluster:
            return []
        return [
            grafana.Variable(
                "cluster",
                "Cluster",
                query=f"label_values({metric_selector}, {self.roles.cluster})",
                multi=True,
                include_all=True,
            )
        ]

    def label_values(self, metric: str, label: str, *matchers: str) -> str:
        """A variable query: the values of `label` on `metric`, narrowed by the variables before it."""
        return f"label_values({self.selection().select(metric, *matchers)}, {label})"

    def deployment_variables(
        self, model_label: str, multi: bool, recorded: str | None = None
    ) -> list[grafana.Variable]:
        """datasource, cluster, namespace and model, read from vLLM's liveness series, or from the
        `recorded` series (a recording rule that holds only the models the board shows)."""
        roles, live = self.roles, self.liveness

        def values(label: str, *matchers: str) -> str:
            if recorded is None:
                return self.label_values(live, label, *matchers)
            return f"label_values({promql.selector(recorded, *matchers)}, {label})"

        return [
            self.datasource_variable(),
            *self.cluster_variable(recorded or self.selection().select(live)),
            grafana.Variable(
                "namespace",
                "Namespace",
                query=values(roles.namespace, *self.cluster_filter),
                multi=multi,
                include_all=multi,
            ),
            grafana.Variable(
                "model",
                model_label,
                query=values(roles.model, *self.namespace_filters),
                multi=multi,
                include_all=multi,
            ),
            *(
                grafana.Variable(
                    var,
                    title,
                    query=values(label, *self.namespace_filters, var_matcher(roles.model, "model")),
                    multi=True,
                    include_all=True,
                )
                for var, title, label in self.dimensions
            ),
        ]

    def links(self) -> list[grafana.Link]:
        tag = self.settings.defaults.tags[0]
        return [grafana.Link("servewatch dashboards", kind="dashboards", tags=(tag,), as_dropdown=False)]

    def board_url(self, name: str, params: dict[str, str]) -> str:
        """A link to another dashboard: its variables from `params`, and the datasource, cluster and
        time range of this one."""
        board = self.settings.board(name)
        kept = ["${datasource:queryparam}"] + (["${cluster:queryparam}"] if self.roles.cluster else [])
        query = "&".join([f"var-{k}={v}" for k, v in params.items()] + kept + ["${__url_time_range}"])
        return f"/d/{board.uid}/{slug(board.title)}?{query}"

    def firing_annotation(
        self, title: str, boards: tuple[str, ...], filters: list[str]
    ) -> list[grafana.Annotation]:
        """Firing alerts that link to any of `boards`, drawn on the time series panels."""
        names = "|".join(x for x in (self.alert_names(self.settings.board(n).uid) for n in boards) if x)
        if not names:
            return []
        return [grafana.Annotation(title, self.firing(f'alertname=~"{names}"', *filters), tags="severity")]

    def new_dashboard(self, name: str, description: str) -> grafana.ClassicDashboard:
        settings = self.settings
        board, time = settings.board(name), settings.time(name)
        return grafana.ClassicDashboard(
            uid=board.uid,
            title=board.title,
            description=description,
            tags=tuple(settings.defaults.tags),
            refresh=settings.refresh(name),
            time_from=time.from_,
            time_to=time.to,
            timezone=settings.defaults.timezone,
            links=self.links(),
        )
