"""reduce-sum-gauge: a stat, gauge or bar gauge does not add up the samples of a level over time.

"Total" (`calcs: ["sum"]`) adds every point of the time range: for a gauge, a rate or a ratio the
result grows with the range and the zoom (step) and means nothing. Show the last value, the max
or the mean; for a total count use increase(...[$__range]) with "Last".
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from ..subjects import panel_where
from . import Check

REDUCING_PANELS = {"stat", "gauge", "bargauge", "singlestat"}
PASS_THROUGH_AGGS = {"sum", "max", "min", "avg", "topk", "bottomk", "quantile"}
LEVEL_FUNCS = {"rate": "a per-second rate", "irate": "a per-second rate", "deriv": "a per-second rate"}


def level(node, ctx) -> str | None:
    """What kind of level the query returns (adding its samples is meaningless), or None."""
    node = tree.strip(node)
    while isinstance(node, pp.AggregateExpr) and tree.op(node) in PASS_THROUGH_AGGS:
        node = tree.strip(node.expr)
    if tree.func(node) in LEVEL_FUNCS:
        return LEVEL_FUNCS[tree.func(node)]
    if tree.func(node) == "histogram_quantile":
        return "a quantile"
    if isinstance(node, pp.VectorSelector):
        metric = ctx.metric(node.name)
        if metric is not None and metric.type == "gauge":
            return f"gauge {node.name}"
        if ctx.is_record(node.name):
            return f"recording rule {node.name}"
    if isinstance(node, pp.BinaryExpr) and tree.op(node) == "/" and not tree.is_scalar(node.rhs):
        return "a ratio"
    return None


# Where a panel keeps its reduction: Grafana 7+ `reduceOptions`, and the 6.x gauge and bar gauge's
# `fieldOptions` that old dashboards (and their imports) still carry.
REDUCE_KEYS = ("reduceOptions", "fieldOptions")


def _sums(panel: dict) -> tuple | None:
    options = panel.get("options") or {}
    for key in REDUCE_KEYS:
        reduce = options.get(key) or {}
        if isinstance(reduce, dict) and "sum" in (reduce.get("calcs") or []) and not reduce.get("values"):
            return ("options", key, "calcs")
    if panel.get("type") == "singlestat" and panel.get("valueName") == "total":
        return ("valueName",)
    return None


def run(dashboard, ctx):
    for pq in dashboard.shown_queries(REDUCING_PANELS):
        if pq.target.get("instant"):
            continue  # one sample: nothing is added up
        if (where_set := _sums(pq.panel)) and (what := level(pq.query.ast, ctx)):
            yield CHECK.problem(
                f"{panel_where(pq.panel)} adds up every sample of {what} over the time range (calc 'sum')",
                "reduce with lastNotNull, max or mean; for a total show increase(...[$__range]), lastNotNull",
                at=dashboard.in_panel(pq, where_set),
            )


CHECK = Check(
    id="reduce-sum-gauge",
    severity=Severity.WARNING,
    summary="Stat and gauge panels do not sum the samples of a gauge, rate or ratio over time.",
    scope="dashboard",
    run=run,
)
