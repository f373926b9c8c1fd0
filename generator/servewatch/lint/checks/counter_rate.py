"""counter-rate: counters are read through rate()/increase(), never raw."""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check

# Functions that may take a raw counter: they read a counter correctly or only test presence.
COUNTER_SAFE_FUNCS = {
    "rate",
    "increase",
    "irate",
    "resets",
    "absent",
    "absent_over_time",
    "present_over_time",
    "timestamp",
}
COUNTER_SAFE_AGGS = {"group", "count"}


def is_counter_series(name: str, ctx) -> bool:
    entry = ctx.metric(name)
    if entry is None:
        return False
    return entry.type == "counter" or (entry.type == "histogram" and name != entry.name)


def _read_safely(parents: tuple) -> bool:
    up = [p for p in parents if not isinstance(p, pp.ParenExpr)]
    # `a or b` passes the series of each side on as they are: whatever reads the union reads them
    # (a presence test of a counter under either host spelling)
    while up and isinstance(up[-1], pp.BinaryExpr) and str(up[-1].op).lower() == "or":
        up.pop()
    if len(up) >= 2 and isinstance(up[-1], pp.MatrixSelector) and isinstance(up[-2], pp.Call):
        return up[-2].func.name in COUNTER_SAFE_FUNCS
    if up and isinstance(up[-1], pp.Call):
        return up[-1].func.name in COUNTER_SAFE_FUNCS
    return bool(up) and isinstance(up[-1], pp.AggregateExpr) and str(up[-1].op).lower() in COUNTER_SAFE_AGGS


def run(query, ctx):
    for node, parents in tree.walk(query.ast):
        if isinstance(node, pp.VectorSelector) and node.name and is_counter_series(node.name, ctx):
            if not _read_safely(parents):
                yield CHECK.problem(
                    f"counter {node.name} is read raw: it drops to 0 on every restart",
                    f"wrap it in rate({node.name}[5m]) or increase(...)",
                )


CHECK = Check(
    id="counter-rate",
    severity=Severity.ERROR,
    summary="Counters (and histogram series) are read through rate()/increase(), never raw.",
    scope="query",
    run=run,
)
