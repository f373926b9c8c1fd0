"""The `runbooks:` section checked against the rest of the spec: each runbook belongs to an alert,
names signals, metrics, tokens and alerts that exist, refers only to its own steps, and orders its
thresholds the way its `op` reads."""

from __future__ import annotations

from ..errors import SpecError
from ..model import Model
from ..promql.builders import parse_matchers
from ..runbooks.book import STEP_REF_RE, step_threshold
from ..slo.exprs import sli_windows
from ..slo.plan import FAMILY as SLO_FAMILY
from ..spec import runbooks as s
from ..spec.translate import did_you_mean
from ..slo.plan import INPUTS_ALERT
from ..templates import TOKEN_RE


def runbook_problems(model: Model) -> list[SpecError]:
    spec = model.spec
    all_alerts = {a.alert: a for g in spec.groups for a in g.alerts}
    all_alerts.update({a.alert: a.spec for a in model.alerts() if a.family == SLO_FAMILY})
    errors: list[SpecError] = []
    for name, rb in spec.runbooks.items():
        if name == INPUTS_ALERT and spec.slos and name not in all_alerts:
            continue  # the SLOs lose no input here (native histograms): a runbook kept for other setups
        if name not in all_alerts:
            errors.append(
                SpecError(
                    f"runbook for unknown alert {name!r}{did_you_mean(name, all_alerts)}",
                    spec.locate("runbook", name),
                )
            )
            continue
        errors.extend(_problems(model, name, rb, all_alerts))
    return errors


def _problems(model: Model, name: str, rb: s.Runbook, all_alerts: dict) -> list[SpecError]:
    """What is wrong in the runbook of alert `name`."""
    spec, errs = model.spec, []
    catalog = model.builder.catalog
    tokens = model.builder.labels.tokens()

    def err(msg, *sub):
        errs.append(SpecError(msg, spec.locate("runbook", name, *sub)))

    def metric_ok(metric: str, where: tuple, want: tuple[str, ...] = ()):
        if model.builder.is_dcgm_field(metric):  # named by the exporter profile or by config
            problem = model.builder.labels.unnamed_field(metric)
            if problem:
                err(problem, *where)
            return
        actual = model.builder.metric_name(metric)
        problem = catalog.problem(actual)
        if problem:
            err(problem, *where)
            return
        entry = catalog.lookup(actual)
        if want and entry.type not in want and not (entry.type == "histogram" and actual != entry.name):
            err(f"metric {actual!r} is a {entry.type}; this query kind needs a {' or '.join(want)}", *where)

    step_ids = {st.id for st in rb.steps}
    for text, where in _prose_fields(rb):
        for ref in STEP_REF_RE.findall(text):
            if ref not in step_ids:
                err(
                    f"[[step:{ref}]] names no step of this runbook "
                    f"(steps: {', '.join(sorted(step_ids)) or 'none'})",
                    *where,
                )
        for tok in TOKEN_RE.findall(STEP_REF_RE.sub("", text)):
            if tok not in tokens:
                err(f"unknown token [[{tok}]]; known: {', '.join(sorted(tokens))}", *where)
    for token_list, where in ((rb.scope or (), ("scope",)),):
        for t in token_list:
            if t.startswith("[[") and t[2:-2] not in tokens:
                err(f"unknown token {t}; known: {', '.join(sorted(tokens))}", *where)
    for i, step in enumerate(rb.steps):
        q, at = step.query, ("steps", i, "query")
        for label in getattr(q, "by", ()) + getattr(q, "labels", ()) + (step.scope or ()):
            if label.startswith("[[") and label[2:-2] not in tokens:
                err(f"unknown token {label}; known: {', '.join(sorted(tokens))}", *at)
        if q.kind in ("signal", "imbalance"):
            if q.signal not in spec.signals:
                err(f"unknown signal {q.signal!r}", *at, "signal")
            elif q.kind == "imbalance" and spec.signals[q.signal].level != "gpu" and not q.by:
                err("an imbalance needs `by` labels to group the members", *at, "by")
        if q.kind in ("quantile", "mean"):
            metric_ok(q.metric, at + ("metric",), ("histogram",))
        if q.kind in ("rate",):
            metric_ok(q.metric, at + ("metric",), ("counter", "histogram"))
        if q.kind == "ratio":
            metric_ok(q.numerator, at + ("numerator",), ("counter", "histogram"))
            metric_ok(q.denominator, at + ("denominator",), ("counter", "histogram"))
        if q.kind in ("gauge", "trend"):
            metric_ok(q.metric, at + ("metric",), ("gauge", "info"))
        if q.kind == "labels" and q.metric:
            metric_ok(q.metric, at + ("metric",))
        for field_name in ("matchers", "numerator_matchers", "denominator_matchers"):
            text = getattr(q, field_name, "")
            if text:
                try:
                    parse_matchers(text)
                except ValueError as exc:
                    err(str(exc), *at, field_name)
        if q.kind == "slo":
            _slo_step_problems(model, all_alerts[name], q, lambda m, *f, at=at: err(m, *at, *f))
        if q.kind == "absence":
            alert = all_alerts[name]
            if alert.absence is None and not (q.absence and q.source):
                err("an absence step on an alert without `absence` needs both `absence` and `source`", *at)
            kind = q.absence or (alert.absence.kind if alert.absence else None)
            sig = q.signal or (alert.absence.signal if alert.absence else None)
            if kind == "partner_missing" and sig and sig not in spec.signals:
                err(f"unknown signal {sig!r}", *at, "signal")
            elif kind == "partner_missing" and (not sig or spec.signals[sig].kind != "matched_ratio"):
                err("a partner_missing step needs a matched_ratio `signal`", *at)
        for tname in ("suspicious", "unhealthy"):
            t = getattr(step, tname)
            if isinstance(t, s.AlertThreshold):
                target = t.of or name
                other = all_alerts.get(target)
                if other is None:
                    err(f"threshold refers to unknown alert {target!r}", "steps", i, tname, "of")
                elif other.threshold is None:
                    err(f"alert {target!r} has no threshold to refer to", "steps", i, tname)
        if step.suspicious is not None and step.unhealthy is not None:
            sus, unh = (
                step_threshold(model, name, step.suspicious),
                step_threshold(model, name, step.unhealthy),
            )
            op = step.op or ">"
            if sus is not None and unh is not None and (sus > unh if op == ">" else sus < unh):
                err(
                    f"suspicious ({sus:g}) is beyond unhealthy ({unh:g}) for op {op!r}",
                    "steps",
                    i,
                    "suspicious",
                )
    return errs


def _slo_step_problems(model: Model, alert, q: s.SloQuery, err) -> None:
    """An `slo` step names an SLO (or belongs to an SLO's alert) and a window that SLO records."""
    slos = model.spec.slos
    name = q.slo or getattr(alert, "slo", None)
    if name is None:
        err("an slo step on an alert that is not an SLO's needs `slo`", "slo")
    elif name not in slos:
        err(f"unknown SLO {name!r}{did_you_mean(name, slos)}", "slo")
    elif q.measure in ("burn_rate", "error_ratio") and q.window not in sli_windows(
        slos[name], model.config.rate_window
    ):
        recorded = ", ".join(sli_windows(slos[name], model.config.rate_window))
        err(f"SLO {name!r} records no error ratio over {q.window} (it records {recorded})", "window")


def _prose_fields(rb: s.Runbook):
    for key in ("meaning", "not_meaning", "impact"):
        yield getattr(rb, key), (key,)
    for key in ("causes", "actions"):
        for i, text in enumerate(getattr(rb, key)):
            yield text, (key, i)
    for i, st in enumerate(rb.steps):
        for key in ("title", "why", "healthy_means", "unhealthy_means", "cause"):
            yield getattr(st, key), ("steps", i, key)
