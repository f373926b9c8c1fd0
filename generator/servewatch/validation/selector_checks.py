"""config.selectors and SLO scopes against the generated tests (DESIGN invariant 14): the tests' series
must carry label values every selector matches (plan/conform.py adapts them) and the SLO tests'
engines must sit in their SLO's scope, each its own model, besides some just outside it
(plan/slo_engines.py). A selector or scope that leaves no such value, or that would give two
things of one test the same value, is refused here with one message naming it, instead of
`servewatch test` failing on every test that reads the source."""

from __future__ import annotations

from ..errors import SpecError
from ..model import Model
from ..plan.conform import SelectorConflict
from ..plan.rule_tests import rule_tests
from ..plan.scenario_tests import scenario_tests
from ..plan.slo_engines import engine_labels, slo_engines
from ..slo.scenarios import OUTSIDE, scenario_model


def selector_problems(model: Model) -> list[SpecError]:
    try:
        scenario_tests(model)
        rule_tests(model)
        _slo_models_apart(model)
    except SelectorConflict as exc:
        return [SpecError(str(exc), model.spec.locate("config", "config", "selectors", exc.source))]
    return _slo_scopes(model)


def _slo_scopes(model: Model) -> list[SpecError]:
    """Each scoped SLO's tests place two models in its scope, apart, and two just outside it."""
    problems = []
    for name, slo in model.slos.slos.items():
        if slo.scope is None:
            continue
        engines = slo_engines(model, name, slo)
        keys = [scenario_model(k) for k in ("a", "b", OUTSIDE, f"{OUTSIDE}-b")]
        try:
            for key in keys:
                engines.labels(key)
        except SpecError as exc:
            problems.append(exc)
    return problems


def _slo_models_apart(model: Model) -> None:
    """The SLO tests run one synthetic model per scenario side by side: each must keep its own labels."""
    if not model.slos.slos:
        return
    first, second = (engine_labels(model, f"slo-test/{k}") for k in ("a", "b"))
    if first == second:
        changed = next((k for k in first if first[k] != f"{k}-0"), "model_name")
        raise SelectorConflict("vllm", model.config.selectors.get("vllm", ""), changed, None)
