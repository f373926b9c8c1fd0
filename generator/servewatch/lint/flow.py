"""Which labels a (sub)expression's series can carry, from the catalogs: the label flow.

A catalog metric carries its catalog labels plus the scrape target's (job, instance, namespace,
pod, ...; a target label the exporter also sets arrives as exported_<name>) and may carry labels
the catalogs do not know (relabeling, external labels): those are never reported. What the
catalogs do know is reported where it cannot be: vLLM's model_name on a DCGM series, DCGM's
modelName on a vLLM one, a label aggregated away by `by (...)`. Unknown series carry anything.
Aggregation and matching then change the set by Prometheus' rules (as promql/labels.py does for
known series).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import promql_parser as pp

from .. import catalog as catalog_mod
from ..promql import tree
from .facts import OPEN_LABEL_METRICS, SCRAPE_LABELS, LintContext

KEEP_INPUT_AGGS = {"topk", "bottomk", "limitk", "limit_ratio"}


@dataclass(frozen=True)
class Possible:
    labels: frozenset[str]
    foreign: bool = False  # may also carry labels no catalog knows
    anything: bool = False  # an unknown series: nothing can be said

    def __or__(self, other: Possible) -> Possible:
        return Possible(
            self.labels | other.labels, self.foreign or other.foreign, self.anything or other.anything
        )

    def without(self, labels) -> Possible:
        return Possible(self.labels - set(labels), self.foreign, self.anything)

    def missing(self, label: str, universe: frozenset[str]) -> str | None:
        """None when `label` may be on these series, else a hint (with "did you mean")."""
        if self.anything or label in self.labels or label == "__name__":
            return None
        same_case = [k for k in self.labels if k.lower() == label.lower()]
        if self.foreign and label not in universe and not same_case:
            return None
        close = same_case or difflib.get_close_matches(label, sorted(self.labels), n=1, cutoff=0.7)
        return f"did you mean {close[0]!r}?" if close else ""


ANYTHING = Possible(frozenset(), anything=True)
NOTHING = Possible(frozenset())


def of_metric(name: str, metric: catalog_mod.Metric) -> Possible:
    own = set(metric.labels)
    labels = own | SCRAPE_LABELS | {f"exported_{label}" for label in own & SCRAPE_LABELS}
    if metric.type == "histogram" and name.endswith("_bucket"):
        labels.add("le")
    return Possible(frozenset(labels), foreign=True)


def flow(node, ctx: LintContext, _seen: frozenset[str] = frozenset()) -> Possible:
    node = tree.strip(node)
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return NOTHING
    if isinstance(node, (pp.UnaryExpr, pp.SubqueryExpr)):
        return flow(node.expr, ctx, _seen)
    if isinstance(node, pp.MatrixSelector):
        return flow(node.vector_selector, ctx, _seen)
    if isinstance(node, pp.VectorSelector):
        return _selector(node, ctx, _seen)
    if isinstance(node, pp.AggregateExpr):
        return _aggregate(node, ctx, _seen)
    if isinstance(node, pp.Call):
        return _call(node, ctx, _seen)
    if isinstance(node, pp.BinaryExpr):
        return _binary(node, ctx, _seen)
    return ANYTHING


def _selector(node: pp.VectorSelector, ctx: LintContext, seen: frozenset[str]) -> Possible:
    if not node.name or node.name in OPEN_LABEL_METRICS:
        return ANYTHING
    metric = ctx.metric(node.name)
    if metric is not None:
        return of_metric(node.name, metric)
    defs = ctx.definitions.get(node.name)
    if not defs or node.name in seen:
        return ANYTHING
    out = NOTHING
    for d in defs:
        ast = d.ast
        got = flow(ast, ctx, seen | {node.name}) if ast is not None else ANYTHING
        out = out | got | Possible(frozenset(k for k, _ in d.labels))
    return out


def _aggregate(node: pp.AggregateExpr, ctx: LintContext, seen: frozenset[str]) -> Possible:
    inner = flow(node.expr, ctx, seen)
    if tree.op(node) in KEEP_INPUT_AGGS:
        return inner
    grouping = tree.agg_labels(node)
    if grouping is None:
        out = NOTHING
    elif grouping[0] == "by":
        out = Possible(frozenset(grouping[1]))
    else:
        out = inner.without(grouping[1])
    if tree.op(node) == "count_values" and isinstance(node.param, pp.StringLiteral):
        out = out | Possible(frozenset({node.param.val}))
    return out


def _call(node: pp.Call, ctx: LintContext, seen: frozenset[str]) -> Possible:
    name = node.func.name
    vectors = [a for a in node.args if not isinstance(tree.strip(a), (pp.StringLiteral, pp.NumberLiteral))]
    if name in ("vector", "scalar", "time", "pi") or not vectors:
        return NOTHING
    if name in ("absent", "absent_over_time"):
        sel = next(tree.selectors(node.args[0]), None)
        equal = {m.name for m in sel.matchers.matchers if m.op == pp.MatchOp.Equal} if sel else set()
        return Possible(frozenset(equal - {"__name__"}))
    inner = flow(vectors[0], ctx, seen)
    if name in ("label_replace", "label_join"):
        return inner | Possible(frozenset({node.args[1].val}))
    if name == "histogram_quantile":
        return inner.without({"le"})
    return inner


def _binary(node: pp.BinaryExpr, ctx: LintContext, seen: frozenset[str]) -> Possible:
    if tree.is_scalar(node.lhs):
        return flow(node.rhs, ctx, seen)
    lhs = flow(node.lhs, ctx, seen)
    if tree.is_scalar(node.rhs):
        return lhs
    op = tree.op(node)
    if op == "or":
        return lhs | flow(node.rhs, ctx, seen)
    if op in ("and", "unless"):
        return lhs
    include = frozenset(node.modifier.group_labels or ()) if node.modifier is not None else frozenset()
    card = tree.cardinality(node)
    if card == "many-to-one":
        return lhs | Possible(include)
    if card == "one-to-many":
        return flow(node.rhs, ctx, seen) | Possible(include)
    matched = tree.matching_labels(node)
    if matched is None:
        return lhs
    kind, labels = matched
    return Possible(frozenset(labels)) if kind == "on" else lhs.without(labels)
