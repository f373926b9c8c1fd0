"""Which labels a PromQL expression's result series carry, read statically from its AST.

`returned(expr, records)` follows Prometheus' own rules: `by` keeps only its labels, `without` drops
its own, one-to-one vector matching `on (...)` keeps only the matching labels (`ignoring` drops
them), `group_left/right (...)` adds the included labels, set operators keep the left side's labels,
label_replace/label_join add their target label, histogram_quantile drops `le`. A selector of a
recording rule in `records` carries what the rule's expression returns (plus the rule's static
labels); any other selector is open: it carries its matchers' labels and whatever else it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import promql_parser as pp

from .tree import is_scalar as _scalar
from .variables import substitute_macros

NO_LABELS = {
    "vector",
    "time",
    "scalar",
    "pi",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "hour",
    "minute",
    "month",
    "year",
}
COUNT_LIKE = {"count_values"}
KEEP_INPUT = {"topk", "bottomk", "limitk", "limit_ratio"}


@dataclass(frozen=True)
class Labels:
    known: frozenset[str]
    open: bool = False  # the series may carry labels not in `known` (a raw selector's)

    def __or__(self, other: Labels) -> Labels:
        return Labels(self.known | other.known, self.open or other.open)


EMPTY = Labels(frozenset())


def returned(expr: str, records: dict[str, Labels] | None = None) -> Labels:
    """The labels of `expr`'s result series (Grafana macros allowed)."""
    return _labels(pp.parse(substitute_macros(expr)), records or {})


def always(expr: str, records: dict[str, Labels] | None = None) -> frozenset[str]:
    """The labels every result series of `expr` carries: `returned` says what a series may carry,
    and the branches of an `or` may each carry different ones, so only their common labels count."""
    return _always(pp.parse(substitute_macros(expr)), records or {})


def _always(node, records: dict[str, Labels]) -> frozenset[str]:
    if isinstance(node, pp.ParenExpr):
        return _always(node.expr, records)
    if isinstance(node, pp.BinaryExpr) and str(node.op) == "or":
        return _always(node.lhs, records) & _always(node.rhs, records)
    joined = _joined(node)
    if joined is not None:  # group_left/right copies an included label only where the one side has it
        many, one, include = joined
        return _always(many, records) | (include & _always(one, records))
    return _labels(node, records).known


def _joined(node) -> tuple[object, object, frozenset[str]] | None:
    """(many side, one side, included labels) of a `group_left/right (...)` join between two vectors."""
    if not isinstance(node, pp.BinaryExpr) or node.modifier is None or _scalar(node.lhs) or _scalar(node.rhs):
        return None
    include = frozenset(node.modifier.group_labels or ())
    if node.modifier.card == pp.VectorMatchCardinality.ManyToOne:
        return node.lhs, node.rhs, include
    if node.modifier.card == pp.VectorMatchCardinality.OneToMany:
        return node.rhs, node.lhs, include
    return None


def record_labels(rules) -> dict[str, Labels]:
    """record name -> Labels, from RecordRule-like objects (record, expr, labels), in rule order."""
    out: dict[str, Labels] = {}
    for rule in rules:
        got = returned(rule.expr, out) | Labels(frozenset(rule.labels))
        out[rule.record] = out[rule.record] | got if rule.record in out else got
    return out


def _labels(node, records: dict[str, Labels]) -> Labels:
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return EMPTY
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return _labels(node.expr, records)
    if isinstance(node, pp.MatrixSelector):
        return _labels(node.vector_selector, records)
    if isinstance(node, pp.VectorSelector):
        if node.name in records:
            return records[node.name]
        names = {m.name for m in node.matchers.matchers} - {"__name__"}
        return Labels(frozenset(names), open=True)
    if isinstance(node, pp.AggregateExpr):
        inner = _labels(node.expr, records)
        op = str(node.op)
        if op in KEEP_INPUT:
            return inner
        mod = node.modifier
        if mod is None:
            out = EMPTY
        elif mod.type == pp.AggModifierType.By:
            out = Labels(frozenset(mod.labels))
        else:
            out = Labels(inner.known - set(mod.labels), inner.open)
        if op in COUNT_LIKE and isinstance(node.param, pp.StringLiteral):
            out = out | Labels(frozenset({node.param.val}))
        return out
    if isinstance(node, pp.Call):
        name = node.func.name
        if name in NO_LABELS:
            return EMPTY
        vectors = [a for a in node.args if not isinstance(a, (pp.StringLiteral, pp.NumberLiteral))]
        inner = _labels(vectors[0], records) if vectors else EMPTY
        if name in ("label_replace", "label_join"):
            return inner | Labels(frozenset({node.args[1].val}))
        if name == "histogram_quantile":
            return Labels(inner.known - {"le"}, inner.open)
        if name in ("absent", "absent_over_time"):
            return EMPTY  # only equality matchers' labels, and only when nothing matches
        return inner
    if isinstance(node, pp.BinaryExpr):
        lhs, rhs = _labels(node.lhs, records), _labels(node.rhs, records)
        if _scalar(node.lhs):
            return rhs
        if _scalar(node.rhs):
            return lhs
        op, mod = str(node.op), node.modifier
        if op == "or":
            return lhs | rhs
        if op in ("and", "unless"):
            return lhs
        matching = mod.matching if mod is not None else None
        card = mod.card if mod is not None else pp.VectorMatchCardinality.OneToOne
        include = frozenset(mod.group_labels or ()) if mod is not None else frozenset()
        if card == pp.VectorMatchCardinality.ManyToOne:
            return lhs | Labels(include)
        if card == pp.VectorMatchCardinality.OneToMany:
            return rhs | Labels(include)
        if matching is None:
            return lhs
        if matching.type == pp.LabelModifierType.Include:  # on (...)
            return Labels(frozenset(matching.labels))
        return Labels(lhs.known - set(matching.labels), lhs.open)
    raise TypeError(f"unhandled PromQL node {type(node).__name__}")
