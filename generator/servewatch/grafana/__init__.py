"""A small typed layer that emits Grafana's classic dashboard JSON as plain dicts (no grafanalib)."""

from .layout import COLUMNS, GridPos, flow
from .classic import (
    ALL_VALUE,
    DS_REF,
    DS_VAR,
    GRAFANA_VERSION,
    SCHEMA_VERSION,
    Annotation,
    ClassicDashboard,
    Link,
    Panel,
    Row,
    Target,
    Threshold,
    Variable,
    ref_ids,
    slug,
    thresholds,
)

__all__ = [
    "ALL_VALUE",
    "COLUMNS",
    "DS_REF",
    "DS_VAR",
    "GRAFANA_VERSION",
    "SCHEMA_VERSION",
    "Annotation",
    "ClassicDashboard",
    "GridPos",
    "Link",
    "Panel",
    "Row",
    "Target",
    "Threshold",
    "Variable",
    "flow",
    "ref_ids",
    "slug",
    "thresholds",
]
