"""What a group of panels reads, narrowed by the dashboard's variables, and the one place each
quantity is read from.

A panel never writes PromQL for a quantity itself: it asks its Selection for a signal, a rate, a
histogram's bucket rates, a quantile, a mean or a share. Each of those methods reads a recording rule
where one records that quantity for every series the selection narrows to, and computes it live over
`$__rate_interval` otherwise; so a panel moves to a new recording rule by changing one method here.

Recording rules are recognised by their expressions (recorded.py), not their names: a rate of a
counter or of a histogram's buckets per some labels is read, summed up to the level a panel wants,
wherever those labels include the level's and the ones the selection narrows by; a quantile rule is
read at exactly its labels. So bucket-rate and per-engine quantile rules are used as soon as they are
generated, and everything else is computed live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ...model import AlertRule
from ...promql import builders as promql
from ...signals import SignalBuilder
from ...spec.deployment import COUNTING_ROLES
from .recorded import RateRule

if TYPE_CHECKING:
    from .context import DashboardContext

WINDOW = "$__rate_interval"


class Selection:
    def __init__(
        self,
        ctx: "DashboardContext",
        vllm: list[str],
        dcgm: list[str],
        host_spellings: Sequence[str] = (),
    ):
        self.ctx = ctx
        self.vllm_matchers = vllm
        self.dcgm_matchers = dcgm
        config = ctx.model.config
        selectors = dict(config.selectors)
        for source, extra in (("vllm", vllm), ("dcgm", dcgm)):
            selectors[source] = ", ".join(x for x in [selectors.get(source, ""), *extra] if x)
        # `up` of every source, in the selected clusters only
        targets = {
            source: ", ".join(m for m in [matchers, *ctx.cluster_filter] if m)
            for source, matchers in config.targets.items()
        }
        self.signals = _HostNarrowed(
            config.model_copy(update={"selectors": selectors, "targets": targets}),
            ctx.model.builder.catalog,
            tuple(host_spellings),
        )

    # -- signals: their recording rule where one exists ----------------------------------------------
    def signal(self, name: str, quantile: float | None = None) -> str:
        """A signal as the alerts see it: its recording rule, narrowed by the variables the rule's
        series carry; a GPU rule that keeps only the GPU's identity, joined with the labels of the
        selected GPUs; computed live when it is not recorded (or the selection narrows by a label
        the rule aggregated away, as pod and engine on a per-model rule)."""
        sig = self.ctx.model.signal(name)
        if sig.kind == "quantile":
            return self.quantile(sig.metric, sig.quantiles[0] if quantile is None else quantile, sig.level)
        if self._recorded(name):
            return self.signals.narrow(sig.record, self._matchers(sig.level), dcgm=sig.level == "gpu")
        if self._in_context(name):
            return self._gpu_record_in_context(name)
        return self.signals.expr(sig, window=WINDOW)

    def past_threshold(self, alert: AlertRule) -> str:
        """The series of an alert's signal past its threshold, narrowed by the selection: what the
        alert fires on once they stay there for its `for`."""
        spec = alert.spec
        if self._in_context(spec.signal):
            return self._gpu_record_in_context(
                spec.signal, lambda rule: f"({promql.compare(rule, spec.op, spec.threshold)})"
            )
        return promql.compare(self.signal(spec.signal, spec.quantile), spec.op, spec.threshold)

    def past_threshold_recorded(self, alert: AlertRule) -> str:
        """past_threshold read from the recording rule alone, narrowed only by the labels it keeps:
        no join to the raw series for host or namespace, so a first-screen stat stays a rule read."""
        spec = alert.spec
        if not self._in_context(spec.signal):
            return self.past_threshold(alert)
        sig = self.ctx.model.signal(spec.signal)
        known = self.ctx.record_labels[sig.record].known
        kept = [m for m in self.dcgm_matchers if {label for label, _, _ in promql.parse_matchers(m)} <= known]
        return (
            f"({promql.compare(self.signals.narrow(sig.record, kept, dcgm=False), spec.op, spec.threshold)})"
        )

    def _in_context(self, name: str) -> bool:
        """Whether a GPU signal's recording rule lacks labels the selection narrows by."""
        sig = self.ctx.model.signal(name)
        return sig.level == "gpu" and name in self.ctx.recorded and not self._recorded(name)

    def _gpu_record_in_context(self, name: str, condition: Callable[[str], str] = lambda rule: rule) -> str:
        """A GPU signal whose recording rule keeps the GPU's identity but not the labels the selection
        narrows by (host, the workload's namespace) or a legend names: the rule's series (under
        `condition`), narrowed by the labels it keeps, with the labels of the selected GPUs attached
        (one series per GPU, cut to one by with_context). The join keeps the rule's values and drops
        the GPUs the selection does not match: what the alert saw, for the selected GPUs only."""
        sig = self.ctx.model.signal(name)
        known = self.ctx.record_labels[sig.record].known
        kept = [m for m in self.dcgm_matchers if {label for label, _, _ in promql.parse_matchers(m)} <= known]
        identity = self.ctx.identity("gpu")
        context = [label for label in self.gpu_labels() if label not in identity]
        rule = condition(self.signals.narrow(sig.record, kept, dcgm=False))
        return promql.with_context(rule, self.select(sig.metric), identity, context)

    def _matchers(self, level: str) -> list[str]:
        return self.dcgm_matchers if level == "gpu" else self.vllm_matchers

    def _narrows_by(self, level: str) -> set[str]:
        """The labels the selection narrows series of this level by."""
        return {label for label, _, _ in promql.parse_matchers(", ".join(self._matchers(level)))}

    def _recorded(self, name: str) -> bool:
        """Whether the signal's recording rule exists and keeps every label the selection narrows by."""
        if name not in self.ctx.recorded:
            return False
        sig = self.ctx.model.signal(name)
        return self._narrows_by(sig.level) <= self.ctx.record_labels[sig.record].known

    # -- counters and histograms ------------------------------------------------------------------------
    def rate(self, metric: str, level: str, by: Sequence[str] = ()) -> str:
        """Per second, per `level` (engine, model, or all of the selection) and `by`: each engine
        counted once (a target scraped twice is deduplicated), then summed up to the level."""
        keep = self.ctx.identity(level) + list(by)
        histograms = self.signals.histograms  # a histogram's series are read in the configured form
        rule = self._rate_rule(metric, keep)
        if rule is not None:
            recorded = promql.selector(rule.record, *self.vllm_matchers)
            return (
                recorded
                if rule.labels == set(keep)
                else promql.agg("sum", histograms.grouping(keep), recorded)
            )
        engine = self.ctx.identity("engine") + list(by)
        per_engine = histograms.deduped_rate(self.select(metric), WINDOW, engine)
        return per_engine if level == "engine" else promql.agg("sum", histograms.grouping(keep), per_engine)

    def _rate_rule(self, metric: str, keep: list[str]) -> RateRule | None:
        """The rate rule of `metric` with the fewest series that keeps `keep` and every label the
        selection narrows by."""
        needed = set(keep) | self._narrows_by("engine")
        fitting = [r for r in self.ctx.rate_rules if r.metric == metric and needed <= r.labels]
        return min(fitting, key=lambda r: (len(r.labels), r.record), default=None)

    def records_bucket_rates(self, metric: str, level: str) -> bool:
        """Whether a recording rule holds `metric`'s bucket rates for every series of the selection."""
        return self._rate_rule(f"{metric}_bucket", self.ctx.identity(level) + ["le"]) is not None

    def bucket_rates(self, metric: str, level: str, by: Sequence[str] = ()) -> str:
        """A histogram's bucket rates per `level` and `le`: what quantiles and heatmaps are made of."""
        return self.rate(f"{metric}_bucket", level, [*by, "le"])

    def quantile(self, metric: str, q: float, level: str, by: Sequence[str] = ()) -> str:
        """The q-quantile per level, from its recording rule when one records it at exactly these
        labels; else from the bucket rates. No result (not NaN) where nothing was observed."""
        keep = self.ctx.identity(level) + list(by)
        if self._narrows_by(level) <= set(keep):
            for rule in self.ctx.quantile_rules:
                if (rule.metric, rule.quantile, rule.labels) == (metric, q, set(keep)):
                    static = [f'{label}="{value}"' for label, value in rule.static]
                    return promql.selector(rule.record, *static, *self.vllm_matchers)
        observed = f"{self.rate(f'{metric}_count', level, by)} > 0"
        return promql.only_where(promql.quantile(q, self.bucket_rates(metric, level, by)), observed, keep)

    def recorded_quantile(self, name: str, q: float) -> str:
        """A quantile signal's own recording rule at quantile q, narrowed by the selection: for
        signals whose histogram only their rules know how to read (a client source's)."""
        sig = self.ctx.model.signal(name)
        keys = set(self.ctx.model.builder.level_identity(sig.metric, sig.level))
        narrow = [
            m for m in self.vllm_matchers if promql.parse_matchers(m)[0][0] in keys
        ]  # not $role, $track
        return promql.selector(sig.record, f'quantile="{q:g}"', *narrow)

    def pool(self, name: str) -> str:
        """An inference pool signal's recording rule, narrowed by the variables its series carry
        (cluster, namespace): a pool names no model, role or track."""
        sig = self.ctx.model.signal(name)
        keys = set(self.ctx.model.builder.level_identity(sig.metric, sig.level))
        narrow = [m for m in self.vllm_matchers if promql.parse_matchers(m)[0][0] in keys]
        return promql.selector(sig.record, *narrow)

    def mean(self, metric: str, level: str) -> str:
        """The mean observation per level: rate(_sum) / rate(_count); none while nothing is observed."""
        return self.share(f"{metric}_sum", f"{metric}_count", level)

    def share(self, part: str, whole: str, level: str) -> str:
        """rate(part) / rate(whole) per level; no value while `whole` does not move."""
        return promql.guarded_div(self.rate(part, level), self.rate(whole, level), self.ctx.identity(level))

    def one_layout(self, metric: str) -> str:
        """1 while every engine of the selection has the same buckets of `metric`: token-count
        histograms follow each deployment's max_model_len, and other layouts must not be added in."""
        engine = self.ctx.identity("engine")
        buckets = self.select(f"{metric}_bucket")
        per_engine = promql.agg(
            "min", [], promql.agg("count", engine, promql.agg("group", engine + ["le"], buckets))
        )
        together = promql.agg("count", [], promql.agg("group", ["le"], buckets))
        classic = f"({per_engine} == on () {together})"
        if not self.signals.histograms.native:
            return classic
        # a native histogram's buckets are no labels to count: 1 while the histogram is there (a sum
        # over different custom buckets is Prometheus' to reconcile or refuse)
        native = promql.agg("group", [], self.select(metric))
        return native if self.signals.histograms.form == "native" else promql.otherwise(classic, native, [])

    def total(self, metric: str, level: str, by: Sequence[str] = ()) -> str:
        """A gauge summed per level and `by`, each engine counted once."""
        per_engine = promql.dedup(self.select(metric), self.ctx.identity("engine") + list(by))
        return promql.agg("sum", self.ctx.identity(level) + list(by), per_engine)

    # -- raw series ---------------------------------------------------------------------------------------
    def select(self, metric: str, *matchers: str) -> str:
        """A raw series (a DCGM field by its name in the configured profile), narrowed."""
        return self.signals.select(metric, *matchers)

    def per_gpu(self, field: str, extra: Sequence[str] = ()) -> str:
        """One series per GPU (a whole-GPU field) or MIG instance, with the labels its legend names."""
        return promql.dedup(self.select(field), self.gpu_labels(self.ctx.whole_gpu(field)) + list(extra))

    def gpu_labels(self, physical: bool = False) -> list[str]:
        """Identity plus the labels a GPU legend names (every host spelling: absent ones cost nothing)."""
        roles = self.ctx.roles
        ident = self.ctx.identity("gpu")
        ident = [x for x in ident if x != roles.mig_id] if physical else ident
        context = [*roles.host_spellings, roles.gpu_index] + ([] if physical else [roles.mig_profile])
        return ident + [c for c in context if c not in ident]

    def up(self, source: str) -> str:
        return self.signals.up(source)

    def targets_up(self, source: str, *matchers: str) -> str:
        """How many of a source's targets answer their scrape (0, not nothing, when none does)."""
        return f"count({self.signals.up(source, ', '.join(matchers))} == 1) or vector(0)"

    def absence(self, alert: AlertRule) -> str:
        """A 'never silently blind' alert's condition, as the rule has it, in the selected clusters."""
        ab = alert.spec.absence
        return self.signals.absence(
            ab.kind, ab.source, self.ctx.model.spec.signals_read(), ab.signal, ab.absent_fires, ab
        )

    # -- joins between vLLM pods and the GPUs they hold ------------------------------------------------------
    def engines_serving(self) -> str:
        """One series per engine serving a model: the liveness gauge every engine exports, read from
        the recording rule of a signal over it where one exists."""
        ctx = self.ctx
        signals = ctx.model.spec.signals.items()
        live = next(
            (name for name, sig in signals if sig.metric == ctx.liveness and sig.level == "engine"), None
        )
        return self.signal(live) if live else promql.dedup(self.select(ctx.liveness), ctx.identity("engine"))

    def serving_pods(self) -> str:
        """(cluster, namespace, pod) of every pod serving a model, with what it serves (pod_serves)."""
        return promql.agg("group", self.ctx.pod_identity + self.pod_serves(), self.engines_serving())

    def pod_serves(self) -> list[str]:
        """The labels of a deployment's identity a pod adds to its own: model_name, and its track
        where configured (a GPU is mapped to a pod, and has them through it)."""
        pod = self.ctx.pod_identity
        return [label for label in self.ctx.identity("deployment") if label not in pod]

    def pods_of_models(self) -> str:
        """Every pod serving a model; with the kube_pod_labels join (a moe-deployment setting), also
        every other pod of the same leader/worker group."""
        roles, ctx, serves = self.ctx.roles, self.ctx, self.pod_serves()
        direct = self.serving_pods()
        kube = ctx.settings.board("moe-deployment").kube_pod_labels
        if kube is None or not kube.enabled:
            return direct
        group = kube.group_label
        kube_pod_labels = promql.selector("kube_pod_labels", f'{group}!=""', *ctx.namespace_filters)
        group_identity = ctx.cluster_labels + [roles.namespace, group]
        groups = promql.agg(
            "group",
            group_identity + serves,
            promql.with_context(kube_pod_labels, direct, ctx.pod_identity, serves),
        )
        members = promql.agg(
            "group",
            ctx.pod_identity + serves,
            promql.with_context(kube_pod_labels, groups, group_identity, serves),
        )
        return promql.any_of(direct, members)

    def as_workload(self, pods: str) -> str:
        """vLLM pod labels renamed to the names DCGM gives the pod holding a GPU."""
        roles = self.ctx.roles
        return promql.copy_label(
            promql.copy_label(pods, roles.namespace, roles.wl_namespace), roles.pod, roles.wl_pod
        )

    def gpus_held(self, gpu_expr: str, pods: str) -> str:
        """The per-GPU series of `gpu_expr` whose GPU is held by one of `pods`."""
        roles = self.ctx.roles
        return promql.only_where(
            gpu_expr, self.as_workload(pods), self.ctx.cluster_labels + [roles.wl_namespace, roles.wl_pod]
        )

    def gpu_cost_terms(self) -> tuple[str, str | None]:
        """(per deployment, price): the GPUs each deployment (a model's identity, every role
        together) holds and the one price per GPU-hour they all cost; or, with prices per GPU model or
        MIG profile, what those GPUs cost per hour, each at its own price, and None."""
        cost = self.ctx.settings.defaults.cost
        if not cost.by_type:
            return self.gpus_per_deployment(), repr(float(cost.price_per_gpu_hour))
        return self._held_per_deployment("sum", self._priced_gpus(cost)), None

    def _priced_gpus(self, cost) -> str:
        """Each GPU's framebuffer series with its price as the value: its MIG profile's, else its GPU
        model's, else the default (`or` keeps the first branch a series is in)."""
        labels = self.signals.catalog.dcgm.labels
        typed = [(labels.mig_profile, k, v) for k, v in sorted(cost.mig_profile_prices.items())]
        typed += [(labels.model, k, v) for k, v in sorted(cost.gpu_model_prices.items())]
        branches = [
            f"{self._fb_ratio_where(f'{label}={promql.string(v)}')} * 0 + {p!r}" for label, v, p in typed
        ]
        branches.append(f"{self.signal('gpu_fb_used_ratio')} * 0 + {float(cost.price_per_gpu_hour)!r}")
        return "(\n  " + "\nor\n  ".join(f"({b})" for b in branches) + "\n)"

    def _fb_ratio_where(self, matcher: str) -> str:
        """The framebuffer ratio of the GPUs whose DCGM series match `matcher`."""
        if self._recorded("gpu_fb_used_ratio"):
            record = self.ctx.model.signal("gpu_fb_used_ratio").record
            return self.signals.narrow(record, [*self.dcgm_matchers, matcher], dcgm=True)
        raw = self.signals.select(self.signals.metric_name("fb_used"), matcher)
        return promql.only_where(self.signal("gpu_fb_used_ratio"), raw, self.ctx.identity("gpu"))

    def gpus_per_deployment(self) -> str:
        """GPUs (and MIG instances) each deployment holds, every role's once: its engines x the
        configured GPUs per engine, or, without that setting, the GPUs whose framebuffer ratio
        dcgm-exporter maps to the deployment's pods."""
        ctx = self.ctx
        per_engine = ctx.settings.defaults.cost.gpus_per_engine
        if per_engine:
            return f"{promql.agg('count', ctx.identity('deployment'), self.engines_serving())} * {per_engine}"
        return self._held_per_deployment("count", self.signal("gpu_fb_used_ratio"))

    def _held_per_deployment(self, how: str, per_gpu: str) -> str:
        """`how` (count, sum) of the per-GPU series `per_gpu` over the GPUs each deployment's pods
        hold, as dcgm-exporter maps GPUs to pods: a GPU carries only its pod, and takes the model
        and track from the vLLM pod it is mapped to."""
        roles, ctx = self.ctx.roles, self.ctx
        held = promql.copy_label(
            promql.copy_label(per_gpu, roles.wl_namespace, roles.namespace), roles.wl_pod, roles.pod
        )
        return promql.agg(
            how,
            ctx.identity("deployment"),
            promql.with_context(held, self.pods_of_models(), ctx.pod_identity, self.pod_serves()),
        )

    def counting(self) -> "Selection":
        """This selection narrowed to the engines each user request is counted once on (decode and
        aggregated, where config.role is set): what a deployment's requests and tokens are read from."""
        matcher = self.ctx.model.builder.labels.role_matcher(COUNTING_ROLES)
        if not matcher:
            return self
        return Selection(
            self.ctx, [*self.vllm_matchers, matcher], self.dcgm_matchers, self.signals.host_spellings
        )


class _HostNarrowed(SignalBuilder):
    """A SignalBuilder whose DCGM series also match `$host` under every host spelling, so a fleet in
    the middle of the Hostname -> hostname rename is filtered whole. The configured spelling comes
    first; the others only match series without it, so an unmixed fleet reads its series once."""

    def __init__(self, config, catalog, host_spellings: tuple[str, ...]):
        super().__init__(config, catalog)
        self.host_spellings = host_spellings

    def select(self, metric: str, *matchers: str) -> str:
        if not self.host_spellings or self.source(self.metric_name(metric)) != "dcgm":
            return super().select(metric, *matchers)
        return self._either_host(lambda extra: super(_HostNarrowed, self).select(metric, *matchers, *extra))

    def narrow(self, record: str, matchers: list[str], dcgm: bool) -> str:
        """A recording rule's series, narrowed (by host too, for a DCGM rule)."""
        if not (self.host_spellings and dcgm):
            return promql.selector(record, *matchers)
        return self._either_host(lambda extra: promql.selector(record, *matchers, *extra))

    def _either_host(self, selector: Callable[[list[str]], str]) -> str:
        spellings = self.host_spellings
        parts = [
            selector([f'{host}=~"$host"', *(f'{before}=""' for before in spellings[:i])])
            for i, host in enumerate(spellings)
        ]
        return f"({' or '.join(parts)})"
