"""Signal expressions: how each kind of signal becomes PromQL, from config and catalog facts.

Rules, dashboards and runbooks all call `SignalBuilder`, so a panel and the alert about the same
thing share one expression (or its recording rule).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Sequence

from . import catalog as catalog_mod
from .catalog.exporter import DcgmFacts, ExporterProfile, WorkloadLabels
from .absence import Absences
from .alert_context import HOST, fold_host, gpu_workload_lookup
from .promql import builders as b
from .spec.client_side import counting_source
from .spec.deployment import COUNTING_ROLES, ROLES
from .promql.histograms import Histograms
from .spec.schema import Config, Signal

MODEL = "model_name"  # the label vLLM names a model in; a client source's is config.client_side's
CLIENT_PREFIX = "client_"  # a signal's metric client_ttft: the configured client source's TTFT histogram


@dataclass(frozen=True)
class LabelNames:
    """Names resolved from config and the catalog: what identifies a GPU, an engine, a model, and what
    the configured exporter profile calls each DCGM field and label."""

    config: Config
    catalog: catalog_mod.Catalog = field(default_factory=catalog_mod.load)

    def _cluster(self) -> list[str]:
        return [self.config.cluster_label] if self.config.cluster_label else []

    def identity(self, level: str) -> list[str]:
        ident = {
            "gpu": self.config.identity.dcgm,
            "engine": self.config.identity.vllm,
            "model": self.config.identity.model,
        }
        deployment = self.deployment() if level in ("engine", "model") else []
        return self._cluster() + deployment + list(ident[level])

    def deployment(self) -> list[str]:
        """The configured role and track labels: part of every engine's and model's identity, so
        prefill and decode, stable and canary are each their own series and alert."""
        return [dim.label for dim in (self.config.role, self.config.track) if dim is not None]

    def deployment_defaults(self) -> dict[str, str]:
        """The role and track labels of an aggregated engine on the stable track: what synthetic and
        scenario series carry where they name no role or track of their own."""
        out = {}
        if self.config.role is not None:
            out[self.config.role.label] = self.config.role.values["both"][0]
        if self.config.track is not None:
            out[self.config.track.label] = self.config.track.stable
        return out

    def role_matcher(self, roles) -> str:
        """The matcher that keeps the series of `roles`; empty where no role is configured or
        every role is read."""
        role = self.config.role
        if role is None or not roles or set(roles) >= set(ROLES):
            return ""
        return role.matcher(roles)

    # -- the client's side (config.client_side) ----------------------------------------------
    @property
    def client(self) -> catalog_mod.ClientSource:
        """The configured gateway or frontend source; unconfigured, the catalog's first, so a signal
        of a group that needs client_side is still checked against a real histogram."""
        cs = self.config.client_side
        return cs.client if cs is not None else next(iter(self.catalog.clients.values()))

    @property
    def client_model(self) -> str:
        """The label a client source's series carry the model name in."""
        cs = self.config.client_side
        return cs.label if cs is not None else (self.client.model_label or MODEL)

    @property
    def pool_source(self) -> catalog_mod.ClientSource:
        """The source of the inference pool's gauges: the configured one where it reports them,
        else the catalog's first that does, so a group that needs client_pool is still checked
        against real gauges."""
        cs = self.config.client_pool
        return cs.client if cs is not None else next(c for c in self.catalog.clients.values() if c.pool)

    @property
    def errors_source(self) -> catalog_mod.ClientSource:
        """The source of the request and error counters: the configured one where it counts them,
        else the catalog's first that does, so a group that needs client_errors is still checked
        against real counters."""
        return counting_source(self.config.client_side)

    def client_metric(self, name: str) -> str | None:
        """The histogram a client-side quantity (`client_ttft`, `client_itl`) is read from, or the
        gauge of a pool quantity (`client_pool_ready_pods`); None for any other name."""
        if not name or not name.startswith(CLIENT_PREFIX):  # a signal without a metric passes None
            return None
        field = name.removeprefix(CLIENT_PREFIX)
        if field.startswith(catalog_mod.POOL_PREFIX):
            return self.pool_source.metric(field)
        if field in catalog_mod.CLIENT_COUNTERS:
            return self.errors_source.metric(field)
        return self.client.metric(field)

    def client_matchers(self, name: str) -> tuple[str, ...]:
        """The matchers a read of a client source's series needs (catalog/gateway.yaml): the valid
        or bad events of `client_requests` and `client_errors` (`outcome:`), the series of a
        histogram that measure its quantity (`only:`); none for any other name."""
        if not name or not name.startswith(CLIENT_PREFIX):
            return ()
        field = name.removeprefix(CLIENT_PREFIX)
        if field in catalog_mod.CLIENT_COUNTERS:
            return self.errors_source.matchers(field)
        return self.client.matchers(field)

    def client_keys(self, metric: str) -> list[str]:
        """What one gateway pod's series of `metric` differ by: the engine identity with the model
        label in model_name's place, and the catalog's labels of the metric (the endpoint picker's
        flows and priorities are different requests, summed, not duplicates). The engines' role and
        track are left out: a gateway pod is neither a prefill or decode engine nor of one track."""
        entry = self.catalog.lookup(metric)
        engines_only = {*self.vllm_only(), *self.deployment()}  # vLLM's rank, the pods' role and track
        named = [
            self.client_model if label == MODEL else label
            for label in self.identity("engine")
            if label not in engines_only
        ]
        return list(dict.fromkeys([*named, *(entry.labels if entry else ())]))

    def vllm_only(self) -> tuple[str, ...]:
        """The labels vLLM itself puts on an engine's series besides the model name (the rank):
        a gateway's series never carry them."""
        engine = self.catalog.metrics[self.catalog.vllm_liveness]
        return tuple(label for label in engine.labels if label != MODEL)

    def client_identity(self) -> list[str]:
        """What a client-side view is matched to a model by: the cluster and identity.model (a
        client sees no role or track of the engines behind the gateway)."""
        return self._cluster() + list(self.config.identity.model)

    def pool_identity(self) -> list[str]:
        """What an inference pool's series are keyed by besides its `name`: the cluster and
        identity.model without the model (a pool's gauges name no model)."""
        return [label for label in self.client_identity() if label != MODEL]

    def is_pool_metric(self, metric: str) -> bool:
        return metric in dict(self.pool_source.pool).values()

    def as_model_name(self, expr: str) -> str:
        """A client source's series with the model name in model_name, as vLLM's carry it."""
        return expr if self.client_model == MODEL else b.copy_label(expr, self.client_model, MODEL)

    # -- vLLM's names (config.vllm_profile) -----------------------------------------------------
    @property
    def vllm_profile(self) -> catalog_mod.VllmProfile:
        return self.catalog.vllm_profiles[self.config.vllm_profile]

    def vllm_metric(self, name: str) -> str:
        """A vLLM metric (vllm:..., or one the catalog lists as vLLM's) under the name the configured
        vLLM profile gives it; any other name, or one already renamed, as it is."""
        prefix = self.vllm_profile.prefix
        if not prefix or self.catalog.vllm_name(name) != name:
            return name
        entry = self.catalog.lookup(name)
        mine = name.startswith("vllm:") or (entry is not None and entry.source == "vllm")
        return prefix + name if mine else name

    # -- the exporter ----------------------------------------------------------------------
    @property
    def dcgm(self) -> DcgmFacts:
        return self.catalog.dcgm

    @cached_property
    def profile(self) -> ExporterProfile:
        """The configured exporter profile, with config.dcgm.metric_names applied."""
        cfg = self.config.dcgm
        return self.dcgm.profile(cfg.fb_units).with_names(cfg.metric_names)

    def unnamed_field(self, field: str) -> str | None:
        """Why a DCGM field cannot be read under the configured profile; None when it can."""
        if self.profile.has(field):
            return None
        return (
            f"exporter profile {self.profile.name!r} has no name for DCGM field {field!r}; "
            f"name it in config.dcgm.metric_names"
        )

    @property
    def host(self) -> str:
        return self.config.dcgm.hostname_label

    @property
    def host_spellings(self) -> list[str]:
        """Every spelling of the host label: a fleet mid-upgrade carries more than one."""
        return list(self.dcgm.host_labels)

    @property
    def workload(self) -> WorkloadLabels:
        return self.dcgm.workload_labels[self.config.dcgm.workload_labels]

    @property
    def workload_namespace(self) -> str:
        return self.workload.namespace

    @property
    def workload_pod(self) -> str:
        return self.workload.pod

    def gpu_context(self) -> list[str]:
        """Descriptive labels shown with a GPU: stable for a GPU except the pod holding it."""
        ident = set(self.identity("gpu"))
        gpu = self.dcgm.labels
        # every host spelling: a fleet in the middle of the 4.6 exporter upgrade carries either one
        wanted = [
            *self.host_spellings,
            gpu.gpu,
            gpu.mig_profile,
            gpu.model,
            self.workload_namespace,
            self.workload_pod,
        ]
        return [label for label in wanted if label not in ident]

    def target(self) -> list[str]:
        return self._cluster() + ["job", "instance"]

    def tokens(self) -> dict[str, str]:
        """Placeholders usable in descriptions and scenarios as [[name]]: label roles and the metric
        name of every DCGM field the configured profile names. A copy of the ones made once (a build
        asks about 1,100 times), so a caller may add its own."""
        return dict(self._tokens)

    @cached_property
    def _tokens(self) -> dict[str, str]:
        fields = {f: n.name for f, n in self.profile.metrics.items()}
        renamed = self.dcgm.other_profile(self.profile.name)
        return {
            **fields,
            "host": self.host,
            "workload_namespace": self.workload_namespace,
            "workload_pod": self.workload_pod,
            # the name another exporter generation uses: what a rename looks like from here
            **({"fb_used_renamed": renamed.metric("fb_used")} if renamed.has("fb_used") else {}),
            "cluster": self.config.cluster_label or "cluster",
            # descriptions: " in cluster <name>" where a cluster label is configured, else nothing
            "in_cluster": (
                f" in cluster {{{{ $labels.{self.config.cluster_label} }}}}"
                if self.config.cluster_label
                else ""
            ),
            # descriptions: `{{ with [[gpu_workload_lookup]] }}...{{ . | first | label "pod" }}{{ end }}`;
            # gpu_pod_lookup is its earlier name, kept for specs that use it
            **dict.fromkeys(
                ("gpu_workload_lookup", "gpu_pod_lookup"), gpu_workload_lookup(self.identity("gpu"))
            ),
            "rate_window": self.config.rate_window,
            "remember_parts": self.config.remember.parts,
            # scenarios: the role and track labels and values (their defaults where none is configured)
            **self.deployment_tokens(),
            # descriptions: the role and track an engine's or model's alert is about, where configured
            "deployment": self.deployment_text(),
            # descriptions of TTFT alerts: which side measured it; runbook prose: the same, at length
            "measured_side": self.ttft_side(),
            # scenarios: the configured client source's histograms and model label
            **{f"{CLIENT_PREFIX}{f}": m for f, m in self.client.fields},
            **{f"{CLIENT_PREFIX}{catalog_mod.POOL_PREFIX}{f}": m for f, m in self.pool_source.pool},
            "client_model": self.client_model,
            "client_source": self.client.name,
            "ttft_side_note": self.ttft_side_note(),
        }

    def ttft_side_note(self) -> str:
        return self._role_side_note() + self._client_side_note()

    def _client_side_note(self) -> str:
        if self.config.client_side is None:
            return ""
        return (
            f" This alert reads the engines' own histograms (the instance side); the client's side, as the"
            f" {self.client.name} sees it, is the client-side TTFT alert's (config.client_side)."
        )

    def _role_side_note(self) -> str:
        if self.config.role is None:
            return ""
        return (
            f" With prefill and decode apart (config.role) each role is its own series (label "
            f"`{self.config.role.label}`), measured on its engines, not at the client: a prefill engine's"
            " TTFT is its queue and prefill; a decode engine's starts when the router hands it the request"
            " and includes the wait for the KV transfer, not the prefill. The client's TTFT is about their"
            " sum; a gateway or frontend source measures it directly."
        )

    def deployment_tokens(self) -> dict[str, str]:
        role, track = self.config.role, self.config.track
        values = role.values if role else {r: (r,) for r in ROLES}
        return {
            "role": role.label if role else "role",
            **{f"{r}_role": values[r][0] for r in ROLES},
            "track": track.label if track else "track",
            "stable_track": track.stable if track else "stable",
        }

    def deployment_text(self) -> str:
        parts = [
            f"{what} {{{{ $labels.{dim.label} }}}}"
            for what, dim in (("role", self.config.role), ("track", self.config.track))
            if dim is not None
        ]
        return f" ({', '.join(parts)})" if parts else ""

    def ttft_side(self) -> str:
        """Which side a TTFT alert measures, said in its description. The engine's own histogram is
        the instance's view; with prefill and decode apart neither is the client's (a decode engine's
        includes the KV transfer wait, not the prefill). Where a gateway or frontend source is
        configured (config.client_side) the client-side TTFT alert reads it, and this says so."""
        client = (
            f"; the client's side, at the {self.client.name}, is the client-side TTFT alert's"
            if self.config.client_side is not None
            else ""
        )
        if self.config.role is None:
            return "; measured on the engines, the instance side" + client if client else ""
        return (
            f"; measured on the {{{{ $labels.{self.config.role.label} }}}} engines, not at the client: "
            "a decode engine's includes the KV transfer wait, a prefill engine's only the prefill" + client
        )


class SignalBuilder:
    def __init__(
        self,
        config: Config,
        catalog: catalog_mod.Catalog | None = None,
        recorded: Sequence[Signal] = (),
        signals: dict[str, Signal] | None = None,
    ):
        self.config = config
        self.signals = signals or {}  # every signal by name: a track_ratio reads the one it compares
        self.catalog = catalog or catalog_mod.load()
        self.labels = LabelNames(config, self.catalog)
        # rate and bucket_rate signals whose recording rules are evaluated before what this builder
        # builds (earlier in the same rule group): read from them instead of the raw counters
        self.recorded = tuple(recorded)
        self.roles: tuple[str, ...] = ()  # the roles whose vLLM series this builder reads (all: empty)
        self.histograms = Histograms(config.histograms, self._is_histogram)

    def _is_histogram(self, name: str) -> bool:
        entry = self.catalog.lookup(name + "_bucket")
        return entry is not None and entry.type == "histogram"

    def reading(self, recorded: Sequence[Signal]) -> "SignalBuilder":
        """This builder, reading the rates and bucket rates of `recorded` signals from their records."""
        return SignalBuilder(self.config, self.catalog, recorded, self.signals).of_roles(self.roles)

    def of_roles(self, roles: Sequence[str]) -> "SignalBuilder":
        """This builder, reading only the vLLM series of `roles` where config.role is set."""
        if tuple(roles) == self.roles:
            return self
        out = copy.copy(self)  # a subclass keeps what it adds (runbooks' ScopedBuilder: its filters)
        out.roles = tuple(roles)
        return out

    def counting(self) -> "SignalBuilder":
        """This builder, reading only the engines each user request is counted once on where
        config.role is set (COUNTING_ROLES): what a deployment's requests and tokens are read from."""
        return self.of_roles(COUNTING_ROLES)

    @property
    def role_matcher(self) -> str:
        return self.labels.role_matcher(self.roles)

    # -- names and selectors -------------------------------------------------------------
    @property
    def liveness(self) -> str:
        """The vLLM gauge every running engine exports."""
        return self.catalog.vllm_liveness

    def is_dcgm_field(self, name: str) -> bool:
        return name in self.catalog.dcgm.fields

    def metric_name(self, name: str) -> str:
        """A DCGM field's metric name in the configured profile, a client-side quantity's in the
        configured client source, a vLLM metric's in the configured vLLM profile; any other name as
        it is."""
        if self.is_dcgm_field(name):
            return self.labels.profile.metric(name)
        return self.labels.client_metric(name) or self.labels.vllm_metric(name)

    def unit(self, name: str) -> str | None:
        """The catalog unit of a field (in the configured profile) or metric."""
        if self.is_dcgm_field(name):
            return self.labels.profile.unit(name)
        entry = self.catalog.lookup(name)
        return entry.unit if entry else None

    def is_ratio(self, signal: Signal) -> bool:
        """Whether a signal's value is a 0-1 ratio: one series over another, or a field or metric the
        catalog gives unit `ratio`."""
        if signal.kind in ("matched_ratio", "counter_ratio"):
            return True
        return bool(signal.metric) and self.unit(signal.metric) == "ratio"

    def source(self, metric: str) -> str:
        if self.labels.profile.field_of(metric):  # configured names need not be in the catalog
            return "dcgm"
        entry = self.catalog.lookup(metric)
        if entry:
            return entry.source
        # dcgm-exporter names every series DCGM_FI_* or DCGM_EXP_*: one the catalog does not know (a
        # field a newer exporter renamed, in a scenario) is still the exporter's, not a vLLM metric
        return "dcgm" if metric.startswith("DCGM_") else "vllm"

    def select(self, metric: str, *matchers: str) -> str:
        """The series of `metric` (a signal's name: a DCGM field, client_errors) with the config's
        selectors and, for a client source's counter, the matchers of its valid or bad events."""
        name = self.metric_name(metric)
        source = self.source(name)
        role = self.role_matcher if source == "vllm" else ""
        counted = self.labels.client_matchers(metric)
        return b.selector(name, self.config.selector(source), role, *counted, *matchers)

    def up(self, source: str, extra: str = "") -> str:
        return b.selector("up", self.config.targets[source], extra)

    # -- signals ------------------------------------------------------------------------
    def expr(self, signal: Signal, window: str | None = None, quantile: float | None = None) -> str:
        """The PromQL for a signal; `window` replaces the rate window (dashboards pass $__rate_interval)."""
        if tuple(signal.roles) != self.roles:
            return self.of_roles(signal.roles).expr(signal, window, quantile)
        window = window or self.config.rate_window
        ident = self.labels.identity(signal.level)
        if signal.kind == "gauge":
            ident = self.level_identity(signal.metric, signal.level)  # a gateway's: no role or track
            return b.dedup(self.select(signal.metric, signal.matchers), ident + list(signal.by))
        if signal.kind == "matched_ratio":
            part, rest = self.select(signal.numerator), self.select(signal.partner)
            if not self.carries_gpu_context(signal):
                return b.matched_ratio(part, rest, ident)
            # the host also folded into the one `host` label the alerts carry (alert_context.py)
            context = self.labels.gpu_context() + [HOST]
            describe = partial(fold_host, spellings=self.labels.host_spellings)
            return b.matched_ratio_with_context(part, rest, ident, context, describe)
        if signal.kind == "rate" and self.source(self.metric_name(signal.metric)) == "gateway":
            counted = self.labels.client_matchers(signal.metric)
            return self._client_rate(self.metric_name(signal.metric), window, list(signal.by), counted)
        if signal.kind == "rate":
            return self._rate_at_level(signal.metric, "", window, signal.level, list(signal.by))
        if signal.kind == "counter_ratio":
            keep = [label for label, _, _ in b.parse_matchers(signal.matchers)]
            part = self._rate_at_level(signal.metric, signal.matchers, window, signal.level, [], keep)
            return b.guarded_div(part, self.denominator(signal, window), ident)
        if signal.kind == "bucket_rate":
            return self.bucket_rates(signal.metric, window, signal.level)[0]
        if signal.kind == "quantile":
            q = quantile if quantile is not None else signal.quantiles[0]
            return self.histogram_quantile(signal.metric, q, window, signal.level)
        if signal.kind == "track_ratio":
            return self.track_ratio(signal)
        raise ValueError(f"unknown signal kind {signal.kind}")

    @staticmethod
    def carries_gpu_context(signal: Signal) -> bool:
        """Whether a signal's record carries the GPU's descriptive labels (host, index, MIG profile,
        model) on its one series per GPU: a GPU's matched ratio, cut to one series per GPU by
        `matched_ratio_with_context`. Its alerts keep those labels instead of joining the GPU info."""
        return signal.kind == "matched_ratio" and signal.level == "gpu"

    def denominator(self, signal: Signal, window: str | None = None) -> str:
        """A counter_ratio's denominator: the rate of every event it counts (e.g. finished requests)."""
        if tuple(signal.roles) != self.roles:
            return self.of_roles(signal.roles).denominator(signal, window)
        if signal.kind == "track_ratio":
            return self.track_traffic(signal, window or self.config.rate_window)
        keep = [label for label, _, _ in b.parse_matchers(signal.matchers)]
        window = window or self.config.rate_window
        return self._rate_at_level(signal.metric, "", window, signal.level, [], keep)

    # -- tracks: each track against the stable one --------------------------------------------
    def track_ratio(self, signal: Signal) -> str:
        """The compared signal's recorded value of each track other than the stable one over the
        stable track's, per identity; no result where the stable track has none (or zero)."""
        of, track = self.signals[signal.of], self.config.track
        ident = self.labels.identity(signal.level)
        beside = [label for label in ident if label != track.label]  # the stable twin's identity
        quantile = [f'quantile="{signal.quantiles[0]:g}"'] if signal.quantiles else []
        other = b.dedup(b.selector(of.record, *quantile, track.others_matcher()), ident)
        stable = b.dedup(b.selector(of.record, *quantile, track.stable_matcher()), beside)
        return b.guarded_div(other, stable, beside, many_left=True)

    def track_traffic(self, signal: Signal, window: str) -> str:
        """A track_ratio's traffic: what the compared signal counts per second on each non-stable
        track (a histogram's observations, a ratio's events), per identity."""
        of = self.signals[signal.of]
        counted = f"{of.metric}_count" if of.kind == "quantile" else of.metric
        series = self.of_roles(of.roles).select(counted, self.config.track.others_matcher())
        return self._raw_rate(series, window, signal.level)

    # -- rates: from raw counters, or from a recorded rate at the same or a finer level ------------
    def _coarser(self, level: str, than: str) -> bool:
        """Whether a series per `than` can be summed up to `level` (a model is a set of engines)."""
        if level == than:
            return True
        return (than, level) == ("engine", "model") and set(self.labels.identity("model")) <= set(
            self.labels.identity("engine")
        )

    def _recorded(
        self, kind: str, metric: str, level: str, needs: Sequence[str], window: str
    ) -> Signal | None:
        """A recorded signal of `kind` over `metric` that `level` can be summed from, keeping `needs`."""
        if window != self.config.rate_window:
            return None
        for s in self.recorded:
            if (
                s.kind == kind
                and s.metric == metric
                and not s.matchers
                and set(needs) <= set(s.by)
                and self._coarser(level, s.level)
                and self._readable_roles(s)
            ):
                return s
        return None

    def _readable_roles(self, recorded: Signal) -> bool:
        """Whether a recorded signal holds the series of this builder's roles (all, or the same)."""
        return self.config.role is None or not recorded.roles or set(recorded.roles) == set(self.roles)

    def recorded_source(
        self, kind: str, metric: str, level: str, needs: Sequence[str], window: str
    ) -> Signal | None:
        """The recorded signal a rule outside its group can read `metric`'s rates from, if any."""
        return self._recorded(kind, metric, level, needs, window)

    def _rate_at_level(
        self, metric: str, matchers: str, window: str, level: str, by: list[str], dedup_extra: list[str] = ()
    ) -> str:
        """Rate per engine (deduplicated), summed up to the level when the level is coarser; read from
        a recorded rate when one is there."""
        ident = self.labels.identity(level)
        matched = [label for label, _, _ in b.parse_matchers(matchers)] if matchers else []
        rec = self._recorded("rate", metric, level, [*by, *matched], window)
        if rec is not None:
            source = self.recorded_selector(rec, matchers)
            same = rec.level == level and set(rec.by) == set(by)
            return source if same else b.agg("sum", ident + by, source)
        return self._raw_rate(self.select(metric, matchers), window, level, by, dedup_extra)

    def _raw_rate(
        self, series: str, window: str, level: str, by: Sequence[str] = (), dedup_extra: Sequence[str] = ()
    ) -> str:
        """Rate of raw counter `series` per engine (deduplicated), summed up to a coarser level."""
        by = list(by)
        engine = (
            self.labels.identity("engine") if level in ("engine", "model") else self.labels.identity(level)
        )
        per_engine = self.histograms.deduped_rate(series, window, engine + by + list(dedup_extra))
        if level in ("engine", "gpu"):
            return per_engine if not dedup_extra else b.agg("sum", engine + by, per_engine)
        return b.agg("sum", self.labels.identity(level) + by, per_engine)

    # -- histograms: bucket rates once, every quantile and heatmap from them ---------------------
    def bucket_rates(self, metric: str, window: str, level: str, by: Sequence[str] = ()) -> tuple[str, str]:
        """(per-second rate of each bucket of histogram `metric` per `level` (and `by`), `le` kept; the
        condition "it observed something"), from a recorded bucket_rate signal when one is there."""
        keep = self.level_identity(metric, level) + list(by)
        rec = None if by else self._recorded("bucket_rate", metric, level, [], window)
        h = self.histograms
        if rec is not None:
            narrow = self._narrowing(rec)
            series = b.selector(rec.record, narrow)
            total = h.recorded_total(rec.record, self.level_identity(metric, rec.level), narrow)
            if rec.level == level:
                return series, f"{total} > 0"
            return b.agg("sum", h.grouping(keep + ["le"]), series), f"{b.agg('sum', keep, total)} > 0"
        name = self.metric_name(metric)
        if self.source(name) == "gateway":
            return self._client_bucket_rates(name, window, keep)
        engine = self.labels.identity("engine")
        buckets = h.deduped_rate(self.select(f"{name}_bucket"), window, engine + ["le"])
        by_le = buckets if keep == engine else b.agg("sum", h.grouping(keep + ["le"]), buckets)
        counts = b.agg("sum", keep, h.deduped_rate(self.select(f"{name}_count"), window, engine))
        return by_le, f"{counts} > 0"

    def _client_bucket_rates(self, name: str, window: str, keep: list[str]) -> tuple[str, str]:
        """bucket_rates of a gateway or frontend histogram: deduplicated per gateway pod and flow,
        the model label read as model_name, summed to `keep`."""
        h, lb = self.histograms, self.labels
        pod, only = lb.client_keys(name), lb.client.only_of(name)  # the series that measure it
        buckets = lb.as_model_name(h.deduped_rate(self.select(f"{name}_bucket", *only), window, pod + ["le"]))
        counts = lb.as_model_name(h.deduped_rate(self.select(f"{name}_count", *only), window, pod))
        return b.agg("sum", h.grouping(keep + ["le"]), buckets), f"{b.agg('sum', keep, counts)} > 0"

    def client_rate(self, name: str, window: str, *matchers: str) -> str:
        """Rate of the client source's counter `name` (a histogram's `_bucket` or `_count` too) per
        model, from the raw series: what the client-side records hold (calibrate reads a history
        that may lack them)."""
        return self._client_rate(name, window, [], matchers)

    def _client_rate(self, name: str, window: str, by: list[str], matchers: Sequence[str] = ()) -> str:
        """Rate of a gateway or frontend counter per model (and `by`) as the client sees it:
        deduplicated per gateway pod and flow, the model label read as model_name."""
        h, lb = self.histograms, self.labels
        series = self.select(name, *matchers, *lb.client.only_of(name))  # only those that measure it
        per_pod = lb.as_model_name(h.deduped_rate(series, window, lb.client_keys(name)))
        return b.agg("sum", lb.client_identity() + by, per_pod)

    def _narrowing(self, recorded: Signal) -> str:
        """The role matcher a read of a recorded signal of every role's vLLM series needs."""
        if recorded.roles or not recorded.metric or self.source(self.metric_name(recorded.metric)) != "vllm":
            return ""
        return self.role_matcher

    def recorded_selector(self, recorded: Signal, *matchers: str) -> str:
        """A recorded signal's series under `matchers`, only this builder's roles of them."""
        return b.selector(recorded.record, *matchers, self._narrowing(recorded))

    def record_narrowing(self, record: str) -> tuple[str, ...]:
        """The matchers that keep only this builder's roles of `record`, a recorded signal's rule."""
        matcher = next((self._narrowing(s) for s in self.recorded if s.record == record), "")
        return (matcher,) if matcher else ()

    def model_rate(self, series: str, window: str, keep: tuple[str, ...] = ()) -> str:
        """Per-second rate of counter `series` per model: deduplicated per engine (and `keep`), summed.
        The SLO rules read raw series only through here."""
        return self._raw_rate(series, window, "model", [], keep)

    def histogram_quantile(
        self, metric: str, q: float, window: str, level: str, by: tuple[str, ...] = ()
    ) -> str:
        """Quantile per level from a histogram; no result (not NaN) where there were no observations."""
        by_le, observed = self.bucket_rates(metric, window, level, by)
        return b.only_where(b.quantile(q, by_le), observed, self.level_identity(metric, level) + list(by))

    def series_of(self, signal: Signal) -> str:
        """What one series of a signal is, in words: its level, or an inference pool."""
        # a signal made from an expression has no one metric, so it is no pool gauge
        pool = signal.metric is not None and self.labels.is_pool_metric(self.metric_name(signal.metric))
        return "inference pool" if pool else signal.level

    def level_identity(self, metric: str, level: str) -> list[str]:
        """What a result per `level` of `metric` is keyed by: the level's identity, or for a client
        source's histogram the client identity (a gateway sees no role or track), for a pool gauge the
        pool identity (with `name`, its signal's `by`)."""
        if not metric:  # a signal over other signals (track_ratio)
            return self.labels.identity(level)
        name = self.metric_name(metric)
        if self.labels.is_pool_metric(name):
            return self.labels.pool_identity()
        if self.source(name) == "gateway":
            return self.labels.client_identity()
        return self.labels.identity(level)

    # -- companions that keep an alert family from going silently blind --------------------------
    def input_metrics(self, source: str, signals) -> list[str]:
        """The series the signals of a source read (a histogram through its _count), sorted; not the
        catalog's optional metrics, which an engine without that feature never exports."""
        out = set()
        for s in signals:
            if s.kind == "bucket_rate":  # feeds quantiles (whose signals name the input) and heatmaps
                continue
            for name in (s.metric, s.numerator, s.partner):
                entry = self.catalog.lookup(self.metric_name(name)) if name else None
                if entry is not None and entry.optional:  # a family only some engines export (NIXL)
                    continue
                if name and self.source(self.metric_name(name)) == source:
                    out.add(self.metric_name(name) + ("_count" if s.kind == "quantile" else ""))
        return sorted(out)

    def absence(
        self, kind: str, source: str, signals: dict, signal=None, absent_fires: bool = True, absence=None
    ) -> str:
        """The condition of a 'never silently blind' alert, by its kind (absence.py); `absence` is
        the alert's absence spec, for the options of its kind."""
        return Absences(self).build(kind, source, signals, signal, absent_fires, absence)
