"""Run a runbook's steps against a Prometheus and judge each one.

Every step's query is rebuilt with a ScopedBuilder, so filters (`--label`, or the firing alert's
labels within the runbook's scope) land in the selectors themselves, not in string edits.

An alert asked for by name, without firing labels, is first scoped to a subject: the alert's own
step (its symptom) is run, and the worst series where the alert's condition holds gives the labels
every other step is narrowed to, as if that series were the firing alert. Where the condition holds
nowhere there is no subject, and no step's verdict is offered as a cause.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..model import AlertRule, Model
from ..runbooks import book, links
from ..spec import runbooks as s
from ..runbooks.queries import Queries, ScopedBuilder, workload_renames
from .client import Client, QueryFailed
from .verdict import ResultRow, breaches, judge, overall, rows_of, sort_worst_first

Filter = tuple[str, str, str]  # (label, op, value)
Progress = Callable[[int, int, str, str], None]


@dataclass
class StepResult:
    step: book.PageStep
    expr: str
    filters: tuple[Filter, ...]
    verdict: str
    detail: str
    rows: list[ResultRow] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    skipped_filters: tuple[str, ...] = ()

    @property
    def cause(self) -> str:
        return self.step.step.cause.strip()


@dataclass
class Investigation:
    alert: AlertRule
    page: book.Page
    alert_labels: dict
    filters: tuple[Filter, ...]
    at: float
    results: list[StepResult]
    source: str  # "firing alert", "worst subject" (on request, the condition holds) or "on request"
    others: int = 0  # with "worst subject": how many other series hold the alert's condition too

    @property
    def verdict(self) -> str:
        return overall([r.verdict for r in self.results])

    @property
    def symptom(self) -> StepResult | None:
        """The step that measures what the alert itself watches (its signal, or its absence condition)."""
        own = symptom_step(self.alert, [r.step for r in self.results])
        return next((r for r in self.results if r.step is own), None)

    @property
    def scoped(self) -> bool:
        """Whether the steps are narrowed to one subject: a firing alert's labels or the worst series."""
        return bool(self.alert_labels)

    @property
    def about_sources(self) -> bool:
        """Whether the alert watches something missing (its steps are about targets and names)."""
        own = self.symptom
        return own is not None and own.step.step.query.kind == "absence"

    @property
    def findings(self) -> list[StepResult]:
        """Steps other than the symptom that point at a cause, the worst first (then in page order).

        Only evidence about the alert's own subject counts: without one (a value the condition holds
        for nowhere) nothing is a cause, and a step that could not take the subject's labels is context,
        not a cause. An absence alert's steps ask about the sources, not a subject's value, so they
        count whatever the scope.
        """
        if not self.scoped and not self.about_sources:
            return []
        symptom = self.symptom
        bad = [
            r
            for r in self.results
            if r.verdict in ("unhealthy", "suspicious")
            and r.cause
            and r is not symptom
            and not r.skipped_filters
        ]
        return sorted(bad, key=lambda r: (r.verdict != "unhealthy", r.step.number))

    @property
    def errors(self) -> list[StepResult]:
        return [r for r in self.results if r.verdict == "error"]

    @property
    def runbook_url(self) -> str:
        return self.alert.annotations.get("runbook_url", "")

    def dashboards(self, model: Model) -> list[tuple[str, str]]:
        """(title, url) with variables filled in from what this investigation knows."""
        values: dict[str, str] = {label: value for label, op, value in self.filters if op == "="}
        values.update({k: v for k, v in self.alert_labels.items()})
        first = next(
            (r for r in self.results if r.rows and r.verdict in ("unhealthy", "suspicious", "healthy")), None
        )
        if first is not None:
            for k, v in first.rows[0].labels.items():
                values.setdefault(k, v)
        tokens = model.builder.labels.tokens()
        out = []
        for uid, slug, title, vars, _ in book.dashboards(self.page):
            out.append((title, links.dashboard_url(model.config, uid, slug, vars, values, tokens)))
        return out


def symptom_step(alert: AlertRule, steps) -> book.PageStep | None:
    """The page step that measures what the alert itself watches (its signal, or its absence condition)."""
    spec = alert.spec
    for ps in steps:
        q = ps.step.query
        if getattr(spec, "slo", None) and q.kind == "slo" and q.measure == "burn_rate":
            return ps  # an SLO alert's symptom: the first burn rate its page measures
        if (
            spec.signal
            and q.kind == "signal"
            and q.signal == spec.signal
            and not q.agg
            and not q.change
            and (q.quantile is None or spec.quantile is None or abs(q.quantile - spec.quantile) < 1e-9)
        ):
            return ps
        if spec.absence and q.kind == "absence" and q.absence in (None, spec.absence.kind):
            return ps
    return None


def subject_labels(model: Model, page: book.Page, row: ResultRow) -> dict:
    """The labels a firing alert on this series would carry within the page's scope: a GPU's workload
    namespace is `namespace` on the alert and `exported_namespace` (as configured) on its series."""
    renames = workload_renames(model.builder)
    out = {}
    for label in page.scope:
        value = row.labels.get(label) or row.labels.get(renames.get(label, label))
        if value:
            out[label] = value
    return out


def step_filters(
    model: Model, page: book.Page, st: s.Step, alert_labels: dict, extra: tuple[Filter, ...]
) -> tuple[Filter, ...]:
    scope = Queries(model).tokens(st.scope) if st.scope is not None else list(page.scope)
    own = tuple((k, "=", alert_labels[k]) for k in scope if k in alert_labels)
    return tuple(dict.fromkeys(extra + own))


def run(
    model: Model,
    page: book.Page,
    client: Client,
    *,
    filters: tuple[Filter, ...] = (),
    alert_labels: dict | None = None,
    at: float | None = None,
    progress: Progress | None = None,
    source: str = "on request",
) -> Investigation:
    alert_labels = dict(alert_labels or {})
    at = time.time() if at is None else at
    builders: dict[tuple, ScopedBuilder] = {}

    def one(ps: book.PageStep, labels: dict) -> StepResult:
        fl = step_filters(model, page, ps.step, labels, filters)
        sb = builders.setdefault(fl, ScopedBuilder(model.config, fl, model.spec.signals))
        return _run_step(model, page, ps, client, sb, fl, at)

    others = 0
    own = symptom_step(page.alert, page.steps)
    if not alert_labels and own is not None:
        first = one(own, {})
        holding = [row for row in first.rows if breaches(own, row)] if first.verdict != "error" else []
        if holding:
            alert_labels, others, source = (
                subject_labels(model, page, holding[0]),
                len(holding) - 1,
                "worst subject",
            )
    results = []
    n = len(page.steps)
    for i, ps in enumerate(page.steps, 1):
        if progress:
            progress(i, n, page.name, ps.step.title)
        results.append(one(ps, alert_labels))
    return Investigation(page.alert, page, alert_labels, filters, at, results, source, others)


def _run_step(model, page, ps, client, sb: ScopedBuilder, fl: tuple[Filter, ...], at: float) -> StepResult:
    expr = Queries(model, sb).build(ps.step.query, page.alert)
    skipped = _unapplied(sb, ps.step.query, fl)
    t0 = time.monotonic()
    try:
        rows = rows_of(client.query(expr, at))
    except QueryFailed as exc:
        return StepResult(
            ps,
            expr,
            fl,
            "error",
            str(exc),
            error=str(exc),
            seconds=time.monotonic() - t0,
            skipped_filters=skipped,
        )
    j = judge(ps, rows)
    return StepResult(
        ps,
        expr,
        fl,
        j.verdict,
        j.detail,
        sort_worst_first(ps, rows),
        seconds=time.monotonic() - t0,
        skipped_filters=skipped,
    )


def _unapplied(sb: ScopedBuilder, q, filters: tuple[Filter, ...]) -> tuple[str, ...]:
    """Filters this step's series cannot carry (reported, so an unfiltered answer is not a surprise)."""
    metric = getattr(q, "metric", None) or getattr(q, "numerator", None)
    if metric is None and q.kind in ("signal", "imbalance"):
        return ()
    if metric is None:
        return ()
    applied = {m.split("=", 1)[0].rstrip("!~") for m in sb.filter_matchers(metric)}
    renamed = sb._known(metric)[1]
    return tuple(label for label, _, _ in filters if renamed.get(label, label) not in applied)
