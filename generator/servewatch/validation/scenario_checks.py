"""Scenario expressions (scenarios.py) checked against the alerts as the specs define them: an
expression that is not written correctly, or that has no value even for the default threshold and
`for`, is a spec mistake with its file, line and field. One that only an override leaves without a
value is not: `servewatch test` reports it (verify.py). But one whose times an override pushes past
what a promtool test can hold is refused here, at the scenario (DESIGN invariant 14)."""

from __future__ import annotations

from dataclasses import replace

from .. import scenarios
from ..errors import SpecError
from ..model import Model


def scenario_problems(spec) -> list[SpecError]:
    defaults = Model(replace(spec, overrides=spec.overrides.model_copy(update={"alerts": {}})))
    tuned = Model(spec) if spec.overrides.alerts else None
    errors = []
    for scenario in spec.scenarios:
        if (
            scenarios.switched_off(spec, scenario)
            or scenarios.unmet(spec.config, scenario)
            or defaults.alert(scenario.alert) is None
        ):
            continue  # nothing is rendered from it
        problem = _problem(defaults, scenario)
        if problem is None and tuned is not None and tuned.alert(scenario.alert) is not None:
            problem = _problem(tuned, scenario, only=scenarios.TooLong)
            if problem is not None:
                problem = (
                    f"{problem[0]} (with the alert overrides of overrides.yaml; tune them back, or switch "
                    "the scenario off in overrides.scenarios)",
                    problem[1],
                )
        if problem is not None:
            errors.append(SpecError(problem[0], spec.locate("scenario", scenario.name, *problem[1])))
    return errors


def _problem(model: Model, scenario, only=(scenarios.ExpressionError, scenarios.Unadaptable)):
    """(message, field) of what keeps the scenario from being resolved for `model`, or None; other
    problems than `only` count as none."""
    try:
        scenarios.resolve(model, scenario)
    except only as exc:
        return str(exc), getattr(exc, "field", None) or ()
    except scenarios.Unadaptable:
        return None
    return None
