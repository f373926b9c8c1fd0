"""rate-gauge: rate()/irate()/increase() read counters only.

On a gauge every drop looks like a counter reset, so the result is nonsense; a recording rule
records a gauge too (unless it only copies or sums a counter), which is pint's rate(sum(...)).
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check

COUNTER_KEEPING_AGGS = {"sum", "max", "min"}


def _records_a_counter(ast, ctx) -> bool:
    node = tree.strip(ast)
    if isinstance(node, pp.AggregateExpr) and tree.op(node) in COUNTER_KEEPING_AGGS:
        node = tree.strip(node.expr)
    if not isinstance(node, pp.VectorSelector):
        return False
    metric = ctx.metric(node.name)
    return metric is not None and metric.type in ("counter", "histogram")


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if tree.func(node) not in tree.RATE_FUNCS or (ms := tree.range_arg(node)) is None:
            continue
        name, fn = ms.vector_selector.name, tree.func(node)
        metric = ctx.metric(name)
        if metric is not None and metric.type in ("gauge", "info"):
            yield CHECK.problem(
                f"{fn}() of gauge {name}: every drop of a gauge reads as a counter reset",
                f"use deriv({name}[5m]) or delta(...) for its trend, max_over_time(...) for its level",
            )
        elif metric is None and (asts := ctx.record_asts(name or "")):
            if not all(_records_a_counter(ast, ctx) for ast in asts):
                yield CHECK.problem(
                    f"{fn}() of recording rule {name}, which records a gauge (`{tree.short(asts[0], 50)}`)",
                    "apply rate() to the counter inside the recording rule instead",
                )


CHECK = Check(
    id="rate-gauge",
    severity=Severity.ERROR,
    summary="rate()/irate()/increase() read counters, not gauges or recording rules of gauges.",
    scope="query",
    run=run,
)
