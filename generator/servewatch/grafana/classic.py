"""A small typed layer over Grafana's classic dashboard JSON model (schemaVersion 41).

Each class turns into a plain dict with `to_dict()`; nothing here knows about vLLM or DCGM. The
output follows the model Grafana 11/12 saves: object datasource references (always the
`datasource` template variable), `fieldConfig.defaults` + `overrides`, per-panel `options`, query
variables with a string `label_values(...)` or `query_result(...)` query, and rows as `type: row`
panels; a collapsed row holds its panels in its own `panels` list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .layout import GridPos, flow

SCHEMA_VERSION = 41  # what Grafana 11.6 and 12.0 save; Grafana migrates a board only upward
# The Grafana the boards are written for: their schemaVersion and panel options (stat's
# percentChangeColorMode, tooltip.hideZeros, bar gauge legends came in 11.1-11.5) are 11.6's, and the
# grafana-foundation-sdk the tests check them with is its build (pyproject.toml).
GRAFANA_VERSION = "11.6.0"
DS_VAR = "datasource"
DS_REF = {"type": "prometheus", "uid": "${%s}" % DS_VAR}
ALL_VALUE = ".*"  # "All" as a regex: also matches series where the label is absent (idle GPUs)


def slug(title: str) -> str:
    """The URL slug Grafana derives from a dashboard title."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# Query editor settings every target carries.
_TARGET_DEFAULTS = {"editorMode": "code", "exemplar": False}


@dataclass(frozen=True)
class Target:
    """One Prometheus query of a panel."""

    expr: str
    legend: str = ""
    instant: bool = False
    format: str = "time_series"  # time_series | table | heatmap

    def to_dict(self, ref_id: str) -> dict:
        return {
            **_TARGET_DEFAULTS,
            "datasource": dict(DS_REF),
            "expr": self.expr,
            "format": self.format,
            "instant": self.instant,
            "legendFormat": self.legend or "__auto",
            "range": not self.instant,
            "refId": ref_id,
        }


def ref_ids(n: int) -> list[str]:
    """A, B, ... Z, AA, AB, ... as Grafana assigns them."""
    out = []
    for i in range(n):
        name, k = "", i
        while True:
            name = chr(ord("A") + k % 26) + name
            k = k // 26 - 1
            if k < 0:
                break
        out.append(name)
    return out


@dataclass(frozen=True)
class Link:
    """A data link on a panel's fields, or a dashboard link (kind='dashboards' or 'link')."""

    title: str
    url: str = ""
    kind: str = "link"
    tags: tuple[str, ...] = ()
    keep_time: bool = True
    include_vars: bool = True
    as_dropdown: bool = False

    def data_link(self) -> dict:
        return {"targetBlank": False, "title": self.title, "url": self.url}

    def dashboard_link(self) -> dict:
        return {
            "asDropdown": self.as_dropdown,
            "icon": "external link",
            "includeVars": self.include_vars,
            "keepTime": self.keep_time,
            "tags": list(self.tags),
            "targetBlank": False,
            "title": self.title,
            "tooltip": "",
            "type": self.kind,
            "url": self.url,
        }


@dataclass(frozen=True)
class Threshold:
    value: float | None  # None = the base step
    color: str


def thresholds(*steps: tuple[float | None, str]) -> tuple[Threshold, ...]:
    return tuple(Threshold(v, c) for v, c in steps)


@dataclass
class Panel:
    """A visualization: timeseries, stat, gauge, bargauge, table or heatmap."""

    type: str
    title: str
    targets: tuple[Target, ...]
    description: str = ""
    unit: str = "short"
    w: int = 12
    h: int = 8
    min: float | None = None
    max: float | None = None
    decimals: int | None = None
    no_value: str | None = None
    steps: tuple[Threshold, ...] = ()
    show_thresholds: bool = False  # draw threshold lines on a timeseries
    stack: bool = False
    links: tuple[Link, ...] = ()
    options: dict = field(default_factory=dict)
    custom: dict = field(default_factory=dict)
    overrides: tuple[dict, ...] = ()
    transformations: tuple[dict, ...] = ()
    repeat: str | None = None  # one copy of the panel per value of this variable, side by side
    max_per_row: int = 3
    id: int | None = None  # assigned by ClassicDashboard.add

    def field_defaults(self) -> dict:
        out: dict[str, Any] = {"unit": self.unit, "mappings": []}
        out["color"] = (
            {"mode": "thresholds"}
            if self.type in ("stat", "gauge", "bargauge")
            else {"mode": "palette-classic"}
        )
        steps = self.steps or thresholds((None, "green"))
        out["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": s.color, "value": s.value} for s in steps],
        }
        for key, value in (
            ("min", self.min),
            ("max", self.max),
            ("decimals", self.decimals),
            ("noValue", self.no_value),
        ):
            if value is not None:
                out[key] = value
        if self.links:
            out["links"] = [link.data_link() for link in self.links]
        custom = self._custom()
        if custom:
            out["custom"] = custom
        return out

    def _custom(self) -> dict:
        if self.type == "timeseries":
            base = {
                "axisBorderShow": False,
                "axisCenteredZero": False,
                "axisColorMode": "text",
                "axisLabel": "",
                "axisPlacement": "auto",
                "barAlignment": 0,
                "drawStyle": "line",
                "fillOpacity": 25 if self.stack else 10,
                "gradientMode": "none",
                "hideFrom": {"legend": False, "tooltip": False, "viz": False},
                "insertNulls": False,
                "lineInterpolation": "linear",
                "lineWidth": 1,
                "pointSize": 4,
                "scaleDistribution": {"type": "linear"},
                "showPoints": "never",
                "spanNulls": False,
                "stacking": {"group": "A", "mode": "normal" if self.stack else "none"},
                "thresholdsStyle": {"mode": "line" if self.show_thresholds else "off"},
            }
            return {**base, **self.custom}
        if self.type == "table":
            return {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False, **self.custom}
        if self.type == "heatmap":
            return {
                "hideFrom": {"legend": False, "tooltip": False, "viz": False},
                "scaleDistribution": {"type": "linear"},
                **self.custom,
            }
        return dict(self.custom)

    def to_dict(self, pos: GridPos) -> dict:
        if self.id is None:
            raise ValueError(f"panel {self.title!r} has no id; add it to a ClassicDashboard first")
        ids = ref_ids(len(self.targets))
        out = {
            "datasource": dict(DS_REF),
            "description": self.description,
            "fieldConfig": {"defaults": self.field_defaults(), "overrides": list(self.overrides)},
            "gridPos": pos.to_dict(),
            "id": self.id,
            "options": {**default_options(self.type), **self.options},
            "targets": [t.to_dict(r) for t, r in zip(self.targets, ids, strict=True)],
            "title": self.title,
            "type": self.type,
        }
        if self.transformations:
            out["transformations"] = list(self.transformations)
        if self.repeat:
            out.update({"maxPerRow": self.max_per_row, "repeat": self.repeat, "repeatDirection": "h"})
        return out


def _reduce(values: bool = False) -> dict:
    return {"calcs": ["lastNotNull"], "fields": "", "values": values}


def default_options(kind: str) -> dict:
    """Options Grafana itself would store for a fresh panel of this type."""
    if kind == "timeseries":
        return {
            "legend": {
                "calcs": ["lastNotNull", "max"],
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
            },
            "tooltip": {"hideZeros": False, "mode": "multi", "sort": "desc"},
        }
    if kind == "stat":
        return {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "percentChangeColorMode": "standard",
            "reduceOptions": _reduce(),
            "showPercentChange": False,
            "textMode": "auto",
            "wideLayout": True,
        }
    if kind == "gauge":
        return {
            "minVizHeight": 75,
            "minVizWidth": 75,
            "orientation": "auto",
            "reduceOptions": _reduce(),
            "showThresholdLabels": False,
            "showThresholdMarkers": True,
            "sizing": "auto",
        }
    if kind == "bargauge":
        return {
            "displayMode": "gradient",
            "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": False},
            "maxVizHeight": 300,
            "minVizHeight": 16,
            "minVizWidth": 8,
            "namePlacement": "auto",
            "orientation": "horizontal",
            "reduceOptions": _reduce(),
            "showUnfilled": True,
            "sizing": "auto",
            "valueMode": "color",
        }
    if kind == "table":
        return {
            "cellHeight": "sm",
            "footer": {"countRows": False, "fields": [], "reducer": ["sum"], "show": False},
            "frameIndex": 0,
            "showHeader": True,
        }
    if kind == "heatmap":
        return {
            "calculate": False,
            "cellGap": 1,
            "color": {
                "exponent": 0.5,
                "fill": "dark-orange",
                "mode": "scheme",
                "reverse": False,
                "scale": "exponential",
                "scheme": "Oranges",
                "steps": 64,
            },
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
            "filterValues": {"le": 1e-9},
            "legend": {"show": True},
            "rowsFrame": {"layout": "auto"},
            "showValue": "auto",
            "tooltip": {"mode": "single", "showColorScale": False, "yHistogram": False},
            "yAxis": {"axisPlacement": "left", "reverse": False},
        }
    return {}


@dataclass
class Row:
    """A row header: always starts a new line at full width; the panels after it belong to it.
    A collapsed row shows only its header until opened, and its panels query nothing until then."""

    full_width: ClassVar[bool] = True
    title: str
    collapsed: bool = False
    id: int | None = None
    w: int = 24
    h: int = 1

    def to_dict(self, pos: GridPos, panels: list[dict] | None = None) -> dict:
        return {
            "collapsed": self.collapsed,
            "gridPos": pos.to_dict(),
            "id": self.id,
            "panels": list(panels or []),
            "title": self.title,
            "type": "row",
        }


@dataclass(frozen=True)
class Variable:
    """A template variable: a Prometheus `query`, the `datasource` picker, or a `custom` list."""

    name: str
    label: str
    kind: str = "query"
    query: str = ""
    multi: bool = False
    include_all: bool = False
    current: tuple[str, str] | None = None  # (text, value)
    description: str = ""
    hide: int = 0  # 0 shown, 2 hidden
    regex: str = ""  # keeps the values (or datasource names) it matches; a capture group extracts

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "description": self.description,
            "hide": self.hide,
            "includeAll": self.include_all,
            "label": self.label,
            "multi": self.multi,
            "name": self.name,
            "options": [],
            "skipUrlSync": False,
            "type": self.kind,
        }
        if self.kind == "datasource":
            out.update({"query": "prometheus", "refresh": 1, "regex": self.regex})
        elif self.kind == "query":
            out.update(
                {
                    "datasource": dict(DS_REF),
                    "definition": self.query,
                    "query": self.query,
                    "refresh": 2,
                    "regex": self.regex,
                    "sort": 1,
                }
            )
        else:
            out["query"] = self.query
        if self.include_all:
            out["allValue"] = ALL_VALUE
        if self.current is not None:
            text, value = self.current
            out["current"] = {"selected": False, "text": text, "value": value}
        elif self.include_all:
            out["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        # else no `current`: Grafana selects the first value (`{}` is not a valid current option)
        return out


@dataclass(frozen=True)
class Annotation:
    """A Prometheus annotation query (e.g. firing ALERTS) drawn on every time series panel."""

    name: str
    expr: str
    title: str = "{{alertname}}"
    text: str = ""
    tags: str = ""
    color: str = "red"

    def to_dict(self) -> dict:
        return {
            "datasource": dict(DS_REF),
            "enable": True,
            "expr": self.expr,
            "hide": False,
            "iconColor": self.color,
            "name": self.name,
            "step": "60s",
            "tagKeys": self.tags,
            "textFormat": self.text,
            "titleFormat": self.title,
            "useValueForTime": False,
        }


BUILTIN_ANNOTATION = {
    "builtIn": 1,
    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
    "enable": True,
    "hide": True,
    "iconColor": "rgba(0, 211, 255, 1)",
    "name": "Annotations & Alerts",
    "type": "dashboard",
}


@dataclass
class ClassicDashboard:
    """Panels in display order; ids are handed out as panels are added, hidden ones included,
    so switching an optional panel off does not renumber the others."""

    uid: str
    title: str
    description: str = ""
    tags: tuple[str, ...] = ()
    refresh: str = "30s"
    time_from: str = "now-6h"
    time_to: str = "now"
    timezone: str = "browser"
    variables: list[Variable] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    items: list[Panel | Row] = field(default_factory=list)
    _next_id: int = 1

    def add(self, item: Panel | Row, show: bool = True) -> Panel | Row:
        item.id = self._next_id
        self._next_id += 1
        if show:
            self.items.append(item)
        return item

    def row(self, title: str, collapsed: bool = False) -> Row:
        return self.add(Row(title, collapsed))  # type: ignore[return-value]

    def panels(self) -> list[dict]:
        """The panels in Grafana's order: a collapsed row carries the panels under it."""
        out: list[dict] = []
        open_row: dict | None = None  # the collapsed row the panels go into
        for item, pos in flow(self.items):
            if isinstance(item, Row):
                out.append(item.to_dict(pos))
                open_row = out[-1] if item.collapsed else None
            elif open_row is not None:
                open_row["panels"].append(item.to_dict(pos))
            else:
                out.append(item.to_dict(pos))
        return out

    def to_dict(self) -> dict:
        if len(self.uid) > 40:
            raise ValueError(f"dashboard uid {self.uid!r} is longer than Grafana's 40 characters")
        panels = self.panels()
        return {
            "annotations": {"list": [dict(BUILTIN_ANNOTATION)] + [a.to_dict() for a in self.annotations]},
            "description": self.description,
            "editable": True,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [link.dashboard_link() for link in self.links],
            "liveNow": False,
            "panels": panels,
            "refresh": self.refresh,
            "schemaVersion": SCHEMA_VERSION,
            "tags": list(self.tags),
            "templating": {"list": [v.to_dict() for v in self.variables]},
            "time": {"from": self.time_from, "to": self.time_to},
            "timepicker": {},
            "timezone": self.timezone,
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }
