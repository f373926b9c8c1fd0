"""The SLO tests designed from the SLO specs, which render/slo_tests.py writes to promtool/slo.test.yaml.

The scenarios and what the rules answer on them come from servewatch/slo/scenarios.py; this module
turns them into promtool tests: one test per batch of scenarios with one synthetic model per scenario
(named after it, its engines in the SLO's scope: slo_engines.py), input series in promtool's notation,
and at each check time every burn-rate alert that fires, with its labels and annotations (burn rate
and remaining budget in the text), beside the claim each model proves. A claim the design cannot show
with the spec's settings is a spec error, raised here before anything is rendered.

The tests evaluate the rules every `EVALUATION_EVERY` (their evaluation_interval), not every minute:
promtool's cost is per evaluation, and each claim holds at any step the design plans for.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, replace

from .. import diskcache, templates
from ..model import AlertRule, Model, RuleGroup
from ..slo.exprs import MODEL, quoted
from ..slo.kinds import ClientAvailabilityKind, kind_of, le_value
from ..slo.plan import FAMILY, INPUTS_ALERT, INPUTS_FOR, BurnAlert, InputsAlert, budget_left_text
from ..spec.schema import seconds
from ..slo.scenarios import (
    IDLE,
    IDLE_CHECK,
    OUTSIDE,
    Designer,
    minutes,
    scenario_model,
)
from . import kept
from .scenario_tests import series_with_selectors
from .slo_shown import BatchShown, FiringShown, ProofShown, RunShown, ScenarioShown, as_json, shown
from .slo_engines import SloEngines, slo_engines


# How often the SLO tests evaluate the rules: a third of the evaluations a minute's step costs, and
# every duration the proof reads (the rate window, `for`, the windows) is still met at an evaluation.
EVALUATION_EVERY = "3m"


@dataclass(frozen=True)
class SloTestPlan:
    """The SLO tests as designed: promtool tests (plain data, series in their exact notation), the
    claims each synthetic model proves, as the file's header lists them, and how often they evaluate
    the rules (their evaluation_interval)."""

    tests: list[dict]
    claims: list[str]
    every: str = EVALUATION_EVERY


def slo_test_plan(model: Model) -> SloTestPlan:
    """The SLO tests of `model`, designed once per model, and taken from servewatch's cache when the
    same specs were designed with the same code before (diskcache.py): designing them simulates weeks
    of traffic, most of a build's time."""
    return model.planned("slo_tests", _kept_or_designed)


CACHE_KIND = "slo-plans"


def _kept_or_designed(model: Model) -> SloTestPlan:
    # keys in build order, as the renderer writes them
    return kept.kept_or_designed(model, CACHE_KIND, _design, lambda _, plan: as_json(plan), _from_json)


def _from_json(_: Model, data) -> SloTestPlan:
    return SloTestPlan(**data)


def _design(model: Model) -> SloTestPlan:
    tests, claims = [], []
    every = EVALUATION_EVERY
    for name, slo in model.slos.slos.items():
        where = model.spec.locate("slo", name)
        engines = slo_engines(model, name, slo)
        proof = _proof(model, name, slo, where, engines, every)
        tests += [_test(model, name, slo, batch, engines) for batch in proof.batches]
        claims += [_heading(name, slo, engines.solo)] + [_claim(b, sc) for b, sc in proof.scenarios]
    return SloTestPlan(tests, claims, every)


NAME_TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def input_groups(model: Model) -> list[RuleGroup]:
    """The groups of other families holding a record the SLO rules read (directly or through another
    record), each with only those records, in the model's order: the SLO tests load these besides
    the SLO groups (render/slo_tests.py)."""
    produced = {r.record for g in model.groups if g.family != FAMILY for r in g.records}
    exprs = [r.expr for g in model.groups if g.family == FAMILY for r in (*g.records, *g.alerts)]
    needed: set[str] = set()
    while exprs:
        found = {t for e in exprs for t in NAME_TOKEN.findall(e)} & produced - needed
        needed |= found
        exprs = [r.expr for g in model.groups if g.family != FAMILY for r in g.records if r.record in found]
    out = []
    for g in model.groups:
        records = tuple(r for r in g.records if r.record in needed)
        if g.family != FAMILY and records:
            out.append(replace(g, records=records, alerts=()))
    return out


# What proofs showed (slo_shown.py), kept in this process and on disk by everything the design reads:
# the SLO, the rate window, how its rules read the histogram, the bounds other SLOs read and whether
# its scope is one deployment. Not the config's selectors and labels, nor the other specs (tuned
# alerts, dashboards): the proof names each input series by a token (`_token`), and each test names
# it after its model's engines when it is written (`_test`). Making one simulates weeks of traffic,
# most of a build's time; spec sets that share an SLO (a tuned override, the tests, the fuzzer) make
# it once. A design that fails is not kept: its error names the spec it came from.
_PROOFS: dict[str, ProofShown] = {}
PROOFS_KEPT = 8
DESIGN_CACHE_KIND = "slo-designs"


def _proof(model: Model, name: str, slo, where, engines: SloEngines, every: str) -> ProofShown:
    by_part = bool(model.slos.x.records_read(slo))
    also_read = _bounds_read_by_others(model, name, slo)
    native = model.builder.histograms.native
    rate_window = model.config.rate_window
    made_from = [name, slo.model_dump(mode="json"), rate_window, by_part, native, engines.solo, every]
    made_from += [also_read] if also_read else []
    # availability at the client: how the source counts, which series its tests write, good, bad
    # or neither (catalog/gateway.yaml `outcome:`)
    at_client = isinstance(kind_of(slo.sli), ClientAvailabilityKind)
    outcome = model.builder.labels.errors_source.outcome if at_client else None
    made_from += [dataclasses.asdict(outcome)] if outcome is not None else []
    key = json.dumps(made_from, sort_keys=True)
    if key not in _PROOFS:
        disk_key = diskcache.key(key)
        proof = _kept_design(disk_key)
        if proof is None:
            designer = Designer(
                name,
                slo,
                rate_window,
                _token,
                where,
                by_part,
                native,
                also_read,
                engines.solo,
                outcome,
                minutes(every),
            )
            proof = shown(designer.proof())
            diskcache.put(DESIGN_CACHE_KIND, disk_key, proof.to_json())
        while len(_PROOFS) >= PROOFS_KEPT:
            del _PROOFS[next(iter(_PROOFS))]
        _PROOFS[key] = proof
    return _PROOFS[key]


def _kept_design(disk_key: str) -> ProofShown | None:
    text = diskcache.get(DESIGN_CACHE_KIND, disk_key)
    if text is None:
        return None
    try:
        return ProofShown.from_json(text)
    except (ValueError, TypeError, KeyError):
        return None  # a damaged entry is made again


def _token(model_name: str, metric: str, extra: dict[str, str]) -> str:
    """An input series as the proof names it: which model, metric and extra labels, nothing of the
    config; `_series_name` turns it into the selector the test writes."""
    return json.dumps([model_name, metric, extra], sort_keys=True)


def _heading(name: str, slo, solo: bool) -> str:
    name = f"{name}, measured at the client" if slo.side == "client" else name
    if slo.scope is None:
        return f"{name}:"
    if solo:  # plan/slo_engines.py
        return (
            f"{name} (for {slo.scope.text}, one deployment: every engine but {scenario_model(OUTSIDE)}* "
            "is it, each scenario in its own test):"
        )
    return f"{name} (for {slo.scope.text}: every model but {scenario_model(OUTSIDE)}* is moved into it):"


def _bounds_read_by_others(model: Model, name: str, slo) -> tuple[float, ...]:
    """The bucket bounds the other latency SLOs read from this SLO's histogram."""
    if model.builder.histograms.native or slo.sli.kind != "latency":
        return ()
    found = set()
    for other_name, other in model.slos.slos.items():
        if other_name != name and other.sli.kind == "latency" and other.sli.reads == slo.sli.reads:
            found |= {other.sli.threshold} | {o.threshold for o in other.per_model.values() if o.threshold}
    return tuple(sorted(found))


def _claim(batch: BatchShown, sc: ScenarioShown) -> str:
    models = " and ".join(batch.runs[i].model for i in sc.runs)
    times = ", ".join(f"{at}m" for at in sc.checks)
    return f"  {models}: {sc.claim} ({sc.why}; checked at {times})"


def _series_name(model: Model, engines: SloEngines, token: str) -> str:
    """The selector of the input series the proof names by `token`: its model's engine labels, the
    extra labels, the source that measures it (the engines or a client-side one) and the config's
    selectors."""
    model_name, metric, extra = json.loads(token)
    metric, labels = engines.input_series(metric, {**engines.labels(model_name), **extra})
    body = ", ".join(f"{k}={quoted(v)}" for k, v in labels.items())
    return series_with_selectors(model, f"{metric}{{{body}}}")


def notation(values: list[float]) -> str:
    """promtool's series notation for the values, exactly: `a+bxn` where adding b n times to a (as
    promtool does) gives the very same floats, single values elsewhere."""
    parts, i = [], 0
    while i < len(values):
        start, j = values[i], i + 1
        step = values[j] - start if j < len(values) else 0.0
        current = start
        while j < len(values) and current + step == values[j]:
            current += step
            j += 1
        if j - i > 1:
            sign = "-" if step < 0 else "+"
            parts.append(f"{templates.go_float(start)}{sign}{templates.go_float(abs(step))}x{j - i - 1}")
        else:
            parts.append(templates.go_float(start))
        i = j
    return " ".join(parts)


def _test(model: Model, name: str, slo, batch: BatchShown, engines: SloEngines) -> dict:
    """One batch's test: its models' series up to its last check, and at each check every burn-rate
    alert of its models that fires."""
    alert = slo.alerting.alert
    checks = []
    for at, firing_now in zip(batch.checks, batch.firing, strict=True):
        expected = [
            _expected(model, name, slo, engines.labels(batch.runs[f.run].model), f) for f in firing_now
        ]
        expected.sort(key=lambda e: sorted(e["exp_labels"].items()))
        checks.append({"eval_time": f"{at}m", "alertname": alert, "exp_alerts": expected})
        firing = _inputs_firing(model, slo, batch, engines, at)
        missing = [_inputs_expected(model, rule, engines.labels(run.model)) for run, rule in firing]
        if missing or _inputs_rules(model, name):
            missing.sort(key=lambda e: sorted(e["exp_labels"].items()))
            checks.append({"eval_time": f"{at}m", "alertname": INPUTS_ALERT, "exp_alerts": missing})
    end = batch.checks[-1] + 1  # nothing after the last check can change what promtool sees
    test = {
        "name": f"{name}: {'; '.join(sc.claim for sc in batch.scenarios)}",
        "interval": "1m",
        "input_series": [
            {"series": _series_name(model, engines, token), "values": notation(list(values[:end]))}
            for run in batch.runs
            for token, values in run.series
        ],
        "alert_rule_test": checks,
    }
    records = []
    if any(sc.key == IDLE for sc in batch.scenarios):
        records += _idle_records(model, name, slo, engines)
    for sc in batch.scenarios:
        outside = [batch.runs[i] for i in sc.runs if batch.runs[i].outside]
        records += [r for run in outside for r in _unrecorded(model, name, run, sc, engines)]
    if records:
        test["promql_expr_test"] = records
    return test


def _record_selector(model: Model, name: str, engine: dict[str, str]) -> str:
    labels = {k: engine[k] for k in model.builder.labels.identity("model") if k in engine} | {"slo": name}
    return "{" + ", ".join(f"{k}={quoted(v)}" for k, v in labels.items()) + "}"


def _idle_records(model: Model, name: str, slo, engines: SloEngines) -> list[dict]:
    """slo-test/idle's counters are there and do not move: its valid events are recorded as 0, and no
    window has an error ratio for it (0/0 is no sample, not NaN)."""
    selector = _record_selector(model, name, engines.labels(scenario_model(IDLE)))
    at = f"{IDLE_CHECK}m"
    valid = model.slos.x.valid_record()
    out = [
        {"expr": valid + selector, "eval_time": at, "exp_samples": [{"labels": valid + selector, "value": 0}]}
    ]
    for window in model.slos.x.windows(slo):
        out.append({"expr": model.slos.x.error_record(window) + selector, "eval_time": at, "exp_samples": []})
    return out


def _unrecorded(model: Model, name: str, run: RunShown, sc: ScenarioShown, engines: SloEngines) -> list[dict]:
    """A model outside the scope has no valid or good events recorded at its scenario's checks."""
    selector = _record_selector(model, name, engines.labels(run.model))
    records = (model.slos.x.valid_record(), model.slos.x.good_record())
    return [
        {"expr": record + selector, "eval_time": f"{at}m", "exp_samples": []}
        for at in sc.checks
        for record in records
    ]


def _rule(model: Model, name: str, firing: FiringShown) -> AlertRule:
    return next(
        a
        for a in model.alerts()
        if isinstance(a.spec, BurnAlert)
        and a.spec.slo == name
        and (a.spec.long, a.spec.short) == (firing.long, firing.short)
    )


def _inputs_rules(model: Model, name: str) -> list[AlertRule]:
    return [a for a in model.alerts() if isinstance(a.spec, InputsAlert) and a.spec.slo == name]


def _inputs_firing(
    model: Model, slo, batch: BatchShown, engines: SloEngines, at: int
) -> list[tuple[RunShown, AlertRule]]:
    """(model, rule) of every inputs-missing alert firing at `at` on the batch's engines, of any SLO
    that reads their histogram: one whose scope holds the engine and whose bucket at its threshold
    for that model the engine does not export. Its condition holds from the first evaluation, so it
    fires once `for` has passed."""
    if slo.sli.kind != "latency" or at * 60 < seconds(INPUTS_FOR):
        return []
    out = []
    for other_name, other in model.slos.slos.items():
        if other.sli.kind != "latency" or other.sli.reads != slo.sli.reads:
            continue
        rules = _inputs_rules(model, other_name)
        for run in batch.runs:
            labels = engines.labels(run.model)
            if other.scope is not None and not other.scope.accepts(labels, MODEL):
                continue
            over = other.per_model.get(labels.get(MODEL, ""))
            threshold = over.threshold if over is not None and over.threshold else other.sli.threshold
            exported = set(run.decoys) | (set() if run.good_missing else {run.param})
            if threshold not in exported:
                out += [(run, r) for r in rules if r.labels.get("le") == le_value(threshold)]
    return out


def _inputs_expected(model: Model, rule: AlertRule, engine: dict[str, str]) -> dict:
    labels = {k: engine[k] for k in model.builder.labels.identity("model") if k in engine} | rule.labels
    annotations = {k: templates.render(v, labels, 1.0) for k, v in rule.annotations.items()}
    return {"exp_labels": dict(sorted(labels.items())), "exp_annotations": annotations}


def _expected(model: Model, name: str, slo, engine: dict[str, str], firing: FiringShown) -> dict:
    rule = _rule(model, name, firing)
    labels = {k: engine[k] for k in model.builder.labels.identity("model") if k in engine}
    labels.update(rule.labels)
    snippet = model.slos.budget_left(name, slo)
    annotations = {}
    for key, text in rule.annotations.items():
        text = text.replace(snippet, budget_left_text(slo, firing.remaining))
        annotations[key] = templates.render(text, labels, firing.value)
    return {"exp_labels": dict(sorted(labels.items())), "exp_annotations": annotations}
