"""Runbooks resolved against the Model: one page per enabled alert, each step with its PromQL and
its thresholds (numbers taken from the spec, so an override of an alert's threshold moves every
step that refers to it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from ..errors import Location, SpecError, SpecErrors
from ..model import AlertRule, Model, effective_alert
from ..spec.schema import Alert
from ..templates import TOKEN_RE
from ..spec import runbooks as s
from .queries import Queries

SOURCE_FILE = "specs/runbooks.yaml"
STEP_REF_RE = re.compile(r"\[\[step:([a-z][a-z0-9-]*)\]\]")


@dataclass(frozen=True)
class Limits:
    """How a step's value is judged: `op` says which side is bad."""

    op: str = ">"
    suspicious: float | None = None
    unhealthy: float | None = None
    note: str = ""  # where the numbers come from, for the page

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


# -- loading and validation --------------------------------------------------------------------


def _locate(spec, name: str, sub: tuple = ()) -> Location:
    if hasattr(spec, "locate"):
        return spec.locate("runbook", name, *sub)
    doc = spec.where.get(("runbook-doc", name))
    if doc is not None and hasattr(doc, "locate"):
        return doc.locate(("runbooks", name) + tuple(sub))
    loc = spec.where.get(("runbook", name))
    return (
        loc
        if isinstance(loc, Location)
        else Location(SOURCE_FILE, None, ".".join(map(str, ("runbooks", name) + sub)))
    )


def _clean_loc(loc: tuple, data) -> tuple:
    """Drop pydantic's union tags from an error location so it maps onto the YAML path."""
    out, node = [], data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part not in node and part in s.QUERY_KINDS:
            continue  # the discriminator tag pydantic inserts
        if (
            isinstance(part, str)
            and (part.startswith("function-") or part in ("float", "AlertThreshold"))
            and not (isinstance(node, dict) and part in node)
        ):
            continue
        out.append(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return tuple(out)


def validate(model: Model) -> dict[str, s.Runbook]:
    """Validate the spec's `runbooks:` section against the schema and the rest of the spec."""
    spec = model.spec
    errors: list[SpecError] = []
    out: dict[str, s.Runbook] = {}
    all_alerts = {a.alert: a for g in spec.groups for a in g.alerts}
    for name, raw in (spec.runbooks or {}).items():
        if name not in all_alerts:
            close = [a for a in all_alerts if a.lower() == str(name).lower()]
            hint = f"; did you mean {close[0]!r}?" if close else ""
            errors.append(SpecError(f"runbook for unknown alert {name!r}{hint}", _locate(spec, name)))
            continue
        try:
            out[name] = s.Runbook.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                loc = _clean_loc(err["loc"], raw)
                msg = err["msg"].removeprefix("Value error, ")
                if err["type"] == "extra_forbidden":
                    msg = f"unknown field {loc[-1]!r}"
                elif err["type"] == "missing":
                    msg = f"missing required field {loc[-1]!r}"
                elif err["type"] == "union_tag_invalid":
                    msg = f"unknown query kind; use one of {', '.join(s.QUERY_KINDS)}"
                errors.append(SpecError(msg, _locate(spec, name, loc)))
    if errors:
        raise SpecErrors(errors)
    for name, rb in out.items():
        errors.extend(_cross_check(model, name, rb, all_alerts))
    if errors:
        raise SpecErrors(errors)
    return out


def _cross_check(model: Model, name: str, rb: s.Runbook, all_alerts: dict) -> list[SpecError]:
    spec, errs = model.spec, []
    catalog = model.builder.catalog
    tokens = model.builder.labels.tokens()

    def err(msg, *sub):
        errs.append(SpecError(msg, _locate(spec, name, sub)))

    def metric_ok(metric: str, where: tuple, want: tuple[str, ...] = ()):
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
                    from ..promql.builders import parse_matchers

                    parse_matchers(text)
                except ValueError as exc:
                    err(str(exc), *at, field_name)
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
            sus, unh = _number(model, name, step.suspicious), _number(model, name, step.unhealthy)
            op = step.op or ">"
            if sus is not None and unh is not None and (sus > unh if op == ">" else sus < unh):
                err(
                    f"suspicious ({sus:g}) is beyond unhealthy ({unh:g}) for op {op!r}",
                    "steps",
                    i,
                    "suspicious",
                )
    return errs


def check_dashboards(model: Model, runbooks: dict[str, s.Runbook], boards: dict[str, dict]) -> None:
    """Every runbook's `dashboards:` link must name a generated dashboard (`uid`) and only variables
    that dashboard has (`vars`): a typo would otherwise render a link to nothing, or a variable
    Grafana ignores. `boards` is `render.dashboards.dashboards(model)`, {name: dashboard dict}."""
    by_uid = {d["uid"]: d for d in boards.values()}
    errors: dict[str, SpecError] = {}  # keyed by text: a YAML alias shared by pages is reported once

    def err(msg, name, *sub):
        e = SpecError(msg, _locate(model.spec, name, sub))
        errors.setdefault(str(e), e)

    for name, rb in runbooks.items():
        for i, link in enumerate(rb.dashboards):
            board = by_uid.get(link.uid)
            if board is None:
                close = [u for u in by_uid if u.replace("-", "").startswith(link.uid.replace("-", "")[:12])]
                hint = f"; did you mean {close[0]!r}?" if len(close) == 1 else ""
                err(
                    f"dashboard uid {link.uid!r} is not a generated dashboard{hint} "
                    f"(generated: {', '.join(sorted(by_uid))})",
                    name,
                    "dashboards",
                    i,
                    "uid",
                )
                continue
            names = {v["name"] for v in board.get("templating", {}).get("list", [])}
            for var in link.vars:
                if var not in names:
                    err(
                        f"dashboard {link.uid!r} has no variable {var!r}; it has {', '.join(sorted(names))}",
                        name,
                        "dashboards",
                        i,
                        "vars",
                        var,
                    )
    if errors:
        raise SpecErrors(list(errors.values()))


def _prose_fields(rb: s.Runbook):
    for key in ("meaning", "not_meaning", "impact"):
        yield getattr(rb, key), (key,)
    for key in ("causes", "actions"):
        for i, text in enumerate(getattr(rb, key)):
            yield text, (key, i)
    for i, st in enumerate(rb.steps):
        for key in ("title", "why", "healthy_means", "unhealthy_means", "cause"):
            yield getattr(st, key), ("steps", i, key)


# -- thresholds -----------------------------------------------------------------------------


def _alert_spec(model: Model, name: str) -> Alert | None:
    for g in model.spec.groups:
        for a in g.alerts:
            if a.alert == name:
                return effective_alert(a, model.spec)
    return None


def _number(model: Model, page_alert: str, t) -> float | None:
    if t is None:
        return None
    if isinstance(t, s.AlertThreshold):
        a = _alert_spec(model, t.of or page_alert)
        return None if a is None or a.threshold is None else a.threshold * t.alert
    return float(t)


def _describe(model: Model, page_alert: str, t) -> str:
    if isinstance(t, s.AlertThreshold):
        target = t.of or page_alert
        a = _alert_spec(model, target)
        base = f"{target}'s threshold {a.threshold:g}" if a else target
        return base if t.alert == 1 else f"{t.alert:g} x {base}"
    return ""


def limits(model: Model, page_alert: str, step: s.Step) -> Limits:
    """A step's thresholds. A `signal` step without an explicit `unhealthy` takes the threshold of
    the alert watching that signal (write `unhealthy: null` to keep a signal step unjudged)."""
    sus, unh = _number(model, page_alert, step.suspicious), _number(model, page_alert, step.unhealthy)
    op = step.op
    notes = [d for d in (_describe(model, page_alert, step.unhealthy),) if d]
    if unh is None and "unhealthy" not in step.model_fields_set and step.query.kind == "signal":
        watcher = _watcher(model, page_alert, step.query.signal, step.query.quantile)
        if watcher is not None:
            unh = watcher.threshold
            op = op or ("<" if watcher.op in ("<", "<=") else ">")
            notes = [f"{watcher.alert}'s threshold {watcher.threshold:g}"]
    return Limits(op=op or ">", suspicious=sus, unhealthy=unh, note="; ".join(notes))


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
    if a.signal:
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
    if a.signal:
        sig = model.signal(a.signal)
        return tuple(model.builder.labels.identity(sig.level))
    if a.absence and a.absence.kind == "partner_missing":
        return tuple(model.builder.labels.identity("gpu")) + tuple(model.builder.labels.target())
    return tuple(model.builder.labels.target()) + ("namespace", "pod")


def pages(model: Model, runbooks: dict[str, s.Runbook] | None = None, builder=None) -> list[Page]:
    runbooks = validate(model) if runbooks is None else runbooks
    return [page(model, a, runbooks.get(a.alert), builder) for a in model.alerts()]


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
