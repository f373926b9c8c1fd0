"""Walking promql-parser's AST: children, parents, and the small predicates every check needs."""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

RATE_FUNCS = {"rate", "irate", "increase"}
SET_OPS = {"and", "or", "unless"}
COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}


def children(node) -> list:
    if isinstance(node, pp.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, pp.AggregateExpr):
        return [c for c in (node.param, node.expr) if c is not None]
    if isinstance(node, pp.Call):
        return list(node.args)
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return [node.expr]
    if isinstance(node, pp.MatrixSelector):
        return [node.vector_selector]
    return []


def walk(node, parents: tuple = ()) -> Iterator[tuple[object, tuple]]:
    """Every node with its ancestors, outermost first."""
    yield node, parents
    for child in children(node):
        yield from walk(child, parents + (node,))


def strip(node):
    """The expression inside any number of parentheses."""
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


def is_scalar(node) -> bool:
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return True
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        return is_scalar(node.expr)
    if isinstance(node, pp.BinaryExpr):
        return is_scalar(node.lhs) and is_scalar(node.rhs)
    if isinstance(node, pp.Call):
        return node.func.name in ("scalar", "time", "pi")
    return False


def op(node) -> str:
    """The operator of a binary or aggregate expression, lower case (`/`, `and`, `sum`)."""
    return str(node.op).lower()


def func(node) -> str | None:
    return node.func.name if isinstance(node, pp.Call) else None


def selectors(node) -> Iterator[pp.VectorSelector]:
    for n, _ in walk(node):
        if isinstance(n, pp.VectorSelector):
            yield n


def matching(node: pp.BinaryExpr):
    """The on(...)/ignoring(...) of a binary expression, or None for implicit matching."""
    return node.modifier.matching if node.modifier is not None else None


def matching_labels(node: pp.BinaryExpr) -> tuple[str, list[str]] | None:
    """("on" | "ignoring", labels) of a binary expression, None when it names no labels."""
    m = matching(node)
    if m is None:
        return None
    kind = "on" if m.type == pp.LabelModifierType.Include else "ignoring"
    return kind, list(m.labels)


def cardinality(node: pp.BinaryExpr) -> str:
    """one-to-one, many-to-one (group_left) or one-to-many (group_right)."""
    card = node.modifier.card if node.modifier is not None else None
    if card == pp.VectorMatchCardinality.ManyToOne:
        return "many-to-one"
    if card == pp.VectorMatchCardinality.OneToMany:
        return "one-to-many"
    return "one-to-one"


def is_vector_match(node) -> bool:
    """A binary operation between two instant vectors (where label matching happens)."""
    return isinstance(node, pp.BinaryExpr) and not (is_scalar(node.lhs) or is_scalar(node.rhs))


def agg_labels(node: pp.AggregateExpr) -> tuple[str, list[str]] | None:
    """("by" | "without", labels) of an aggregation, None when it has neither."""
    mod = node.modifier
    if mod is None:
        return None
    return ("by" if mod.type == pp.AggModifierType.By else "without"), list(mod.labels)


# Aggregations whose result keeps only the grouping labels (topk, bottomk, limitk keep every label,
# count_values adds one).
REDUCING_AGGS = {"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "quantile"}
# Functions whose result has the labels of their one vector argument (without the metric name).
LABEL_KEEPING_FUNCS = {
    "abs", "ceil", "floor", "round", "sqrt", "exp", "ln", "log2", "log10", "sgn",
    "clamp", "clamp_min", "clamp_max", "timestamp",
}  # fmt: skip


def carries_no_labels(node) -> bool:
    """Whether every series of the expression has no labels at all: `sum(x)`, `max by () (x)`, a
    number, a quantile of `sum by (le)`. Between two of these `on (...)` has nothing to match on."""
    node = strip(node)
    if is_scalar(node):
        return True
    if isinstance(node, pp.AggregateExpr):
        if op(node) not in REDUCING_AGGS:
            return False
        return agg_labels(node) in (None, ("by", []))
    if isinstance(node, pp.Call):
        if func(node) == "vector":
            return True
        if func(node) == "histogram_quantile":
            inner = strip(node.args[-1])
            return isinstance(inner, pp.AggregateExpr) and agg_labels(inner) in (None, ("by", ["le"]))
        vectors = [a for a in node.args if not is_scalar(a)]
        return func(node) in LABEL_KEEPING_FUNCS and len(vectors) == 1 and carries_no_labels(vectors[0])
    if isinstance(node, pp.UnaryExpr):
        return carries_no_labels(node.expr)
    if isinstance(node, pp.BinaryExpr):
        return carries_no_labels(node.lhs) and carries_no_labels(node.rhs)
    return False


def range_arg(call: pp.Call) -> pp.MatrixSelector | None:
    """The range selector a function like rate() reads, through parentheses."""
    for arg in call.args:
        arg = strip(arg)
        if isinstance(arg, pp.MatrixSelector):
            return arg
    return None


MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def matcher_text(m) -> str:
    return f'{m.name}{MATCH_OPS.get(str(m.op).rsplit(".", 1)[-1], "=")}"{m.value}"'


def short(node, limit: int = 70) -> str:
    """A one-line rendering of a node for messages."""
    text = " ".join(str(node).replace("{}", "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
