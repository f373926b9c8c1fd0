"""The resolved model: spec + overrides -> concrete recording and alerting rules.

This is the one place where overrides are applied and where cross-cutting annotations
(severity, runbook_url, dashboard_url, extra labels) are added to every alert.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from . import templates
from .grafana import slug
from .alert_context import Context
from .promql import builders as b
from .runbooks import links
from .signals import SignalBuilder
from .slo.exprs import SloExprs
from .slo.plan import FAMILY as SLO_FAMILY
from .slo.plan import BurnAlert, InputsAlert, SloPlan
from .spec.loader import Spec
from .spec.schema import Alert, Dashboard, Signal, seconds

T = TypeVar("T")


@dataclass(frozen=True)
class RecordRule:
    record: str
    expr: str
    labels: dict[str, str] = field(default_factory=dict)
    signal: str = ""


@dataclass(frozen=True)
class AlertRule:
    alert: str
    expr: str
    for_: str
    keep_firing_for: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    group: str
    family: str
    spec: Alert | BurnAlert | InputsAlert  # the alert with overrides applied, or an SLO's alert

    @property
    def result_labels(self) -> dict[str, str]:
        """Labels the alert's expression itself adds to every result (the recorded quantile)."""
        return {"quantile": f"{self.spec.quantile:g}"} if self.spec.quantile is not None else {}


@dataclass(frozen=True)
class RuleGroup:
    name: str  # the spec's group name; the rule file uses `prefix-name`
    family: str
    interval: str | None
    records: tuple[RecordRule, ...]
    alerts: tuple[AlertRule, ...]


def effective_alert(alert: Alert, spec: Spec) -> Alert:
    ov = spec.overrides.alerts.get(alert.alert)
    if ov is None:
        return alert
    changes = {
        k: v
        for k, v in {
            "threshold": ov.threshold,
            "min_traffic": ov.min_traffic,
            "for_": ov.for_,
            "keep_firing_for": ov.keep_firing_for,
            "severity": ov.severity,
            "enabled": ov.enabled,
        }.items()
        if v is not None
    }
    changes["labels"] = {**alert.labels, **ov.labels}
    changes["annotations"] = {**alert.annotations, **ov.annotations}
    return alert.model_copy(update=changes)


class Model:
    def __init__(self, spec: Spec, dashboard_panels: dict[str, dict[str, int]] | None = None):
        self.spec = spec
        self.config = spec.config
        self.builder = SignalBuilder(spec.config, signals=spec.signals)
        self.context = Context(self.builder)
        self.tokens = self.builder.labels.tokens()
        # dashboard uid -> {alert: id of the panel that shows it}; its dashboard_url opens that panel
        self.dashboard_panels = dashboard_panels or {}
        # the SLO groups read the rates the rule set records anyway (bucket rates, finished requests
        # per reason), so each raw series is read once per evaluation
        slo_builder = self.builder.reading(self._recorded_signals())
        self.slos = SloPlan(spec.slos, SloExprs(slo_builder), self._slo_dashboard())
        self._plans: dict[str, object] = {}

    def planned(self, key: str, make: Callable[["Model"], T]) -> T:
        """`make(self)`, made once for this model: a check and a renderer that need the same derived
        plan (the generated tests, say) share it instead of building it twice."""
        if key not in self._plans:
            self._plans[key] = make(self)
        return self._plans[key]  # type: ignore[return-value]

    def with_dashboard_panels(self, panels: dict[str, dict[str, int]]) -> "Model":
        """The same model, whose alerts' dashboard_url also open the panel that shows each alert."""
        return Model(self.spec, panels)

    # -- lookups ------------------------------------------------------------------------
    def signal(self, name: str) -> Signal:
        return self.spec.signals[name]

    def alerts(self) -> list[AlertRule]:
        return [a for g in self.groups for a in g.alerts]

    def alert(self, name: str) -> AlertRule | None:
        return next((a for a in self.alerts() if a.alert == name), None)

    def records(self) -> list[RecordRule]:
        return [r for g in self.groups for r in g.records]

    def families(self) -> dict[str, list[RuleGroup]]:
        out: dict[str, list[RuleGroup]] = {}
        for g in self.groups:
            out.setdefault(g.family, []).append(g)
        return out

    def record_for(self, signal: str, quantile: float | None = None) -> str:
        """The selector of a signal's recording rule (with the quantile label for quantile signals)."""
        s = self.spec.signals[signal]
        return f'{s.record}{{quantile="{quantile:g}"}}' if quantile is not None else s.record

    # -- building -----------------------------------------------------------------------
    @cached_property
    def groups(self) -> tuple[RuleGroup, ...]:
        out = []
        remembered: set[str] = set()  # memory records, each in the first group whose alerts need it
        for group in self.spec.groups:
            if not self._enabled(group):
                continue
            interval = self.spec.group_interval(group)
            specs = [a for a in (effective_alert(a, self.spec) for a in group.alerts) if a.enabled]
            records = list(self._group_records(group.records))
            # memories recorded less often than their group, per interval and group name suffix
            slow: dict[tuple[str, str], list[RecordRule]] = {}
            for memory in (m for a in specs for m in self.context.memories(a, self.spec.signals)):
                if memory.record not in remembered:
                    remembered.add(memory.record)
                    rule = RecordRule(memory.record, memory.expr)
                    own = memory.every and not (interval and seconds(memory.every) == seconds(interval))
                    (slow.setdefault((memory.every, memory.slow), []) if own else records).append(rule)
            for (every, suffix), rules in slow.items():
                out.append(RuleGroup(f"{group.name}-{suffix}", group.family, every, tuple(rules), ()))
            recorded = [self.spec.signals[n] for n in group.records]
            alerts = tuple(self._alert(a, group.name, group.family, recorded) for a in specs)
            if records or alerts:
                out.append(RuleGroup(group.name, group.family, interval, tuple(records), alerts))
        for planned in self.slos.groups():
            records = tuple(RecordRule(r.record, r.expr, dict(r.labels)) for r in planned.records)
            alerts = tuple(self._alert(a, planned.name, SLO_FAMILY) for a in planned.alerts)
            out.append(RuleGroup(planned.name, SLO_FAMILY, None, records, alerts))
        return tuple(out)

    def _enabled(self, group) -> bool:
        return self.spec.group_enabled(group)

    def _recorded_signals(self) -> list[Signal]:
        """The signals recorded by an enabled rule group."""
        # a name no signal has is validation's to report (spec_checks), with its file and line
        signals = self.spec.signals
        return [signals[n] for g in self.spec.groups if self._enabled(g) for n in g.records if n in signals]

    def _slo_dashboard(self) -> Dashboard:
        """Where SLO alerts link: the SLO dashboard, its variables filled from the grouping labels."""
        board = self.spec.dashboards.board("slo")
        roles = {self.config.cluster_label: "cluster", "model_name": "model"}
        grouping = self.builder.labels.identity("model")
        vars = {roles.get(label, "namespace"): label for label in grouping}
        return Dashboard(uid=board.uid, slug=slug(board.title), vars=vars)

    def _group_records(self, names: tuple[str, ...]) -> tuple[RecordRule, ...]:
        """A group's recording rules in order. Prometheus evaluates a group's rules one after another
        at the same timestamp, so a rule may read a rate or bucket rate recorded before it in the
        group: that is how a histogram's raw buckets are read once per evaluation, not once per
        quantile."""
        out: list[RecordRule] = []
        for i, name in enumerate(names):
            builder = self.builder.reading([self.spec.signals[n] for n in names[:i]])
            out += self._records(name, builder)
        return tuple(out)

    def _records(self, name: str, builder: SignalBuilder) -> list[RecordRule]:
        s = self.spec.signals[name]
        if s.kind == "quantile":
            return [
                RecordRule(s.record, builder.expr(s, quantile=q), {"quantile": f"{q:g}"}, name)
                for q in s.quantiles
            ]
        return [RecordRule(s.record, builder.expr(s), {}, name)]

    def _alert(self, alert: Alert, group: str, family: str, recorded: Sequence[Signal] = ()) -> AlertRule:
        """An alert of `group`, whose `recorded` signals it may read (evaluated before it)."""
        return AlertRule(
            alert=alert.alert,
            expr=self._alert_expr(alert, recorded),
            for_=alert.for_,
            keep_firing_for=alert.keep_firing_for,
            labels={"severity": alert.severity, **self.spec.alertmanager.team_labels(), **alert.labels},
            annotations=self._annotations(alert),
            group=group,
            family=family,
            spec=alert,
        )

    def _alert_expr(self, alert: Alert | BurnAlert | InputsAlert, recorded: Sequence[Signal] = ()) -> str:
        if isinstance(alert, (BurnAlert, InputsAlert)):
            return alert.expr
        if alert.signal:
            return self._threshold_expr(alert, recorded)
        ab = alert.absence
        signals = self.spec.signals_read()
        return self.builder.absence(ab.kind, ab.source, signals, ab.signal, ab.absent_fires, ab)

    def _threshold_expr(self, alert: Alert, recorded: Sequence[Signal] = ()) -> str:
        """`signal op threshold`; a GPU's signal keyed by the GPU alone, with the GPU's stable labels
        (alert_context.py), so labels that come and go cannot restart `for`."""
        signal = self.signal(alert.signal)
        value = self.record_for(alert.signal, alert.quantile)
        if self.builder.carries_gpu_context(signal):
            condition = b.compare(self.context.gpu_carried(value), alert.op, alert.threshold)
        elif signal.level == "gpu":
            # compared before the join: the GPU's labels are joined to the few series past the
            # threshold, not to every GPU of the fleet each evaluation (the context's value is 1)
            value = b.dedup(value, self.builder.labels.identity("gpu"))
            condition = self.context.gpu(b.compare(value, alert.op, alert.threshold))
        else:
            condition = b.compare(value, alert.op, alert.threshold)
        if alert.min_traffic is None:
            return condition
        # the traffic from a rate its group records (the same rate, its raw series read once)
        traffic = f"{self.builder.reading(recorded).denominator(signal)} >= {alert.min_traffic:g}"
        return b.only_where(condition, traffic, self.builder.labels.identity(signal.level))

    def _annotations(self, alert: Alert) -> dict[str, str]:
        sub = lambda text: templates.substitute_tokens(text, self.tokens)  # noqa: E731
        out = {
            "summary": alert.summary,
            "description": sub(alert.description),
            "runbook_url": self.config.runbook_url.format(alert=alert.alert, alert_lower=alert.alert.lower()),
        }
        if alert.dashboard:
            url = self.config.dashboard_url.format(
                uid=alert.dashboard.uid, slug=alert.dashboard.slug or alert.dashboard.uid
            )
            # an absence alert may lack any label (its absent() branch has none, a down target may have
            # no remembered host): it sets a variable only where the label is there, never `var-host=`
            optional = alert.absence is not None
            vars = links.scoped_vars(self.config, alert.dashboard.vars) if alert.dashboard.vars else {}
            params = [
                f"var-{var}={{{{ $labels.{sub(label)} }}}}" for var, label in vars.items() if not optional
            ]
            panel = self.dashboard_panels.get(alert.dashboard.uid, {}).get(alert.alert)
            params += [f"viewPanel={panel}"] if panel is not None else []
            if params or optional and vars:
                url = f"{url}?{'&'.join(params)}"
            if optional:
                url += "".join(
                    f"{{{{ with $labels.{sub(label)} }}}}&var-{var}={{{{ . }}}}{{{{ end }}}}"
                    for var, label in vars.items()
                )
            out["dashboard_url"] = url
        out.update({k: sub(v) for k, v in alert.annotations.items()})
        return dict(sorted(out.items()))
