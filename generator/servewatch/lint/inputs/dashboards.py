"""A Grafana dashboard (classic JSON model) -> LintDashboard with its PromQL queries parsed.

Queries are read from panel targets (Prometheus data sources only) and from query variables
(`label_values(selector, label)` is linted as `group by (label) (selector)`, so the label is
checked against the selector's series; `query_result(expr)` as expr).
"""

from __future__ import annotations

import re

from ..subjects import LintDashboard, PanelQuery, panel_where, parse_query
from .documents import Doc

LABEL_VALUES_RE = re.compile(r"^\s*label_values\s*\((.+),\s*([A-Za-z_]\w*)\s*\)\s*$", re.S)
QUERY_RESULT_RE = re.compile(r"^\s*query_result\s*\((.+)\)\s*$", re.S)
OTHER_DATASOURCES = (
    "loki",
    "tempo",
    "elasticsearch",
    "influxdb",
    "graphite",
    "mysql",
    "postgres",
    "__expr__",
)


def looks_like_dashboard(data) -> bool:
    return (
        isinstance(data, dict)
        and any(isinstance(data.get(k), list) for k in ("panels", "rows"))
        and any(k in data for k in ("title", "uid", "schemaVersion", "templating"))
    )


def is_prometheus(ref) -> bool:
    """Whether a datasource reference may be Prometheus (a variable or the default may be)."""
    kind = ref.get("type") if isinstance(ref, dict) else ref
    return not (isinstance(kind, str) and kind.lower().startswith(OTHER_DATASOURCES))


def variable_values(dashboard: LintDashboard) -> dict[str, str]:
    """A concrete value for variables whose values are written in the dashboard (custom, constant...)."""
    out = {}
    for var, _ in dashboard.variables():
        query = var.get("query")
        if not isinstance(query, str) or not query.strip():
            continue
        if var.get("type") in ("custom", "interval"):
            first = query.split(",")[0]
            out[var["name"]] = first.split(" : ", 1)[-1].strip()
        elif var.get("type") in ("constant", "textbox"):
            out[var["name"]] = query.strip()
    return {k: v for k, v in out.items() if v}


def variable_promql(query) -> str | None:
    """The PromQL in a Prometheus query variable's definition, None when it has none."""
    if isinstance(query, dict):
        query = query.get("query")
    if not isinstance(query, str):
        return None
    if m := LABEL_VALUES_RE.match(query):
        return f"group by ({m.group(2)}) ({m.group(1)})"
    if m := QUERY_RESULT_RE.match(query):
        return m.group(1)
    return None


def read_dashboard(
    data: dict, doc: Doc, prefix: tuple, file: str, form: str, inputs: frozenset[str] = frozenset()
) -> LintDashboard:
    def line_of(path: tuple) -> int | None:
        return doc.line_of(prefix + path)

    dashboard = LintDashboard(data, file, form, doc.root + prefix, line_of, inputs=inputs)
    values = variable_values(dashboard)
    for panel, path in dashboard.panels():
        if panel.get("type") == "row":
            continue
        for i, target in enumerate(panel.get("targets") or []):
            if not isinstance(target, dict) or not isinstance(target.get("expr"), str):
                continue
            if not target["expr"].strip() or not is_prometheus(
                target.get("datasource") or panel.get("datasource")
            ):
                continue
            loc = dashboard.at(path + ("targets", i, "expr"), panel_where(panel))
            query = parse_query(target["expr"], loc, "panel", values)
            dashboard.queries.append(PanelQuery(panel, path, target, query))
    for var, path in dashboard.variables():
        if var.get("type") != "query" or not is_prometheus(var.get("datasource")):
            continue
        promql = variable_promql(var.get("query"))
        if promql:
            where_query = path + (("query", "query") if isinstance(var.get("query"), dict) else ("query",))
            loc = dashboard.at(where_query, f"variable {var['name']}")
            dashboard.variable_queries.append(parse_query(promql, loc, "variable", values))
    return dashboard
