"""noisy-without-for: an alert on a noisy signal waits (`for`) before it fires.

A gauge is one scrape's reading and a 5m rate moves with every scrape, so without `for` one spike (a
burst of requests, a CUDA graph capture, a scrape that lands mid-batch) pages and resolves a minute
later. Read through recording rules to the metrics they read. An alert that also reads a window
longer than 5m (the long window of a multi-window burn rate) is smoothed by it and is not reported;
absent() has its own check (absent-for).
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check
from .absent_for import for_seconds

NOISY_RANGE_S = 300.0  # a rate over 5 minutes or less follows every scrape
RANGE_FUNCS = tree.RATE_FUNCS | {"deriv", "delta", "idelta"}


def _ranged(node) -> float | None:
    """The window a range function or subquery reads (seconds), or None."""
    if isinstance(node, pp.SubqueryExpr):
        return node.range.total_seconds()
    if isinstance(node, pp.Call) and (ms := tree.range_arg(node)) is not None:
        return ms.range.total_seconds()
    return None


def _inputs(node, ctx, seen: frozenset[str] = frozenset()) -> tuple[list[str], list[float]]:
    """(noisy inputs named for the message, every window read), following recording rules."""
    noisy: list[str] = []
    windows: list[float] = []
    for n, parents in tree.walk(node):
        if (w := _ranged(n)) is not None:
            windows.append(w)
            if w <= NOISY_RANGE_S and (tree.func(n) in RANGE_FUNCS or isinstance(n, pp.SubqueryExpr)):
                noisy.append(f"`{tree.short(n, 50)}`, a window of 5m or less")
        if not isinstance(n, pp.VectorSelector) or any(_ranged(p) is not None for p in parents):
            continue
        if any(isinstance(p, pp.MatrixSelector) for p in parents):
            continue
        metric = ctx.metric(n.name)
        if metric is not None and metric.type == "gauge":
            noisy.append(f"gauge {n.name}")
        elif n.name in ctx.definitions and n.name not in seen:
            for ast in ctx.record_asts(n.name):
                more, wins = _inputs(ast, ctx, seen | {n.name})
                noisy += [f"{x} (through {n.name})" for x in more]
                windows += wins
    return noisy, windows


def run(rule, ctx):
    if rule.kind != "alert" or rule.query.ast is None or for_seconds(rule.for_) > 0:
        return
    if {tree.func(n) for n, _ in tree.walk(rule.query.ast)} & {"absent", "absent_over_time"}:
        return  # absent-for's
    noisy, windows = _inputs(rule.query.ast, ctx)
    if not noisy or any(w > NOISY_RANGE_S for w in windows):
        return
    yield CHECK.problem(
        f"alert {rule.name} {f'has for: {rule.for_}' if rule.for_ else 'has no `for`'} and reads "
        f"{noisy[0]}: one spike pages, and resolves at the next",
        "set for: to a few evaluation intervals (5m is usual), or alert on a longer window",
        at=rule.at("for"),
    )


CHECK = Check(
    id="noisy-without-for",
    severity=Severity.WARNING,
    summary="Alerts on a gauge or a short rate (5m or less) have a `for`.",
    scope="rule",
    run=run,
)
