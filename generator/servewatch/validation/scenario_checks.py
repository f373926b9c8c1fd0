"""Scenario expressions (scenarios.py) checked against the alerts as the specs define them: an
expression that is not written correctly, or that has no value even for the default threshold and
`for`, is a spec mistake with its file, line and field. One that only an override leaves without a
value is not: `servewatch test` reports it (verify.py)."""

from __future__ import annotations

from dataclasses import replace

from .. import scenarios
from ..errors import SpecError
from ..model import Model


def scenario_problems(spec) -> list[SpecError]:
    defaults = Model(replace(spec, overrides=spec.overrides.model_copy(update={"alerts": {}})))
    errors = []
    for scenario in spec.scenarios:
        if scenarios.switched_off(spec, scenario) or defaults.alert(scenario.alert) is None:
            continue  # nothing is rendered from it
        try:
            scenarios.resolve(defaults, scenario)
        except (scenarios.ExpressionError, scenarios.Unadaptable) as exc:
            field = getattr(exc, "field", None) or ()
            errors.append(SpecError(str(exc), spec.locate("scenario", scenario.name, *field)))
    return errors
