"""promtool unit tests designed from the spec's scenarios, adapted to the tuning (scenarios.py) and to
config.selectors (conform.py); render/unit_tests.py writes them, one file per rule family.

Expected annotations are rendered here with the same templates Prometheus will use, so a test
checks labels, annotations and (through the description) the alert's value.
"""

from __future__ import annotations

import json

from .. import scenarios, templates
from ..model import Model
from ..promql import builders as b
from ..promql import labels
from . import kept
from .conform import SERIES_RE, Conform, series_key


def series_with_selectors(model: Model, series: str, conform: Conform | None = None) -> str:
    """The series with the label values config.selectors needs (plan/conform.py), so default
    scenarios and synthetic series survive `selectors:`; `conform` keeps one test's values apart.
    A vLLM series also gets the role and track of an aggregated stable engine where it names none,
    so it survives `role:` and `track:`, and the name the configured vLLM profile gives it."""
    if conform is not None:
        return _with_selectors(model, series, conform)
    # without a test's own Conform the answer is the model's alone: kept per model, as the rule
    # tests ask it about 2,800 times for some 800 series
    known: dict[str, str] = model.planned("series_with_selectors", lambda _: {})
    out = known.get(series)
    if out is None:
        out = known[series] = _with_selectors(model, series, Conform(model))
    return out


def _with_selectors(model: Model, series: str, conform: Conform) -> str:
    source = model.builder.source
    out = conform.series(source, series)
    m = SERIES_RE.match(out)
    if not m or source(m.group(1)) != "vllm":
        return out
    name, body = model.builder.metric_name(m.group(1)), (m.group(2) or "{}")[1:-1]
    if name != m.group(1):
        out = name + (m.group(2) or "")
    present = {label for label, _, _ in b.parse_matchers(body)} if body.strip() else set()
    defaults = model.builder.labels.deployment_defaults()
    extra = [f'{k}="{v}"' for k, v in defaults.items() if k not in present]
    if not extra:
        return out
    parts = [p for p in (body.strip().rstrip(","), ", ".join(extra)) if p]
    return f"{name}{{{', '.join(parts)}}}"


def deployment_labels(model: Model, rule, records: dict) -> dict[str, str]:
    """The default role and track labels an alert's results carry (series_with_selectors adds them
    to the scenario's series): expected where the scenario names none. `records`: what each
    recording rule's series carry (promql.labels.record_labels)."""
    defaults = model.builder.labels.deployment_defaults()
    carried = labels.always(rule.expr, records) if defaults else set()
    return {k: v for k, v in defaults.items() if k in carried}


def scenario_tests(model: Model) -> tuple[list[tuple[str, dict]], list[tuple[object, str]]]:
    """(family, promtool test) for every enabled scenario that adapts to the resolved alerts, and
    (scenario, why) for those that cannot (verify.py reports them). Made once per model: validation's
    selector check builds them too; and taken from servewatch's cache when the same model was
    designed with the same code before (plan/kept.py): every command validates."""
    return model.planned("scenario_tests", _kept_or_designed)


CACHE_KIND = "scenario-tests"


def _kept_or_designed(model: Model) -> tuple[list[tuple[str, dict]], list[tuple[object, str]]]:
    return kept.kept_or_designed(model, CACHE_KIND, _scenario_tests, _to_json, _from_json)


def _to_json(model: Model, plan) -> str:
    """The tests, and each scenario that cannot adapt by its place in the spec's scenarios."""
    tests, unadaptable = plan
    place = {id(scenario): i for i, scenario in enumerate(model.spec.scenarios)}
    return json.dumps({"tests": tests, "unadaptable": [(place[id(sc)], why) for sc, why in unadaptable]})


def _from_json(model: Model, data) -> tuple[list[tuple[str, dict]], list[tuple[object, str]]]:
    tests = [(family, test) for family, test in data["tests"]]
    if not all(isinstance(family, str) and isinstance(test, dict) for family, test in tests):
        raise ValueError("not a scenario test")
    unadaptable = []
    for place, why in data["unadaptable"]:
        if not isinstance(place, int) or place < 0 or not isinstance(why, str):
            raise ValueError("not a scenario that cannot adapt")
        unadaptable.append((model.spec.scenarios[place], why))
    return tests, unadaptable


def _scenario_tests(model: Model) -> tuple[list[tuple[str, dict]], list[tuple[object, str]]]:
    sub = lambda text: templates.substitute_tokens(text, model.tokens)  # noqa: E731
    tests, unadaptable = [], []
    deployment = model.builder.labels.deployment_defaults()
    records = labels.record_labels(model.records()) if deployment else {}
    for scenario in model.spec.scenarios:
        if (
            scenarios.switched_off(model.spec, scenario)
            or scenarios.unmet(model.config, scenario)
            or scenarios.unguarded(model, scenario)
        ):
            continue
        alert = model.alert(scenario.alert)
        if alert is None:  # disabled alert (or group): nothing to test
            continue
        try:
            resolved = scenarios.resolve(model, scenario)
        except scenarios.Unadaptable as exc:
            unadaptable.append((scenario, f"{scenarios.field_path(exc.field)}: {exc}"))
            continue
        # one per test: a value replaced in the series is in the alerts too
        conform = Conform(model, [check.alert for check in resolved.checks])
        conformed = [(series_with_selectors(model, sub(s), conform), v) for s, v in resolved.series]
        input_series = [{"series": conform.remap(s), "values": v} for s, v in conformed]
        written = [series_key(sub(s)) for s, _ in resolved.series]
        conform.keep_apart(zip(written, (series_key(t["series"]) for t in input_series), strict=True))
        checks = []
        for check in resolved.checks:
            rule = check.alert
            expected, written = [], []
            for firing in check.firing:
                written.append(frozenset((sub(k), sub(v)) for k, v in firing.labels.items()))
                lbls = {sub(k): conform.mapped(sub(k), sub(v)) for k, v in firing.labels.items()}
                lbls = {**deployment_labels(model, rule, records), **lbls}
                lbls = {**lbls, **rule.result_labels, **rule.labels}
                annotations = {
                    k: templates.render(v, lbls, firing.value, firing.context)
                    for k, v in rule.annotations.items()
                }
                expected.append({"exp_labels": dict(sorted(lbls.items())), "exp_annotations": annotations})
            conform.keep_apart(
                zip(written, (frozenset(e["exp_labels"].items()) for e in expected), strict=True)
            )
            checks.append(
                {"eval_time": scenarios.duration(check.at_s), "alertname": rule.alert, "exp_alerts": expected}
            )
        test = {
            "name": scenario.name,
            "interval": scenario.interval,
            "input_series": input_series,
            "alert_rule_test": checks,
        }
        tests.append((alert.family, test))
    return tests, unadaptable
