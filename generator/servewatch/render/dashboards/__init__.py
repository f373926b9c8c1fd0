"""Grafana dashboards from the model: vLLM serving, GPU fleet (DCGM) and MoE deployment.

Every query comes from the same SignalBuilder and PromQL builders as the rules. A panel that shows
what an alert watches reads that alert's recording rule, so on-call sees exactly what fired; other
panels compute their signal live with `$__rate_interval`. Template variables reach the queries
through the builder's selectors, so they apply to every raw series a panel reads.

  context.py        label roles from config; the context and query helpers all dashboards share
  board.py          the frame each dashboard builder starts from
  panels.py         time series, stat, table and threshold shorthands
  vllm_serving.py   gpu_fleet.py   moe_deployment.py      one module per dashboard
  delivery.py       classic JSON, import variant, provisioning, ConfigMap, GrafanaDashboard; link check
"""

from __future__ import annotations

from ...spec.dashboards import Settings, load_settings
from ...model import Model
from . import delivery
from .context import DashboardContext, Roles
from .delivery import (
    CONFIGMAP_LIMIT,
    GENERATED,
    GRAFANA_MIN_VERSION,
    PROVIDER_PATH,
    check_alert_links,
    check_panel_links,
    import_variant,
    k8s_name,
    kubernetes,
    provisioning,
    to_json,
)
from .gpu_fleet import GpuFleet
from .moe_deployment import MoeDeployment
from .vllm_serving import VllmServing

BUILDERS = (VllmServing, GpuFleet, MoeDeployment)

__all__ = [
    "BUILDERS",
    "CONFIGMAP_LIMIT",
    "GENERATED",
    "GRAFANA_MIN_VERSION",
    "PROVIDER_PATH",
    "DashboardContext",
    "GpuFleet",
    "MoeDeployment",
    "Roles",
    "VllmServing",
    "check_alert_links",
    "check_panel_links",
    "dashboards",
    "import_variant",
    "k8s_name",
    "kubernetes",
    "provisioning",
    "render",
    "to_json",
]


def dashboards(model: Model, settings: Settings | None = None) -> dict[str, dict]:
    """name -> classic dashboard dict, once the alerts' and the panels' dashboard links resolve."""
    settings = settings or load_settings(model.spec)
    ctx = DashboardContext(model, settings)
    boards = {cls.name: cls(ctx).build().to_dict() for cls in BUILDERS}
    check_alert_links(model, settings, boards)
    check_panel_links(model, boards)
    return boards


def render(model: Model) -> dict[str, str]:
    settings = load_settings(model.spec)
    return delivery.files(settings, dashboards(model, settings), model.config.scrape_interval)
