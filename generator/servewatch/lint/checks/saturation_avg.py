"""saturation-avg: a saturation signal is never averaged across engines or GPUs.

The fullest KV cache or framebuffer fails first (DESIGN.md invariant 5): `avg` of
vllm:kv_cache_usage_perc or of a framebuffer ratio reads 60 % while one engine preempts at 100 %.
An average used only as the baseline of a ratio (max / avg, an imbalance) hides nothing and is
not reported. A ratio of sums, `sum(FB_USED) / sum(FB_USED + FB_FREE)`, is the same average
weighted by size (a pooled ratio), and is reported too.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..facts import ENGINE_LABEL, GPU_LABELS, IDENTITY_PLURAL, MIG_LABEL, SERVER_LABELS
from ..facts import identity_gaps, identity_source, lineage
from ..findings import Severity
from . import Check

IDENTITY = GPU_LABELS | SERVER_LABELS | {MIG_LABEL, ENGINE_LABEL}


def _is_divisor(node, parents: tuple) -> bool:
    chain = parents + (node,)
    for parent, child in zip(chain, chain[1:], strict=False):
        if isinstance(parent, pp.BinaryExpr) and tree.op(parent) == "/" and parent.rhs is child:
            return True
    return False


def _averages_across(node: pp.AggregateExpr, source: str) -> bool:
    grouping = tree.agg_labels(node)
    if grouping is None:
        return True
    kind, labels = grouping
    return bool(identity_gaps(set(labels), source)) if kind == "by" else bool(IDENTITY & set(labels))


POOLING_AGGS = {"sum", "count"}  # a sum divided by a sum (or a count) across devices


def _across(node: pp.AggregateExpr, ctx) -> set[str]:
    """The sources whose saturation series the aggregation mixes across devices."""
    return {
        source
        for metric in lineage(node.expr, ctx)
        if metric.saturation and (source := identity_source(metric)) and _averages_across(node, source)
    }


def _pooled(node, ctx) -> set[str]:
    """`sum(...) / sum(...)` over devices: the sources of a saturation ratio pooled into one number
    (both sides add up the same source's saturation series across its devices)."""
    if not (isinstance(node, pp.BinaryExpr) and tree.op(node) == "/"):
        return set()
    num, rhs = tree.strip(node.lhs), tree.strip(node.rhs)
    if not (isinstance(num, pp.AggregateExpr) and tree.op(num) == "sum"):
        return set()
    if isinstance(rhs, pp.BinaryExpr) and tree.op(rhs) in tree.COMPARISONS:
        rhs = tree.strip(rhs.lhs)  # the guard of a guarded division: (denominator > 0)
    if str(rhs) == str(num):
        return set()  # x / x: one, whatever it pools
    den = set()
    for n, _ in tree.walk(rhs):
        if isinstance(n, pp.AggregateExpr) and tree.op(n) in POOLING_AGGS:
            den |= _across(n, ctx)
    return _across(num, ctx) & den


def run(query, ctx):
    for node, parents in tree.walk(query.ast):
        for source in sorted(_pooled(node, ctx)):
            yield CHECK.problem(
                f"`{tree.short(node, 80)}` pools {IDENTITY_PLURAL[source]} into one ratio: the fullest one "
                "fails first, and the pooled ratio hides it",
                "compute the ratio per device (matched on its identity), then take max",
            )
        if not (isinstance(node, pp.AggregateExpr) and tree.op(node) == "avg") or _is_divisor(node, parents):
            continue
        for source in sorted(_across(node, ctx)):
            yield CHECK.problem(
                f"avg of `{tree.short(node.expr, 80)}` across {IDENTITY_PLURAL[source]}: the fullest one "
                "fails first, and the average hides it",
                "use max (the fullest one), or keep the identity in by (...) to show each",
            )


CHECK = Check(
    id="saturation-avg",
    severity=Severity.WARNING,
    summary="Saturation signals (KV cache, framebuffer) are not averaged or pooled across engines or GPUs.",
    scope="query",
    run=run,
)
