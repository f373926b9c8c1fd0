"""Grafana dashboards from the model: vLLM serving, GPU fleet (DCGM), MoE deployment and SLOs.

Every query comes from the same SignalBuilder and PromQL builders as the rules. A panel asks its
Selection for what it shows: a recording rule where one exists (so on-call sees exactly what an alert
saw), computed live over `$__rate_interval` otherwise. Template variables reach the queries through
the selection's matchers, so they apply to every series a panel reads.

  context.py        label roles from config; variable matchers, alerts, legends, variables, links
  selection.py      what a group of panels reads: the one place each quantity is read from
  recorded.py       which recording rules record a rate or a quantile, read from their expressions
  board.py          the frame each dashboard builder fills (optional panels, descriptions, alert views)
  panels.py         time series, stat, table (problem list), heatmap and threshold shorthands
  vllm_serving.py   gpu_fleet.py   moe_deployment.py   slo.py      one module per dashboard

The dashboards are planned here, every panel with its query, id and links; render/dashboards.py
delivers them as they are, in every form. The validation stage (servewatch/validation/) builds them
once with `build_with_views` and checks their links on them.
"""

from __future__ import annotations

from ...model import Model
from .context import DashboardContext, Roles
from .gpu_fleet import GpuFleet
from .moe_deployment import MoeDeployment
from .slo import SloBoardBuilder
from .vllm_serving import VllmServing

BUILDERS = (VllmServing, GpuFleet, MoeDeployment, SloBoardBuilder)

__all__ = [
    "BUILDERS",
    "DashboardContext",
    "GpuFleet",
    "MoeDeployment",
    "Roles",
    "SloBoardBuilder",
    "VllmServing",
    "PLAN",
    "build",
    "build_with_views",
    "planned",
]

PLAN = "dashboards"  # the model's plan (Model.planned) that holds its boards


def build_with_views(model: Model) -> tuple[dict[str, dict], dict[str, dict[str, int]]]:
    """(name -> classic dashboard dict, dashboard uid -> {alert: the id of the panel that shows it})."""
    ctx = DashboardContext(model, model.spec.dashboards)
    boards, views = {}, {}
    for cls in BUILDERS:
        builder = cls(ctx)
        board = builder.build()
        boards[cls.name] = board.to_dict()
        views[board.uid] = dict(builder.alert_panels)
    return boards, views


def build(model: Model) -> dict[str, dict]:
    """name -> classic dashboard dict, from the model and its `dashboards:` settings."""
    return build_with_views(model)[0]


def planned(model: Model) -> dict[str, dict]:
    """The boards of `model`: as the validation stage built them (it keeps them on the model it
    hands on), else built now."""
    return model.planned(PLAN, build)
