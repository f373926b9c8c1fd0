"""Grafana dashboards from the model: vLLM serving, GPU fleet (DCGM) and MoE deployment.

Every query comes from the same SignalBuilder and PromQL builders as the rules. A panel that shows
what an alert watches reads that alert's recording rule, so on-call sees exactly what fired; other
panels compute their signal live with `$__rate_interval`. Template variables reach the queries
through the builder's selectors, so they apply to every raw series a panel reads.

  context.py        label roles from config; the context and query helpers all dashboards share
  board.py          the frame each dashboard builder starts from
  panels.py         time series, stat, table and threshold shorthands
  vllm_serving.py   gpu_fleet.py   moe_deployment.py      one module per dashboard
  delivery.py       classic JSON, import variant, provisioning, ConfigMap, GrafanaDashboard

The validation stage (servewatch/validation/) builds the dashboards once with `build` and checks
their links; `render` only delivers what was built.
"""

from __future__ import annotations

from ...model import Model
from . import delivery
from .context import DashboardContext, Roles
from .delivery import (
    CONFIGMAP_LIMIT,
    GENERATED,
    GRAFANA_MIN_VERSION,
    PROVIDER_PATH,
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
    "build",
    "import_variant",
    "k8s_name",
    "kubernetes",
    "provisioning",
    "render",
    "to_json",
]


def build(model: Model) -> dict[str, dict]:
    """name -> classic dashboard dict, from the model and its `dashboards:` settings."""
    ctx = DashboardContext(model, model.spec.dashboards)
    return {cls.name: cls(ctx).build().to_dict() for cls in BUILDERS}


def render(model: Model, boards: dict[str, dict]) -> dict[str, str]:
    """Every delivery form of the dashboards `build` made."""
    return delivery.files(model.spec.dashboards, boards, model.config.scrape_interval)
