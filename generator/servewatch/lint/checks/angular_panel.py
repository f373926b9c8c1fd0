"""angular-panel: no panel types that needed AngularJS, which Grafana 12 removed.

Grafana 11 disabled Angular and 12 removed it: the core legacy panels are migrated on load (the
result may differ from what was designed) and Angular plugins show an error instead of the panel.
"""

from __future__ import annotations

from ..findings import Severity
from ..subjects import panel_where
from . import Check

# Angular panel -> its React successor (None: no built-in successor).
ANGULAR = {
    "graph": "timeseries",
    "singlestat": "stat",
    "table-old": "table",
    "grafana-singlestat-panel": "stat",
    "grafana-piechart-panel": "piechart",
    "grafana-worldmap-panel": "geomap",
    "natel-discrete-panel": "state-timeline",
    "natel-plotly-panel": None,
    "vonage-status-panel": "stat",
    "btplc-status-dot-panel": None,
    "michaeldmoore-annunciator-panel": "stat",
    "michaeldmoore-multistat-panel": "bargauge",
    "briangann-gauge-panel": "gauge",
    "briangann-datatable-panel": "table",
    "jdbranham-diagram-panel": None,
    "digrich-bubblechart-panel": None,
    "mtanda-histogram-panel": "histogram",
    "petrslavotinek-carpetplot-panel": "heatmap",
    "savantly-heatmap-panel": "heatmap",
    "flant-statusmap-panel": "state-timeline",
    "snuids-trafficlights-panel": None,
    "corpglory-progresslist-panel": "bargauge",
}


def run(dashboard, ctx):
    for panel, path in dashboard.panels():
        kind = panel.get("type")
        if kind in ANGULAR:
            successor = ANGULAR[kind]
            yield CHECK.problem(
                f"{panel_where(panel)} is a {kind} panel, which needs AngularJS (removed in Grafana 12)",
                f"rebuild it as a {successor} panel" if successor else "replace it with a React panel",
                at=dashboard.at(path + ("type",), panel_where(panel)),
            )


CHECK = Check(
    id="angular-panel",
    severity=Severity.WARNING,
    summary="No Angular panel types (graph, singlestat, Angular plugins): Grafana 12 removed Angular.",
    scope="dashboard",
    run=run,
)
