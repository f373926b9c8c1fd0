"""A dashboard refresh, query by query, against a Prometheus: variables first, then every panel.

A refresh is what Grafana asks when the dashboard opens: the template variables' options
(``/api/v1/label/<name>/values``, in dashboard order, each filled with the ones before it), then one
range query per target over the window (an instant query at its end for "now" targets). The
default view is the panels outside collapsed rows; every panel is measured, so a row opened later
can be added up from the per-panel costs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from . import grafana
from servewatch.promapi import timestamp

from .promstats import Cost, Runner, total


@dataclass(frozen=True)
class Window:
    """The time range and step Grafana queries, and the ``$__`` macros that follow from them."""

    start: float
    end: float
    step: float  # $__interval: what Grafana derives from the range and panel width, >= the scrape interval
    scrape: float  # the data source's scrape interval (timeInterval)

    def macros(self) -> dict[str, str]:
        return {
            "__interval": grafana.duration(self.step),
            "__rate_interval": grafana.duration(grafana.rate_interval(self.step, self.scrape)),
            "__range": grafana.duration(self.end - self.start),
        }


def resolve_variables(
    prom, dashboard: dict, window: Window, pick: dict[str, str], prefer: dict[str, str]
) -> tuple[dict[str, str], dict[str, dict]]:
    """Each variable's text for the queries, and what was looked up and selected (for the report)."""
    values: dict[str, str] = {}
    report: dict[str, dict] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        kind, name = var.get("type"), var.get("name")
        if kind == "datasource":
            continue  # only the panels' data source references use it
        if kind != "query":
            raise ValueError(f"{dashboard.get('uid')}: variable {name!r} of type {kind!r} is not supported")
        t0 = time.perf_counter()
        expr = grafana.query_result_query(var)
        if expr is not None:  # an instant query at the end of the window, through the variable's regex
            found = prom.api(
                "/api/v1/query", query=grafana.interpolate(expr, values), time=timestamp(window.end)
            )
            options = grafana.query_result_options(var, found["result"])
        else:
            selector, label = grafana.label_values_query(var)
            params = {"start": timestamp(window.start), "end": timestamp(window.end)}
            if selector:
                params["match[]"] = grafana.interpolate(selector, values)
            options = prom.api(f"/api/v1/label/{label}/values", **params)
        lookup_s = time.perf_counter() - t0
        options = grafana.sort_options(var, options)
        chosen, is_all = grafana.choose(var, options, pick, prefer)
        values[name] = grafana.format_selection(var, chosen, is_all)
        values[f"{name}:raw"] = chosen[0]  # a panel repeated per value: its first copy is measured
        report[name] = {
            "options": len(options),
            "selected": "All" if is_all else chosen,
            "lookup_ms": round(lookup_s * 1000, 3),
        }
    return values, report


def measure(
    runner: Runner, dashboard: dict, window: Window, values: dict[str, str], variables: dict[str, dict]
) -> dict:
    """Cost of every panel and of the default view, with the variables already resolved."""
    fill = {**values, **window.macros()}
    rows = []
    for panel in grafana.panels(dashboard):
        costs = []
        for target in panel.targets:
            expr = grafana.interpolate(target.expr, fill)
            if target.instant:
                costs.append(runner.instant(expr, window.end))
            else:
                costs.append(runner.range(expr, window.start, window.end, window.step))
        rows.append((panel, total(costs)))
    default = total(c for p, c in rows if not p.collapsed)
    return {
        "uid": dashboard.get("uid"),
        "title": dashboard.get("title"),
        "variables": variables,
        "variables_lookup_ms": round(sum(v["lookup_ms"] for v in variables.values()), 3),
        "default_view": {
            **default.as_dict(),
            "panels": sum(1 for p, _ in rows if not p.collapsed),
            "queries": sum(len(p.targets) for p, _ in rows if not p.collapsed),
        },
        "all_panels": {**total(c for _, c in rows).as_dict(), "panels": len(rows)},
        "panels": [
            {
                "title": p.title,
                "row": p.row,
                "collapsed": p.collapsed,
                "queries": len(p.targets),
                **c.as_dict(),
            }
            for p, c in rows
        ],
    }


def refresh(
    prom,
    runner: Runner,
    dashboard: dict,
    window: Window,
    pick: dict[str, str] | None = None,
    prefer: dict[str, str] | None = None,
) -> dict:
    """Resolve the variables (``pick``/``prefer``: see ``grafana.choose``), then measure every panel."""
    values, variables = resolve_variables(prom, dashboard, window, pick or {}, prefer or {})
    return measure(runner, dashboard, window, values, variables)


def panel_cost(result: dict, title: str) -> Cost | None:
    """The measured cost of the panel titled ``title`` in a ``measure`` result (None: no such panel)."""
    for p in result["panels"]:
        if p["title"] == title:
            return Cost(p["samples"], p["peak_samples"], p["eval_ms"] / 1000)
    return None


__all__ = ["Window", "resolve_variables", "measure", "refresh", "panel_cost"]
