"""quantile-le: histogram_quantile() over an aggregation keeps `le`, or it has no buckets to read."""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if tree.func(node) != "histogram_quantile" or len(node.args) < 2:
            continue
        arg = tree.strip(node.args[1])
        if not _reads_buckets(arg, ctx):  # native histograms have no le (histograms: native)
            continue
        if isinstance(arg, pp.AggregateExpr) and tree.op(arg) not in ("topk", "bottomk"):
            grouping = tree.agg_labels(arg)
            by, labels = grouping if grouping else ("by", [])
            if (by == "by") != ("le" in labels):
                yield CHECK.problem(
                    f"histogram_quantile() over `{tree.op(arg)} {by} ({', '.join(labels)})`, which drops le",
                    "keep le in the aggregation: sum by (le, ...) (rate(..._bucket[5m]))",
                )


def _reads_buckets(node, ctx, seen: frozenset[str] = frozenset()) -> bool:
    """Whether `node` reads classic `_bucket` series, itself or through a recording rule; an unknown
    name counts as classic, as before native histograms."""
    for sel in tree.selectors(node):
        name = sel.name or ""
        if name.endswith("_bucket") and not ctx.record_asts(name):
            return True
        if name not in seen and any(_reads_buckets(ast, ctx, seen | {name}) for ast in ctx.record_asts(name)):
            return True
        metric = ctx.metric(name)
        if not name or (metric is None and not ctx.is_record(name)):
            return True
    return False


CHECK = Check(
    id="quantile-le",
    severity=Severity.ERROR,
    summary="histogram_quantile() over an aggregation keeps le.",
    scope="query",
    run=run,
)
