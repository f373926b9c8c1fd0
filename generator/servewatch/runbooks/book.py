"""Runbooks resolved against the Model: one page per enabled alert, each step with its PromQL and
its thresholds (numbers taken from the spec, so an override of an alert's threshold moves every
step that refers to it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model import AlertRule, Model, effective_alert
from ..slo.plan import INPUTS_FOR, BurnAlert, InputsAlert
from ..spec.schema import Alert
from ..spec import runbooks as s
from .queries import Queries

STEP_REF_RE = re.compile(r"\[\[step:([a-z][a-z0-9-]*)\]\]")


@dataclass(frozen=True)
class Limits:
    """How a step's value is judged: `op` says which side is bad."""

    op: str = ">"
    suspicious: float | None = None
    unhealthy: float | None = None
    note: str = ""  # where the unhealthy number comes from, for the page
    suspicious_note: str = ""  # where the suspicious number comes from

    def source(self, which: str) -> str:
        """Where the `unhealthy` or `suspicious` number comes from, said next to each verdict it gives."""
        note = self.note if which == "unhealthy" else self.suspicious_note
        return note or "the runbook step's own threshold"

    @property
    def judged(self) -> bool:
        return self.suspicious is not None or self.unhealthy is not None


@dataclass(frozen=True)
class PageStep:
    number: int
    step: s.Step
    expr: str
    limits: Limits
    expected_names: dict = field(default_factory=dict)  # names step: name -> what it goes by elsewhere
    expected_labels: tuple[str, ...] = ()  # labels step: labels the config relies on
    listed_labels: tuple[str, ...] = ()  # labels step: every label it counts by

    @property
    def id(self) -> str:
        return self.step.id


@dataclass(frozen=True)
class Page:
    alert: AlertRule
    runbook: s.Runbook
    steps: tuple[PageStep, ...]
    scope: tuple[str, ...]
    written: bool  # False: no runbook in the specs, this is the default page

    @property
    def name(self) -> str:
        return self.alert.alert

    def step(self, step_id: str) -> PageStep | None:
        return next((p for p in self.steps if p.id == step_id), None)


# -- thresholds -----------------------------------------------------------------------------


def _alert_spec(model: Model, name: str) -> Alert | None:
    for g in model.spec.groups:
        for a in g.alerts:
            if a.alert == name:
                return effective_alert(a, model.spec)
    return None


def step_threshold(model: Model, page_alert: str, t) -> float | None:
    """The number a step threshold stands for on `page_alert`'s page (None: unjudged)."""
    if t is None:
        return None
    if isinstance(t, s.AlertThreshold):
        a = _alert_spec(model, t.of or page_alert)
        return None if a is None or a.threshold is None else a.threshold * t.alert
    return float(t)


def alert_threshold_note(model: Model, alert: Alert) -> str:
    """`X's threshold 0.95`, saying so when overrides tuned it: the number a verdict is judged against."""
    ov = model.spec.overrides.alerts.get(alert.alert)
    tuned = ", tuned in overrides" if ov is not None and ov.threshold is not None else ""
    return f"{alert.alert}'s threshold {alert.threshold:g}{tuned}"


def _describe(model: Model, page_alert: str, t) -> str:
    if isinstance(t, s.AlertThreshold):
        target = t.of or page_alert
        a = _alert_spec(model, target)
        base = alert_threshold_note(model, a) if a is not None and a.threshold is not None else target
        return base if t.alert == 1 else f"{t.alert:g} x {base}"
    return ""


def limits(model: Model, page_alert: str, step: s.Step) -> Limits:
    """A step's thresholds. A `signal` step without an explicit `unhealthy` takes the threshold of
    the alert watching that signal (write `unhealthy: null` to keep a signal step unjudged)."""
    sus, unh = (
        step_threshold(model, page_alert, step.suspicious),
        step_threshold(model, page_alert, step.unhealthy),
    )
    op = step.op
    notes = [d for d in (_describe(model, page_alert, step.unhealthy),) if d]
    sus_note = _describe(model, page_alert, step.suspicious)
    if unh is None and "unhealthy" not in step.model_fields_set and step.query.kind == "slo":
        row = _burn_row(model, page_alert, step.query)
        if row is not None:
            unh, notes = row.burn_rate, [f"the {row.long}/{row.short} {row.tier} row's burn rate"]
    if unh is None and "unhealthy" not in step.model_fields_set and step.query.kind == "signal":
        watcher = _watcher(model, page_alert, step.query.signal, step.query.quantile)
        if watcher is not None:
            unh = watcher.threshold
            op = op or ("<" if watcher.op in ("<", "<=") else ">")
            notes = [alert_threshold_note(model, watcher)]
    return Limits(
        op=op or ">", suspicious=sus, unhealthy=unh, note="; ".join(notes), suspicious_note=sus_note
    )


def _burn_row(model: Model, page_alert: str, q: s.SloQuery):
    """The burn-rate row a `slo` burn_rate step's window belongs to (long window first): its rate is
    what the step is judged by."""
    if q.measure != "burn_rate":
        return None
    rows = [a.spec for a in model.alerts() if isinstance(a.spec, BurnAlert) and a.alert == page_alert]
    rows = [r for r in rows if q.slo in (None, r.slo)]
    return next((r for r in rows if r.long == q.window), None) or next(
        (r for r in rows if r.short == q.window), None
    )


def _watcher(model: Model, page_alert: str, signal: str, quantile: float | None) -> Alert | None:
    """The alert that watches this signal (the page's own first), for default thresholds."""
    candidates = [page_alert] + [
        a.alert for g in model.spec.groups for a in g.alerts if a.alert != page_alert
    ]
    sig = model.spec.signals.get(signal)
    for name in candidates:
        a = _alert_spec(model, name)
        if a is None or a.signal != signal or a.threshold is None:
            continue
        q = (
            quantile
            if quantile is not None
            else (sig.quantiles[0] if sig is not None and sig.quantiles else None)
        )
        if a.quantile is None or q is None or abs(a.quantile - q) < 1e-9:
            return a
    return None


# -- pages ----------------------------------------------------------------------------------


def default_runbook(alert: AlertRule) -> s.Runbook:
    """The page for an alert nobody wrote a runbook for: its own condition as the one step."""
    a = alert.spec
    if isinstance(a, BurnAlert):
        q = {"kind": "slo", "measure": "burn_rate", "window": a.long}
        step = {"id": "burn-rate", "title": f"Burn rate over {a.long}", "query": q, "unit": "factor"}
    elif isinstance(a, InputsAlert):  # the traffic the SLO cannot judge while its input is missing
        q = {"kind": "slo", "slo": a.slo, "measure": "events", "window": INPUTS_FOR}
        step = {"id": "valid-events", "title": f"Requests of the model over {INPUTS_FOR}", "query": q}
    elif a.signal:
        q = {"kind": "signal", "signal": a.signal, "quantile": a.quantile}
        step = {"id": "alert-value", "title": "The value the alert watches", "query": q}
    else:
        step = {
            "id": "alert-condition",
            "title": "The condition the alert watches",
            "query": {"kind": "absence"},
            "empty": "healthy",
            "present": "unhealthy",
            "cause": a.summary,
        }
    return s.Runbook.model_validate({"meaning": a.summary, "steps": [step]})


def default_scope(model: Model, alert: AlertRule) -> tuple[str, ...]:
    """Labels of a firing alert that scope its investigation: the identity it fires per."""
    a = alert.spec
    if isinstance(a, (BurnAlert, InputsAlert)):
        return tuple(model.builder.labels.identity("model"))
    if a.signal:
        sig = model.signal(a.signal)
        return tuple(model.builder.level_identity(sig.metric, sig.level))  # a pool's names no model
    if a.absence and a.absence.kind == "partner_missing":
        return tuple(model.builder.labels.identity("gpu")) + tuple(model.builder.labels.target())
    return tuple(model.builder.labels.target()) + ("namespace", "pod")


def pages(model: Model, builder=None) -> list[Page]:
    """One page per enabled alert name (an SLO's burn-rate rows share one): its written runbook, or
    the default page."""
    first = {}
    for a in model.alerts():
        first.setdefault(a.alert, a)
    return [page(model, a, model.spec.runbooks.get(name), builder) for name, a in first.items()]


def page(model: Model, alert: AlertRule, rb: s.Runbook | None, builder=None) -> Page:
    written = rb is not None
    rb = rb or default_runbook(alert)
    queries = Queries(model, builder)
    steps = []
    for n, step in enumerate(rb.steps, 1):
        expr = queries.build(step.query, alert)
        expected = queries.expected_names(step.query) if step.query.kind == "names" else {}
        is_labels = step.query.kind == "labels"
        labels = tuple(dict.fromkeys(queries.tokens(step.query.expect))) if is_labels else ()
        listed = tuple(dict.fromkeys(queries.tokens(step.query.labels))) if is_labels else ()
        steps.append(PageStep(n, step, expr, limits(model, alert.alert, step), expected, labels, listed))
    scope = tuple(queries.tokens(rb.scope)) if rb.scope is not None else default_scope(model, alert)
    return Page(alert, rb, tuple(steps), scope, written)


def dashboards(page: Page) -> list[tuple[str, str, str, dict, str]]:
    """(uid, slug, title, vars, note) of the alert's own dashboard, then the runbook's others."""
    found = []
    d = page.alert.spec.dashboard
    if d is not None:
        same = [x for x in page.runbook.dashboards if x.uid == d.uid]
        title = same[0].title if same else d.uid
        extra = {k: v for x in same for k, v in x.vars.items() if k not in d.vars}
        found.append((d.uid, d.slug, title, {**d.vars, **extra}, "the alert's own dashboard"))
    for link in page.runbook.dashboards:
        if all(link.uid != f[0] for f in found):
            found.append((link.uid, link.slug, link.title, dict(link.vars), ""))
    return found
