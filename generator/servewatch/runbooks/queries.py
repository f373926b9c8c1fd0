"""Runbook queries as PromQL, built from the same SignalBuilder and promql.builders as the alerts.

`ScopedBuilder` is a SignalBuilder whose every selector also carries filter matchers (from
`investigate --label` or from a firing alert's labels), applied only to series that have the label:
a filter on `model_name` must not empty `vllm:cache_config_info`, which has no such label, and a
vLLM `pod` is the workload pod that dcgm-exporter calls `exported_pod` behind a ServiceMonitor.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..promql import builders as b
from ..signals import SignalBuilder
from ..slo.exprs import REMAINING, SloExprs
from ..spec.schema import Config
from ..spec import runbooks as s

# Labels Prometheus (prometheus-operator) attaches to every scraped series.
TARGET_LABELS = ("job", "instance", "namespace", "pod", "container", "service", "endpoint")
FILTER_RE = re.compile(r"^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)(.*)$", re.S)


def parse_filter(text: str) -> tuple[str, str, str]:
    """`k=v`, `k!=v`, `k=~re`, `k!~re` (value quoted or not) -> (label, op, value)."""
    m = FILTER_RE.match(text)
    if not m:
        raise ValueError(f"label filter {text!r} is not LABEL=VALUE (or !=, =~, !~)")
    label, op, value = m.group(1), m.group(2), m.group(3).strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':  # a quoted PromQL string: undo its escapes
        value = re.sub(r'\\(["\\])', r"\1", value[1:-1])
    return label, op, value


def quoted_matcher(label: str, op: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{label}{op}"{escaped}"'


def workload_renames(sb: SignalBuilder) -> dict[str, str]:
    """The plain workload label (namespace, pod, container) -> the one dcgm-exporter series carry
    under the configured layout (exported_namespace, ... behind a ServiceMonitor), where they differ."""
    plain = sb.catalog.dcgm.workload_labels["plain"].model_dump()
    workload = sb.labels.workload.model_dump()
    return {plain[k]: v for k, v in workload.items() if plain[k] != v}


class ScopedBuilder(SignalBuilder):
    """SignalBuilder that adds filter matchers to every selector whose series carry the label."""

    def __init__(self, config: Config, filters: Iterable[tuple[str, str, str]] = (), signals=None):
        super().__init__(config, signals=signals)
        self.filters = tuple(filters)

    # which labels a series may carry, so a filter is only applied where it can match
    def _known(self, metric: str) -> tuple[set[str], dict[str, str]]:
        cluster = {self.config.cluster_label} if self.config.cluster_label else set()
        name = self.metric_name(metric)
        entry, source = self.catalog.lookup(name), self.source(name)
        if source == "dcgm":
            dcgm = self.catalog.dcgm
            # dcgm-exporter's own layout in every profile and host spelling (catalog/dcgm.yaml)
            known = {*dcgm.labels.all(), *dcgm.host_labels, *dcgm.driver_labels()}
            known |= set(self.labels.identity("gpu")) | set(self.labels.gpu_context()) | cluster
            known |= {"job", "instance", "service", "endpoint"}
            layouts = dcgm.workload_labels.values()
            known |= {label for w in layouts for label in w.model_dump().values()} - set(TARGET_LABELS)
            # a vLLM pod is the workload pod: filters name it the way the configured layout does
            rename = workload_renames(self)
            known |= set(TARGET_LABELS) - set(rename)
            return known, rename
        known = set(TARGET_LABELS) | cluster
        # a GPU alert names the workload as dcgm-exporter's labels do; on vLLM series that is the plain label
        plain = self.catalog.dcgm.workload_labels["plain"].model_dump()
        rename = {
            label: plain[role]
            for layout in self.catalog.dcgm.workload_labels.values()
            for role, label in layout.model_dump().items()
            if label != plain[role]
        }
        if entry is not None:
            known |= set(entry.labels)
        if source == "vllm":
            known |= set(self.labels.identity("engine")) | set(self.labels.identity("model"))
            if entry is not None and entry.name == "vllm:cache_config_info":
                known -= {"model_name"}  # info series without model_name (vllm-metrics.md §2.1)
        return known, rename

    def filter_matchers(self, metric: str) -> list[str]:
        known, rename = self._known(metric)
        out = []
        for label, op, value in self.filters:
            label = rename.get(label, label)
            if label in known:
                out.append(quoted_matcher(label, op, value))
        return out

    def applicable(self, metric: str) -> bool:
        """Whether every filter could be applied to this metric's series."""
        return len(self.filter_matchers(metric)) == len(self.filters)

    def select(self, metric: str, *matchers: str) -> str:
        return super().select(metric, *matchers, *self.filter_matchers(metric))

    def up(self, source: str, extra: str = "") -> str:
        target = set(TARGET_LABELS) | ({self.config.cluster_label} if self.config.cluster_label else set())
        own = [quoted_matcher(label, op, value) for label, op, value in self.filters if label in target]
        return b.selector("up", self.config.targets[source], extra, *own)

    def names(self, source: str, pattern: str) -> str:
        own = []
        for label, op, value in self.filters:
            known, rename = self._known("fb_used" if source == "dcgm" else self.liveness)
            label = rename.get(label, label)
            if label in known:
                own.append(quoted_matcher(label, op, value))
        return b.selector(
            "", quoted_matcher("__name__", "=~", pattern), self.config.selectors.get(source, ""), *own
        )


class Queries:
    """Turn a runbook step's query into PromQL for one alert."""

    def __init__(self, model, builder: SignalBuilder | None = None):
        self.model = model
        self.sb = builder or model.builder
        self.window = model.config.rate_window

    # -- label helpers ------------------------------------------------------------------
    def tokens(self, names: Iterable[str]) -> list[str]:
        toks = self.sb.labels.tokens()
        out = []
        for n in names:
            m = re.fullmatch(r"\[\[([a-z_]+)\]\]", n)
            out.append(toks[m.group(1)] if m else n)
        return out

    def identity(self, level: str) -> list[str]:
        return self.sb.labels.identity(level)

    def _unit(self, level: str) -> list[str]:
        """What one raw series is deduplicated to before summing up to the level."""
        return self.identity("engine") if level in ("engine", "model") else self.identity(level)

    def _roll(self, series: str, level: str, by: list[str], keep: list[str], op: str = "sum") -> str:
        """Deduplicate to the unit (plus `keep`), then aggregate to the level (plus `by`)."""
        return self._up_to(b.dedup(series, self._unit(level) + by + keep), level, by, keep, op)

    def _up_to(self, per_unit: str, level: str, by: list[str], keep: list[str], op: str = "sum") -> str:
        """A per-unit vector aggregated to the level (plus `by`)."""
        if set(self.identity(level)) == set(self._unit(level)) and not keep:
            return per_unit
        return b.agg(op, self.identity(level) + by, per_unit)

    def rate_at(self, metric: str, level: str, matchers: str = "", by: list[str] = ()) -> str:
        """Rate per level; a histogram's _count or _sum read in the configured histogram form."""
        keep = [label for label, _, _ in b.parse_matchers(matchers)] if matchers else []
        keep = [k for k in keep if k not in by]
        unit = self._unit(level) + list(by) + keep
        per_unit = self.sb.histograms.deduped_rate(self.sb.select(metric, matchers), self.window, unit)
        return self._up_to(per_unit, level, list(by), keep)

    # -- the kinds ----------------------------------------------------------------------
    def build(self, q, alert) -> str:
        expr = getattr(self, f"_{q.kind}")(q, alert)
        if getattr(q, "change", None):
            return b.guarded_div(expr, self._earlier(expr, q.change), self.result_labels(q))
        return expr

    def result_labels(self, q) -> list[str]:
        """The labels that identify one result series of a query kind (what a comparison matches on)."""
        if q.kind == "signal":
            return (
                self.tokens(q.by)
                if q.agg
                else self.identity(self.model.signal(q.signal).level) + list(self.model.signal(q.signal).by)
            )
        return self.identity(q.level) + self.tokens(getattr(q, "by", ()))

    def _earlier(self, expr: str, ago: str) -> str:
        """The same expression `ago` earlier: a subquery (offset applies to a whole expression only
        through one), its newest point taken. A function application, not a binary operation."""
        return f"last_over_time(({expr})[{self.window}:{self.model.config.scrape_interval}] offset {ago})"

    def grouped(self, by: list[str]) -> SignalBuilder:
        """This builder, keeping only series that carry every grouping label: a GPU no workload is
        mapped to belongs to no deployment, and idle devices must not make up a group of their own."""
        if not by:
            return self.sb
        extra = tuple((label, "!=", "") for label in by)
        return ScopedBuilder(self.model.config, getattr(self.sb, "filters", ()) + extra)

    def _signal(self, q: s.SignalQuery, alert) -> str:
        sig = self.model.signal(q.signal)
        if not q.agg:
            return self._guarded(q.signal, self.sb.expr(sig, quantile=q.quantile), alert)
        by = self.tokens(q.by)
        return b.agg(q.agg, by, self.grouped(by).expr(sig, quantile=q.quantile))

    def _guarded(self, signal: str, expr: str, alert) -> str:
        """The alert's own signal only where the alert can fire: with a `min_traffic` guard, a model
        with a handful of requests (one failed of three) is no workload to judge."""
        spec = alert.spec if alert is not None else None
        guard = getattr(spec, "min_traffic", None)
        if guard is None or getattr(spec, "signal", None) != signal:
            return expr
        sig = self.model.signal(signal)
        traffic = b.compare(self.sb.denominator(sig), ">=", guard)
        return b.only_where(expr, traffic, self.identity(sig.level))

    def _quantile(self, q: s.QuantileQuery, alert) -> str:
        return self.sb.histogram_quantile(
            q.metric, q.quantile, self.window, q.level, tuple(self.tokens(q.by))
        )

    def _mean(self, q: s.MeanQuery, alert) -> str:
        total = self.rate_at(f"{q.metric}_sum", q.level)
        count = self.rate_at(f"{q.metric}_count", q.level)
        return b.guarded_div(total, count, self.identity(q.level))

    def _rate(self, q: s.RateQuery, alert) -> str:
        return self.rate_at(q.metric, q.level, q.matchers, self.tokens(q.by))

    def _ratio(self, q: s.RatioQuery, alert) -> str:
        num = self.rate_at(q.numerator, q.level, q.numerator_matchers)
        den = self.rate_at(q.denominator, q.level, q.denominator_matchers)
        return b.guarded_div(num, den, self.identity(q.level))

    def _gauge(self, q: s.GaugeQuery, alert) -> str:
        series = self.sb.select(q.metric, q.matchers)
        by = self.tokens(q.by)
        if q.level == "gpu":
            ident = self.identity("gpu")
            per_gpu = b.dedup(series, ident + by)
            context = [c for c in self.sb.labels.gpu_context() if c not in by]
            return b.with_context(per_gpu, self.sb.select(q.metric), ident, context)
        per_engine = b.dedup(series, self.identity("engine") + by)
        return per_engine if q.level == "engine" else b.agg(q.agg, self.identity(q.level) + by, per_engine)

    def _trend(self, q: s.TrendQuery, alert) -> str:
        # deriv() is a function over a range like rate(); promql.builders only has rate(), and this
        # is no binary operation, so it is spelled here in the same shape.
        series = f"deriv({self.sb.select(q.metric)}[{q.window}])"
        return self._roll(series, q.level, [], [], op="max")

    def _imbalance(self, q: s.ImbalanceQuery, alert) -> str:
        by = self.tokens(q.by)
        sig = self.grouped(by).expr(self.model.signal(q.signal))
        return b.guarded_div(b.agg("max", by, sig), b.agg("avg", by, sig), by)

    def _names(self, q: s.NamesQuery, alert) -> str:
        return b.agg("count", self.tokens(q.by), self._name_selector(q.source, q.pattern))

    def _labels(self, q: s.LabelsQuery, alert) -> str:
        labels = list(dict.fromkeys(self.tokens(q.labels)))
        return b.agg(
            "count",
            labels,
            self.sb.select(q.metric) if q.metric else self._name_selector(q.source, q.pattern),
        )

    def _name_selector(self, source: str, pattern: str) -> str:
        if isinstance(self.sb, ScopedBuilder):
            return self.sb.names(source, pattern)
        return b.selector(
            "", quoted_matcher("__name__", "=~", pattern), self.model.config.selectors.get(source, "")
        )

    def _up(self, q: s.UpQuery, alert) -> str:
        return b.agg("max", self.sb.labels.target(), self.sb.up(q.source))

    def _slo(self, q: s.SloQuery, alert) -> str:
        name = q.slo or alert.spec.slo
        x = SloExprs(self.sb)
        # the firing alert's (or --label) filters on the grouping labels the SLO recordings carry
        own = [quoted_matcher(*f) for f in getattr(self.sb, "filters", ()) if f[0] in x.grouping]
        if q.measure == "burn_rate":
            return x.burn_rate(name, q.window, *own)
        if q.measure == "error_ratio":
            return x.recorded(x.error_record(q.window), name, *own)
        if q.measure == "events":
            return x.events_in(name, q.window, *own)
        if q.measure == "unjudged":
            return x.unjudged_in(name, q.window, *own)
        return x.recorded(REMAINING, name, *own)

    def _absence(self, q: s.AbsenceQuery, alert) -> str:
        ab = alert.spec.absence if alert is not None else None
        kind = q.absence or (ab.kind if ab else None)
        source = q.source or (ab.source if ab else None)
        signal = q.signal or (ab.signal if ab else None)
        own = ab if ab is not None and ab.kind == kind else None  # the alert's options of that kind
        return self.sb.absence(
            kind, source, self.model.spec.signals_read(), signal, ab.absent_fires if ab else True, own
        )

    # -- expected names for `names` steps ---------------------------------------------------
    def expected_names(self, q: s.NamesQuery) -> dict[str, list[str]]:
        """Each expected name -> the names it goes by elsewhere (other exporter profile, old vLLM names)."""
        out = {}
        for name in q.expect:
            if self.sb.is_dcgm_field(name):
                actual = self.sb.metric_name(name)
                out[actual] = [v for v in self.sb.catalog.dcgm.names_of(name) if v != actual]
                continue
            alts = [old for old, r in self.sb.catalog.renamed.items() if r.replacement == name]
            if name.startswith("vllm:"):
                alts.append(name.replace(":", "_", 1))  # Ray's metrics replace ':' by '_'
            out[name] = alts
        return out
