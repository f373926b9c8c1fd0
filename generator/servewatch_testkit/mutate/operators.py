"""Mutation operators: each takes one rule and yields the changes a broken generator could make to it.

Every operator has the same shape, (rule, its expression tree, context) -> changes, and each change is
one bug. The bugs are those issue 11 names: a threshold that moved, a comparison that flipped or became
inclusive, a `for` that shrank, a dedup `max` that became `sum`, a label lost from `by`/`on`, a zero
guard removed, the wrong quantile, the wrong metric, a branch of an absence alert's `or` (or its
`unless`) removed, a recording rule's window or aggregation changed, a matcher lost.

Where the generator writes the same thing at several places of a rule from one argument (the identity
labels of a source, a metric name, the dedup aggregation, the rate window), the bug changes all of them
at once, so the operator does too: one mutant per label, per metric, per rule. Where each place is its
own decision (a threshold, a guard, a quantile, a branch, a matcher), each place is its own mutant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Callable, Iterator

from servewatch.spec.schema import seconds

from . import siblings, tree
from .rules import Rule
from .tree import Aggregate, Binary, Call, Matrix, Number, Path, Selector

THRESHOLD_STEP = 0.25  # threshold mutants sit 25% above and below the real threshold
SWAPPED_QUANTILE = 0.5  # the quantile a wrong-quantile mutant computes (0.99 when the rule computes p50)
_FLIP = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "!=", "!=": "=="}
_INCLUSIVE = {">": ">=", "<": "<=", ">=": ">", "<=": "<"}
_ORDER = {">", "<", ">=", "<="}


@dataclass(frozen=True)
class Context:
    records: frozenset[str] = frozenset()  # names recorded by the rule files: siblings of each other
    threshold_step: float = THRESHOLD_STEP
    catalog: object = None  # servewatch.catalog.Catalog; None loads the default one


@dataclass(frozen=True)
class Change:
    """One change to one rule: a new expression tree, or a new `for`."""

    description: str
    old: str  # the text that changes: a node as printed, the whole expression, or `for: 5m`
    new: str
    root: tree.Node | None = None  # the whole new expression
    for_: str | None = None  # "0s" removes `for`


@dataclass(frozen=True)
class Operator:
    name: str
    summary: str
    changes: Callable[[Rule, tree.Node, Context], Iterator[Change]] = field(repr=False)


def short(text: str, limit: int = 90) -> str:
    """A node's text for a one-line description, its middle elided when long."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + "..." + text[-half:]


def _at(root: tree.Node, path: Path, new: tree.Node, description: str) -> Change:
    """The node at `path` of `root` becomes `new`."""
    old = tree.render(tree.node_at(root, path))
    return Change(description, old, tree.render(new), tree.replace(root, path, new))


def _everywhere(root: tree.Node, fn: Callable[[tree.Node], tree.Node], description: str) -> Change | None:
    """fn applied to every node of root at once; None when it changes nothing."""
    new_root = tree.transform(root, fn)
    if new_root == root:
        return None
    return Change(description, tree.render(root), tree.render(new_root), new_root)


def _scalar_side(node: Binary) -> tuple[str, float] | None:
    """('rhs'|'lhs', value) when one side of a binary operation is a number and the other is not."""
    lhs, rhs = tree.strip_parens(node.lhs), tree.strip_parens(node.rhs)
    if isinstance(rhs, Number) and not isinstance(lhs, Number):
        return "rhs", rhs.value
    if isinstance(lhs, Number) and not isinstance(rhs, Number):
        return "lhs", lhs.value
    return None


def is_guard(node: tree.Node) -> bool:
    """`x > 0` (or `x != 0`): the filter that keeps a zero denominator or an idle series out."""
    if not isinstance(node, Binary) or node.bool or node.op not in (">", "!="):
        return False
    return _scalar_side(node) == ("rhs", 0.0)


def _thresholds(expr: tree.Node) -> Iterator[tuple[Path, Binary, str, float]]:
    """Order comparisons of a vector with a non-zero number: the thresholds of a rule."""
    for path, node in tree.walk(expr):
        if isinstance(node, Binary) and node.op in _ORDER and not node.bool:
            side = _scalar_side(node)
            if side and side[1] != 0:
                yield path, node, side[0], side[1]


# -- thresholds and comparisons ------------------------------------------------------------------------


def threshold_moved(direction: int) -> Callable:
    def changes(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
        for path, node, side, value in _thresholds(expr):
            moved = float(f"{value * (1 + direction * ctx.threshold_step):.12g}")
            new = replace(node, **{side: Number(moved)})
            text = f"threshold {tree.render(Number(value))} -> {tree.render(Number(moved))}"
            yield _at(expr, path, new, text)

    return changes


def comparison_flipped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node in tree.walk(expr):
        if isinstance(node, Binary) and node.op in _FLIP and _scalar_side(node) and not is_guard(node):
            new = replace(node, op=_FLIP[node.op])
            yield _at(expr, path, new, f"`{node.op}` -> `{new.op}` in `{short(tree.render(node))}`")


def comparison_inclusive(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node, _, _ in _thresholds(expr):
        new = replace(node, op=_INCLUSIVE[node.op])
        yield _at(expr, path, new, f"`{node.op}` -> `{new.op}` in `{short(tree.render(node))}`")


def _for_changed(to: Callable[[float], float], what: str) -> Callable:
    def changes(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
        if rule.kind != "alert" or not rule.for_ or seconds(rule.for_) <= 0:
            return
        new = tree.duration(timedelta(seconds=to(seconds(rule.for_))))
        yield Change(f"{what}: for {rule.for_} -> {new}", f"for: {rule.for_}", f"for: {new}", for_=new)

    return changes


def guard_removed(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node in tree.walk(expr):
        if is_guard(node):
            text = f"zero guard `{node.op} 0` removed from `{short(tree.render(node))}`"
            yield _at(expr, path, node.lhs, text)


# -- what is read and how it is aggregated ----------------------------------------------------------


def _aggregation_swapped(old_op: str, new_op: str) -> Callable:
    def changes(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
        swap = lambda n: replace(n, op=new_op) if isinstance(n, Aggregate) and n.op == old_op else n
        count = sum(1 for _, n in tree.walk(expr) if isinstance(n, Aggregate) and n.op == old_op)
        change = _everywhere(expr, swap, f"every `{old_op}` aggregation ({count}) becomes `{new_op}`")
        if change:
            yield change

    return changes


def _grouping_labels(expr: tree.Node) -> list[str]:
    """Labels of every by/on/group_left clause, in order of first appearance."""
    seen: dict[str, None] = {}
    for _, node in tree.walk(expr):
        if isinstance(node, Aggregate) and node.grouping == "by":
            seen.update(dict.fromkeys(node.labels))
        if isinstance(node, Binary):
            if node.matching == "on":
                seen.update(dict.fromkeys(node.match_labels))
            seen.update(dict.fromkeys(node.group_labels))
    return list(seen)


def label_dropped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    """A label lost from the identity: dropped from every `by`, `on` and `group_left` of the rule."""

    def drop(label: str) -> Callable[[tree.Node], tree.Node]:
        def fn(n: tree.Node) -> tree.Node:
            kept = lambda labels: tuple(x for x in labels if x != label)
            if isinstance(n, Aggregate) and n.grouping == "by":
                return replace(n, labels=kept(n.labels))
            if isinstance(n, Binary):
                on = kept(n.match_labels) if n.matching == "on" else n.match_labels
                return replace(n, match_labels=on, group_labels=kept(n.group_labels))
            return n

        return fn

    for label in _grouping_labels(expr):
        change = _everywhere(expr, drop(label), f"label `{label}` dropped from every by/on/group_left")
        if change:
            yield change


def _other_quantile(q: float) -> float:
    return SWAPPED_QUANTILE if q != SWAPPED_QUANTILE else 0.99


def quantile_swapped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node in tree.walk(expr):
        if isinstance(node, Call) and node.func == "histogram_quantile":
            q = tree.strip_parens(node.args[0])
            if isinstance(q, Number):
                other = Number(_other_quantile(q.value))
                new = replace(node, args=(other,) + node.args[1:])
                text = f"histogram_quantile({tree.render(q)}) computes {tree.render(other)}"
                yield _at(expr, path, new, text)
        if isinstance(node, Selector):
            for i, m in enumerate(node.matchers):
                if m.name == "quantile" and m.op == "=" and re.fullmatch(r"[0-9.]+", m.value):
                    value = tree.render(Number(_other_quantile(float(m.value))))
                    matchers = node.matchers[:i] + (replace(m, value=value),) + node.matchers[i + 1 :]
                    new = replace(node, matchers=matchers)
                    yield _at(expr, path, new, f"reads quantile {value} instead of {m.value}")


def metric_swapped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    """Every read of one metric replaced by its closest sibling (a wrong name in a signal's spec)."""
    names = dict.fromkeys(n.name for _, n in tree.walk(expr) if isinstance(n, Selector) and n.name)
    for name in names:
        other = siblings.sibling(name, set(ctx.records), ctx.catalog)
        if other:
            swap = lambda n, name=name, other=other: (
                replace(n, name=other) if isinstance(n, Selector) and n.name == name else n
            )
            yield _everywhere(expr, swap, f"reads {other} instead of {name}")


def window_doubled(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    """Every range window of the rule doubled (the rules' one rate window setting)."""
    ranges = sorted({tree.duration(n.range) for _, n in tree.walk(expr) if isinstance(n, Matrix)})
    double = lambda n: replace(n, range=n.range * 2) if isinstance(n, Matrix) else n
    change = _everywhere(expr, double, f"every range window ({', '.join(ranges)}) doubled")
    if change:
        yield change


# -- the branches of absence alerts and the scoping matchers ----------------------------------------


def _is_set_op(node: tree.Node, op: str) -> bool:
    return isinstance(node, Binary) and node.op == op


def or_branch_removed(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    """Each branch of an `a or b or c` chain removed in turn; the chain keeps the other branches."""
    for path, node in tree.walk(expr):
        if not _is_set_op(node, "or"):
            continue
        for side, other in (("lhs", node.rhs), ("rhs", node.lhs)):
            branch = getattr(node, side)
            if _is_set_op(branch, "or"):
                continue  # an unparenthesized inner `or`: its own branches are removed one by one
            yield _at(expr, path, other, f"`or` branch removed: `{short(tree.render(branch))}`")


def unless_removed(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    """`a unless b` becomes `a`: the check that something is present is gone."""
    for path, node in tree.walk(expr):
        if _is_set_op(node, "unless"):
            yield _at(expr, path, node.lhs, f"`unless` check removed: `{short(tree.render(node.rhs))}`")


def matcher_dropped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node in tree.walk(expr):
        if isinstance(node, Selector):
            for i, m in enumerate(node.matchers):
                if m.name != "__name__":
                    new = replace(node, matchers=node.matchers[:i] + node.matchers[i + 1 :])
                    yield _at(expr, path, new, f"matcher {m.name}{m.op}{tree.quote(m.value)} dropped")


def _alternatives(regex: str) -> list[str] | None:
    """The top-level alternatives of a plain `a|b|c` regex, or None when it is anything more."""
    if "|" not in regex or re.search(r"[()\[\]\\]", regex):
        return None
    return regex.split("|")


def alternative_dropped(rule: Rule, expr: tree.Node, ctx: Context) -> Iterator[Change]:
    for path, node in tree.walk(expr):
        if isinstance(node, Selector):
            for i, m in enumerate(node.matchers):
                alts = _alternatives(m.value) if m.op in ("=~", "!~") else None
                for alt in alts or ():
                    kept = "|".join(a for a in alts if a != alt)
                    new = replace(
                        node, matchers=node.matchers[:i] + (replace(m, value=kept),) + node.matchers[i + 1 :]
                    )
                    yield _at(expr, path, new, f"`{alt}` dropped from {m.name}{m.op}{tree.quote(m.value)}")


OPERATORS: tuple[Operator, ...] = (
    Operator("threshold-up", "the threshold moved up by the step", threshold_moved(+1)),
    Operator("threshold-down", "the threshold moved down by the step", threshold_moved(-1)),
    Operator("comparison-flipped", "`>` becomes `<`, `==` becomes `!=`", comparison_flipped),
    Operator("comparison-inclusive", "`>` becomes `>=` (and back)", comparison_inclusive),
    Operator("for-zero", "`for` removed", _for_changed(lambda s: 0, "for removed")),
    Operator("for-halved", "`for` halved", _for_changed(lambda s: s / 2, "for halved")),
    Operator("guard-removed", "a `> 0` zero guard removed", guard_removed),
    Operator("max-to-sum", "the dedup `max` aggregations become `sum`", _aggregation_swapped("max", "sum")),
    Operator("sum-to-max", "the `sum` aggregations become `max`", _aggregation_swapped("sum", "max")),
    Operator("label-dropped", "a label dropped from every by/on/group_left", label_dropped),
    Operator("quantile-swapped", "the wrong quantile computed or read", quantile_swapped),
    Operator("metric-swapped", "a sibling metric read instead", metric_swapped),
    Operator("window-doubled", "the range windows doubled", window_doubled),
    Operator("or-branch-removed", "one branch of an `or` removed", or_branch_removed),
    Operator("unless-removed", "the `unless` presence check removed", unless_removed),
    Operator("matcher-dropped", "a label matcher dropped", matcher_dropped),
    Operator("alternative-dropped", "one alternative of a regex matcher dropped", alternative_dropped),
)
