"""unit-mismatch: a panel's unit matches what the catalogs say the values are.

The copied mistakes: dcgm-exporter's framebuffer values are MiB, shown as `decmbytes` (SI
megabytes, 4.9 % off) or `bytes` (a million times off) in NVIDIA's dashboard; vLLM latencies are
seconds, shown as `ms`; vLLM's kv_cache_usage_perc is a 0-1 ratio despite its name, shown as
`percent` (0.95 %).
"""

from __future__ import annotations

from ..findings import Severity
from ..subjects import panel_where
from ..units import mismatch, unit_of
from . import Check


def panel_unit(panel: dict, ref_id: str | None) -> tuple[str | None, tuple]:
    """The unit a target's values are shown in, and where it is set (relative to the panel)."""
    field_config = panel.get("fieldConfig") or {}
    for i, override in enumerate(field_config.get("overrides") or []):
        matcher = override.get("matcher") or {}
        if matcher.get("id") == "byFrameRefID" and matcher.get("options") == ref_id:
            for j, prop in enumerate(override.get("properties") or []):
                if prop.get("id") == "unit":
                    return prop.get("value"), ("fieldConfig", "overrides", i, "properties", j, "value")
    unit = (field_config.get("defaults") or {}).get("unit")
    if unit:
        return unit, ("fieldConfig", "defaults", "unit")
    axes = panel.get("yaxes") or []  # Grafana < 7 graph panels
    if axes and isinstance(axes[0], dict) and axes[0].get("format"):
        return axes[0]["format"], ("yaxes", 0, "format")
    if panel.get("format"):  # singlestat
        return panel["format"], ("format",)
    return None, ()


def run(dashboard, ctx):
    for pq in dashboard.shown_queries():
        shown, where_set = panel_unit(pq.panel, pq.target.get("refId"))
        wrong = mismatch(unit_of(pq.query.ast, ctx), shown)
        if wrong is not None:
            message = f"{panel_where(pq.panel)} shows {wrong[0]} with unit {shown!r}"
            yield CHECK.problem(
                message, f"set the unit to {wrong[1]!r}", at=dashboard.in_panel(pq, where_set)
            )


CHECK = Check(
    id="unit-mismatch",
    severity=Severity.ERROR,
    summary="Panel units match the catalog unit of what the query returns (MiB, seconds, 0-1 ratio, ...).",
    scope="dashboard",
    run=run,
)
