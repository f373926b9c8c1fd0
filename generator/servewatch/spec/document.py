"""What one spec file may hold: every section's schema. The loader merges several into a Spec."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .alertmanager import Alertmanager
from .dashboards import Settings
from .runbooks import Runbook
from .schema import Config, Group, Overrides, Scenario, Signal, SignalName, Strict
from .slos import SLO, SloName


class SpecDoc(Strict):
    # `extends: servewatch`: the folder holds only what the team changed, over the default specs of
    # the installed servewatch (spec/layers.py)
    extends: Literal["servewatch"] | None = None
    config: Config | None = None
    signals: dict[SignalName, Signal] = Field(default_factory=dict)
    groups: tuple[Group, ...] = ()
    overrides: Overrides | None = None
    scenarios: tuple[Scenario, ...] = ()
    dashboards: Settings | None = None
    runbooks: dict[str, Runbook] | None = None  # alert name -> its runbook
    slos: dict[SloName, SLO] = Field(default_factory=dict)
    alertmanager: Alertmanager | None = None
