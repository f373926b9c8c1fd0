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
        override = spec.overrides.scenarios.get(scenario.name)
        if override is not None and not override.enabled:  # switched off: nothing is rendered from it
            continue
        if defaults.alert(scenario.alert) is None:  # disabled alert: likewise
            continue
        try:
            scenarios.resolve(defaults, scenario)
        except (scenarios.ExpressionError, scenarios.Unadaptable) as exc:
            field = getattr(exc, "field", None) or ()
            errors.append(SpecError(str(exc), spec.locate("scenario", scenario.name, *field)))
    return errors
