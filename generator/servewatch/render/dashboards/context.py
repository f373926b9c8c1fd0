"""What the three dashboards share: the label roles taken from config, and the context with its
query helpers (identities, signals, joins between vLLM pods and the GPUs they hold, legends) and
the pieces every dashboard starts from (variables, links, firing-alert annotations)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ... import grafana as g
from ...errors import SpecError, SpecErrors
from ...spec.dashboards import Settings
from ...model import Model
from ...promql import builders as b
from ...signals import SignalBuilder
from ...spec.schema import Signal

WINDOW = "$__rate_interval"

# vLLM's own labels (not configuration); dcgm-exporter's come from the catalog (catalog/dcgm.yaml).
VLLM_MODEL, VLLM_ENGINE = "model_name", "engine"

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


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def var_matcher(label: str, var: str) -> str:
    return f'{label}=~"${var}"'


@dataclass(frozen=True)
class Roles:
    """Label names the dashboards filter and join on, all derived from config."""

    cluster: str | None
    namespace: str  # vLLM target namespace (scrape label)
    pod: str  # vLLM target pod (scrape label)
    host: str  # dcgm-exporter host label (config.dcgm.hostname_label)
    host_others: tuple[str, ...]  # the other spellings, in legends so mixed exporter versions name the host
    uuid: str  # the GPU part of the DCGM identity
    wl_namespace: str  # namespace of the pod holding a GPU, as DCGM labels it
    wl_pod: str
    gpu_index: str  # dcgm-exporter's per-host GPU index label
    mig_id: str  # the MIG instance label, part of the GPU identity
    mig_profile: str
    model: str = VLLM_MODEL
    engine: str = VLLM_ENGINE

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
    """What all three dashboards share: the model, the settings, label roles and query helpers."""

    def __init__(self, model: Model, settings: Settings):
        self.model = model
        self.settings = settings
        self.r = Roles.of(model)
        self.labels = model.builder.labels
        self.alerts = model.alerts()
        self.alerted = {a.spec.signal for a in self.alerts if a.spec.signal}
        self.recorded = {r.signal for r in model.records()}

    # -- identities and filters ----------------------------------------------------------------
    def ident(self, level: str) -> list[str]:
        return self.labels.identity(level)

    @property
    def cl(self) -> list[str]:
        return [self.r.cluster] if self.r.cluster else []

    @property
    def pod_ident(self) -> list[str]:
        return self.cl + [self.r.namespace, self.r.pod]

    @property
    def physical_gpu(self) -> list[str]:
        """One physical GPU: GPU-scoped fields repeat on each of its MIG instances."""
        return [x for x in self.ident("gpu") if x != self.r.mig_id]

    @property
    def cluster_filter(self) -> list[str]:
        return [var_matcher(self.r.cluster, "cluster")] if self.r.cluster else []

    @property
    def namespace_filters(self) -> list[str]:
        """vLLM series of the selected cluster and namespace."""
        return self.cluster_filter + [var_matcher(self.r.namespace, "namespace")]

    @property
    def model_filters(self) -> list[str]:
        """vLLM series of the selected cluster, namespace and model."""
        return self.namespace_filters + [var_matcher(self.r.model, "model")]

    @property
    def workload_filters(self) -> list[str]:
        """DCGM series of GPUs held by pods in the selected cluster and namespace."""
        return self.cluster_filter + [var_matcher(self.r.wl_namespace, "namespace")]

    # -- builders and signals ----------------------------------------------------------------
    def builder(self, vllm: list[str] = (), dcgm: list[str] = ()) -> SignalBuilder:
        """A SignalBuilder whose selectors also carry the dashboard's variable matchers."""
        cfg = self.model.config
        sel = dict(cfg.selectors)
        for source, extra in (("vllm", vllm), ("dcgm", dcgm)):
            sel[source] = ", ".join(x for x in [sel.get(source, ""), *extra] if x)
        return SignalBuilder(cfg.model_copy(update={"selectors": sel}), self.model.builder.catalog)

    def signal(self, name: str) -> Signal:
        return self.model.signal(name)

    def uses_record(self, name: str) -> bool:
        return name in self.alerted and name in self.recorded

    def show(self, name: str, bld: SignalBuilder, filters: list[str], quantile: float | None = None) -> str:
        """A signal as a panel shows it: its recording rule when an alert watches it, else live."""
        sig = self.signal(name)
        if self.uses_record(name):
            q = [f'quantile="{quantile:g}"'] if quantile is not None else []
            return b.selector(sig.record, *q, *filters)
        return bld.expr(sig, window=WINDOW, quantile=quantile)

    @staticmethod
    def live(kind: str, level: str, metric: str, by: tuple[str, ...] = ()) -> Signal:
        """A signal only a dashboard shows (not recorded)."""
        return Signal(kind=kind, level=level, metric=metric, by=by, record="dashboard:live:expr")

    def rate(self, bld: SignalBuilder, metric: str, level: str, by: tuple[str, ...] = ()) -> str:
        return bld.expr(self.live("rate", level, metric, by), window=WINDOW)

    def threshold(self, signal: str, quantile: float | None = None) -> float | None:
        for a in self.alerts:
            if a.spec.signal == signal and (quantile is None or a.spec.quantile == quantile):
                return a.spec.threshold
        return None

    def unit(self, metric: str, default: str = "short") -> str:
        """The Grafana unit of a DCGM field (in the configured profile) or catalog metric."""
        return UNITS.get(self.model.builder.unit(metric) or "", default)

    def value_range(self, metric: str) -> dict[str, float]:
        """min and max of a panel showing a bounded unit (percent, ratio); none for others."""
        bounds = RANGES.get(self.model.builder.unit(metric) or "")
        return {"min": bounds[0], "max": bounds[1]} if bounds else {}

    @property
    def liveness(self) -> str:
        """The vLLM gauge every running engine exports (catalog/vllm.yaml)."""
        return self.model.builder.liveness

    def metric(self, name: str) -> str:
        """The metric name a panel description should quote for a DCGM field."""
        return self.model.builder.metric_name(name)

    def alert_names(self, uid: str) -> str:
        names = sorted(a.alert for a in self.alerts if a.spec.dashboard and a.spec.dashboard.uid == uid)
        return "|".join(names)

    # -- joins ---------------------------------------------------------------------------------
    def pods_of_models(self, bld: SignalBuilder) -> str:
        """(cluster, namespace, pod, model_name) of every pod serving a model, from vLLM's own series;
        with the kube_pod_labels join (a moe-deployment setting), also every other pod of the same
        leader/worker group."""
        r = self.r
        direct = b.agg("group", self.pod_ident + [r.model], bld.select(self.liveness))
        kube = self.settings.board("moe-deployment").kube_pod_labels
        if kube is None or not kube.enabled:
            return direct
        group = kube.group_label
        kpl = b.selector("kube_pod_labels", f'{group}!=""', *self.namespace_filters)
        group_ident = self.cl + [r.namespace, group]
        groups = b.agg(
            "group", group_ident + [r.model], b.with_context(kpl, direct, self.pod_ident, [r.model])
        )
        members = b.agg(
            "group", self.pod_ident + [r.model], b.with_context(kpl, groups, group_ident, [r.model])
        )
        return b.any_of(direct, members)

    def as_workload(self, pods: str) -> str:
        """vLLM pod labels renamed to the names DCGM gives the pod holding a GPU."""
        r = self.r
        return b.copy_label(b.copy_label(pods, r.namespace, r.wl_namespace), r.pod, r.wl_pod)

    def gpus_held(self, gpu_expr: str, pods: str) -> str:
        """The per-GPU series of `gpu_expr` whose GPU is held by one of `pods`."""
        return b.only_where(gpu_expr, self.as_workload(pods), self.cl + [self.r.wl_namespace, self.r.wl_pod])

    def whole_gpu(self, field: str) -> bool:
        """Whether a DCGM field describes the whole GPU (repeated on each of its MIG instances)."""
        return self.model.builder.catalog.dcgm.field(field).scope == "gpu"

    def per_gpu(self, bld: SignalBuilder, field: str, extra: list[str] = ()) -> str:
        """One series per GPU (a whole-GPU field) or MIG instance with the labels its legend names."""
        return b.dedup(bld.select(field), self.gpu_by(self.whole_gpu(field)) + list(extra))

    def gpu_by(self, physical: bool = False) -> list[str]:
        """Identity plus the labels a GPU legend names (every host spelling: absent ones cost nothing)."""
        r = self.r
        ident = self.physical_gpu if physical else self.ident("gpu")
        context = [r.host, *r.host_others, r.gpu_index] + ([] if physical else [r.mig_profile])
        return ident + [c for c in context if c not in ident]

    # -- legends -------------------------------------------------------------------------------
    def gpu_legend(self, physical: bool = False) -> str:
        r = self.r
        mig = "" if physical else f" {{{{{r.mig_profile}}}}} {{{{{r.mig_id}}}}}"
        hosts = "".join(f"{{{{{h}}}}}" for h in (r.host, *r.host_others))
        return f"{hosts} GPU {{{{{r.gpu_index}}}}}{mig}"

    def field_legend(self, field: str) -> str:
        return self.gpu_legend(physical=self.whole_gpu(field))

    def gpu_target(self, bld: SignalBuilder, field: str, legend_suffix: str = "") -> g.Target:
        """A DCGM field per GPU or MIG instance, with the legend that names it."""
        return g.Target(self.per_gpu(bld, field), self.field_legend(field) + legend_suffix)

    def engine_legend(self) -> str:
        return f"{{{{{self.r.pod}}}}} engine {{{{{self.r.engine}}}}}"

    # -- shared pieces -----------------------------------------------------------------------------
    def datasource_var(self) -> g.Variable:
        ds = self.settings.defaults.datasource
        return g.Variable(g.DS_VAR, "Data source", kind="datasource", current=(ds.name, ds.uid))

    def cluster_var(self, metric_selector: str) -> list[g.Variable]:
        if not self.r.cluster:
            return []
        return [
            g.Variable(
                "cluster",
                "Cluster",
                query=f"label_values({metric_selector}, {self.r.cluster})",
                multi=True,
                include_all=True,
            )
        ]

    def label_values(self, metric: str, label: str, *matchers: str) -> str:
        """A variable query: the values of `label` on `metric`, narrowed by the variables before it."""
        return f"label_values({self.builder().select(metric, *matchers)}, {label})"

    def deployment_vars(self, model_label: str, multi: bool) -> list[g.Variable]:
        """datasource, cluster, namespace and model, read from vLLM's liveness series."""
        r, live = self.r, self.liveness
        return [
            self.datasource_var(),
            *self.cluster_var(self.builder().select(live)),
            g.Variable(
                "namespace",
                "Namespace",
                query=self.label_values(live, r.namespace, *self.cluster_filter),
                multi=multi,
                include_all=multi,
            ),
            g.Variable(
                "model",
                model_label,
                query=self.label_values(live, r.model, *self.namespace_filters),
                multi=multi,
                include_all=multi,
            ),
        ]

    def links(self) -> list[g.Link]:
        tag = self.settings.defaults.tags[0]
        return [g.Link("servewatch dashboards", kind="dashboards", tags=(tag,), as_dropdown=False)]

    def board_url(self, name: str, params: dict[str, str]) -> str:
        board = self.settings.board(name)
        query = "&".join([f"var-{k}={v}" for k, v in params.items()] + ["${__url_time_range}"])
        return f"/d/{board.uid}/{slug(board.title)}?{query}"

    def firing(self, *matchers: str) -> str:
        return b.selector("ALERTS", 'alertstate="firing"', *matchers)

    def firing_annotation(
        self, title: str, boards: tuple[str, ...], filters: list[str]
    ) -> list[g.Annotation]:
        """Firing alerts that link to any of `boards`, drawn on the time series panels."""
        names = "|".join(x for x in (self.alert_names(self.settings.board(n).uid) for n in boards) if x)
        if not names:
            return []
        return [g.Annotation(title, self.firing(f'alertname=~"{names}"', *filters), tags="severity")]

    def new_dashboard(self, name: str, description: str) -> g.Dashboard:
        s = self.settings
        board, t = s.board(name), s.time(name)
        return g.Dashboard(
            uid=board.uid,
            title=board.title,
            description=description,
            tags=tuple(s.defaults.tags),
            refresh=s.refresh(name),
            time_from=t.from_,
            time_to=t.to,
            timezone=s.defaults.timezone,
            links=self.links(),
        )
