"""label-unknown: labels a series never has, in matchers, by/without, on/ignoring, group_left/right
and label_replace, read from the catalogs and the label flow (lint/flow.py).

The copied mistakes: vLLM's `model_name` on a DCGM series (DCGM's is `modelName`), `uuid` for
`UUID`, `exported_pod` on a vLLM series, and a label already aggregated away by `by (...)`.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from ..flow import flow
from . import Check


def _describe(node) -> str:
    node = tree.strip(node)
    if isinstance(node, pp.MatrixSelector):
        node = node.vector_selector
    if isinstance(node, pp.VectorSelector) and node.name:
        return node.name
    return f"`{tree.short(node, 50)}`"


def _missing(label: str, node, ctx, place: str):
    hint = flow(node, ctx).missing(label, ctx.label_universe)
    if hint is None:
        return None
    return CHECK.problem(
        f"{place}: {_describe(node)} never has label {label!r}", hint or "use a label the series carries"
    )


def _problems(node, ctx):
    if isinstance(node, pp.VectorSelector):
        for m in node.matchers.matchers:
            yield _missing(m.name, node, ctx, f"matcher {tree.matcher_text(m)}")
    elif isinstance(node, pp.AggregateExpr) and (grouping := tree.agg_labels(node)):
        kind, labels = grouping
        for label in labels:
            yield _missing(label, node.expr, ctx, f"{tree.op(node)} {kind} ({', '.join(labels)})")
    elif isinstance(node, pp.BinaryExpr) and tree.is_vector_match(node):
        matched = tree.matching_labels(node)
        if matched and tree.op(node) != "or":
            kind, labels = matched
            for label in labels:
                for side in (node.lhs, node.rhs):
                    yield _missing(label, side, ctx, f"{kind} ({', '.join(labels)})")
        include = list(node.modifier.group_labels or ()) if node.modifier is not None else []
        one_side = node.rhs if tree.cardinality(node) == "many-to-one" else node.lhs
        for label in include:
            yield _missing(label, one_side, ctx, f"group ({', '.join(include)})")
    elif isinstance(node, pp.Call) and node.func.name in ("label_replace", "label_join"):
        sources = node.args[3:] if node.func.name == "label_join" else node.args[3:4]
        for src in sources:
            if isinstance(src, pp.StringLiteral) and src.val:
                yield _missing(src.val, node.args[0], ctx, f"{node.func.name}(..., {src.val!r})")


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        yield from (p for p in _problems(node, ctx) if p is not None)


CHECK = Check(
    id="label-unknown",
    severity=Severity.ERROR,
    summary="Labels in matchers, by/on/group and label_replace exist on the series (catalogs + label flow).",
    scope="query",
    run=run,
)
