"""saturation-avg: a saturation signal is never averaged across engines or GPUs.

The fullest KV cache or framebuffer fails first (DESIGN.md invariant 5): `avg` of
vllm:kv_cache_usage_perc or of a framebuffer ratio reads 60 % while one engine preempts at 100 %.
An average used only as the baseline of a ratio (max / avg, an imbalance) hides nothing and is
not reported.
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


def run(query, ctx):
    for node, parents in tree.walk(query.ast):
        if not (isinstance(node, pp.AggregateExpr) and tree.op(node) == "avg") or _is_divisor(node, parents):
            continue
        by_source: dict[str, list[str]] = {}
        for metric in lineage(node.expr, ctx):
            source = identity_source(metric)
            if metric.saturation and source and _averages_across(node, source):
                by_source.setdefault(source, []).append(metric.name)
        for source, names in sorted(by_source.items()):
            yield CHECK.problem(
                f"avg of {' / '.join(sorted(names))} across {IDENTITY_PLURAL[source]}: the fullest one "
                "fails first, and the average hides it",
                "use max (the fullest one), or keep the identity in by (...) to show each",
            )


CHECK = Check(
    id="saturation-avg",
    severity=Severity.WARNING,
    summary="Saturation signals (KV cache, framebuffer) are not averaged across engines or GPUs.",
    scope="query",
    run=run,
)
