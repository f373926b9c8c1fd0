"""The frame each dashboard builder shares: its name in the settings, the context, which optional
panels it shows, and the empty dashboard (variables, links, annotations) it starts from."""

from __future__ import annotations

from typing import ClassVar

from ... import grafana as g
from .context import DashboardContext


class BoardBuilder:
    name: ClassVar[str]  # the key in specs/dashboards.yaml and the output file name

    def __init__(self, ctx: DashboardContext):
        self.ctx = ctx

    def shows(self, panel: str) -> bool:
        """Whether an optional panel is switched on in the settings."""
        return self.ctx.settings.shows(self.name, panel)

    def variables(self) -> list[g.Variable]:
        raise NotImplementedError

    def build(self) -> g.Dashboard:
        raise NotImplementedError

    def start(self, description: str, annotations: list[g.Annotation]) -> g.Dashboard:
        d = self.ctx.new_dashboard(self.name, description)
        d.variables = self.variables()
        d.annotations = annotations
        return d
