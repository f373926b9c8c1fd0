"""PromQL as a small immutable tree that can be changed in one place and printed back.

promql-parser gives a read-only AST and prints it with quirks (`foo{}`, unescaped label values), so an
expression is converted once into these frozen dataclasses, a mutation replaces one node
(`replace`), and `render` prints the result. The parse tree keeps every parenthesis of the source
(`Paren`), so printing nodes in order gives back text that parses to the same tree; `reparses`
checks exactly that for every mutant before it is run.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Iterator, Union

import promql_parser as pp

# OpenMetrics writes numbers the way PromQL reads them (50, 0.95, NaN, +Inf): one formatter for both.
from ..synth.openmetrics import _fmt_value as number_text


class Unsupported(Exception):
    """A construct this tree does not model; the rule that holds it is not mutated."""


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class String:
    value: str


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str  # = != =~ !~
    value: str


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[Matcher, ...] = ()
    offset: timedelta | None = None
    at: str | None = None  # the text after `@`: a timestamp, start() or end()


@dataclass(frozen=True)
class Matrix:
    selector: Selector
    range: timedelta


@dataclass(frozen=True)
class Subquery:
    expr: Node
    range: timedelta
    step: timedelta | None = None
    offset: timedelta | None = None


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Aggregate:
    op: str
    expr: Node
    param: Node | None = None
    grouping: str | None = None  # by | without | None (no clause)
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: Node
    rhs: Node
    bool: bool = False
    matching: str | None = None  # on | ignoring | None (no clause)
    match_labels: tuple[str, ...] = ()
    group: str | None = None  # group_left | group_right | None
    group_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paren:
    expr: Node


@dataclass(frozen=True)
class Negation:
    expr: Node


Node = Union[Number, String, Selector, Matrix, Subquery, Call, Aggregate, Binary, Paren, Negation]
Path = tuple[tuple[str, int | None], ...]  # (field, index in a tuple field or None) from the root

COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
SET_OPS = {"and", "or", "unless"}
_MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_GROUPS = {"ManyToOne": "group_left", "OneToMany": "group_right"}
_IDENT = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


# -- from promql-parser -----------------------------------------------------------------------------


def parse(text: str) -> Node:
    """Parse PromQL into the tree; promql-parser's error (a plain exception) propagates."""
    return from_promql(pp.parse(text))


def _enum_name(value) -> str:
    return str(value).rsplit(".", 1)[-1]


def _at(node) -> str | None:
    at = getattr(node, "at", None)
    if at is None:
        return None
    kind = _enum_name(at.type)
    if kind == "Start":
        return "start()"
    if kind == "End":
        return "end()"
    return number_text(at.at.timestamp())


def _selector(node) -> Selector:
    if node.matchers.or_matchers:
        raise Unsupported("`or` inside a label matcher list")
    matchers = tuple(Matcher(m.name, _MATCH_OPS[_enum_name(m.op)], m.value) for m in node.matchers.matchers)
    return Selector(node.name, matchers, node.offset, _at(node))


def from_promql(node) -> Node:
    if isinstance(node, pp.NumberLiteral):
        return Number(node.val)
    if isinstance(node, pp.StringLiteral):
        return String(node.val)
    if isinstance(node, pp.VectorSelector):
        return _selector(node)
    if isinstance(node, pp.MatrixSelector):
        return Matrix(_selector(node.vector_selector), node.range)
    if isinstance(node, pp.SubqueryExpr):
        if node.at is not None:
            raise Unsupported("`@` on a subquery")
        return Subquery(from_promql(node.expr), node.range, node.step, node.offset)
    if isinstance(node, pp.Call):
        return Call(node.func.name, tuple(from_promql(a) for a in node.args))
    if isinstance(node, pp.AggregateExpr):
        mod = node.modifier
        grouping = None if mod is None else ("without" if _enum_name(mod.type) == "Without" else "by")
        param = None if node.param is None else from_promql(node.param)
        labels = () if mod is None else tuple(mod.labels)
        return Aggregate(str(node.op), from_promql(node.expr), param, grouping, labels)
    if isinstance(node, pp.BinaryExpr):
        return _binary(node)
    if isinstance(node, pp.ParenExpr):
        return Paren(from_promql(node.expr))
    if isinstance(node, pp.UnaryExpr):
        return Negation(from_promql(node.expr))
    raise Unsupported(f"node type {type(node).__name__}")


def _binary(node) -> Binary:
    op = str(node.op).lower()
    mod = node.modifier
    matching, match_labels, group, group_labels, bool_ = None, (), None, (), False
    if mod is not None:
        bool_ = bool(mod.return_bool)
        if mod.matching is not None:
            matching = "ignoring" if _enum_name(mod.matching.type) == "Exclude" else "on"
            match_labels = tuple(mod.matching.labels)
        group = _GROUPS.get(_enum_name(mod.card))
        group_labels = tuple(mod.group_labels) if group else ()
        fill = mod.fill_values
        if fill is not None and (fill.lhs is not None or fill.rhs is not None):
            raise Unsupported("fill modifiers")
    return Binary(
        op, from_promql(node.lhs), from_promql(node.rhs), bool_, matching, match_labels, group, group_labels
    )


# -- printing --------------------------------------------------------------------------------------


def duration(td: timedelta) -> str:
    """A Prometheus duration: 2m30s, 1h, 500ms."""
    ms = round(td.total_seconds() * 1000)
    if ms == 0:
        return "0s"
    out = ""
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            out += f"{ms // size}{unit}"
            ms %= size
    return out


def quote(value: str) -> str:
    """A PromQL double-quoted string literal (Go escapes)."""
    out = []
    for ch in value:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _label(name: str) -> str:
    return name if _IDENT.match(name) else quote(name)


def _labels(names: tuple[str, ...]) -> str:
    return "(" + ", ".join(_label(n) for n in names) + ")"


def _selector_text(s: Selector) -> str:
    matchers = [f"{_label(m.name)}{m.op}{quote(m.value)}" for m in s.matchers]
    if s.name is not None and not _METRIC.match(s.name):
        matchers.insert(0, quote(s.name))
        return "{" + ", ".join(matchers) + "}"
    body = "{" + ", ".join(matchers) + "}" if matchers else ""
    return (s.name or "") + body


def _modifiers(offset: timedelta | None, at: str | None) -> str:
    out = ""
    if offset is not None:
        out += f" offset {'-' if offset < timedelta(0) else ''}{duration(abs(offset))}"
    if at is not None:
        out += f" @ {at}"
    return out


def render(node: Node) -> str:
    if isinstance(node, Number):
        return number_text(node.value)
    if isinstance(node, String):
        return quote(node.value)
    if isinstance(node, Selector):
        return _selector_text(node) + _modifiers(node.offset, node.at)
    if isinstance(node, Matrix):
        s = node.selector
        return f"{_selector_text(s)}[{duration(node.range)}]" + _modifiers(s.offset, s.at)
    if isinstance(node, Subquery):
        step = duration(node.step) if node.step else ""
        return f"{render(node.expr)}[{duration(node.range)}:{step}]" + _modifiers(node.offset, None)
    if isinstance(node, Call):
        return f"{node.func}({', '.join(render(a) for a in node.args)})"
    if isinstance(node, Aggregate):
        clause = f" {node.grouping} {_labels(node.labels)} " if node.grouping else ""
        args = ([render(node.param)] if node.param is not None else []) + [render(node.expr)]
        return f"{node.op}{clause}({', '.join(args)})"
    if isinstance(node, Binary):
        parts = [render(node.lhs), node.op]
        if node.bool:
            parts.append("bool")
        if node.matching:
            parts.append(f"{node.matching} {_labels(node.match_labels)}")
        if node.group:
            # Always print the label list: a bare `group_left` before a parenthesised right-hand side
            # would read that parenthesis as the list.
            parts.append(f"{node.group} {_labels(node.group_labels)}")
        parts.append(render(node.rhs))
        return " ".join(parts)
    if isinstance(node, Paren):
        return f"({render(node.expr)})"
    if isinstance(node, Negation):
        return f"-{render(node.expr)}"
    raise TypeError(f"not a PromQL node: {node!r}")


def reparses(node: Node) -> bool:
    """Whether the printed text parses back to this very tree (valid PromQL that means what we built)."""
    try:
        return parse(render(node)) == node
    except Unsupported:
        return False
    except Exception:  # promql-parser's syntax error is a plain exception
        return False


# -- walking and replacing ---------------------------------------------------------------------------


def _is_node(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, (Matcher, type))


def children(node: Node) -> Iterator[tuple[tuple[str, int | None], Node]]:
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                if _is_node(item):
                    yield (f.name, i), item
        elif _is_node(value):
            yield (f.name, None), value


def walk(node: Node, path: Path = ()) -> Iterator[tuple[Path, Node]]:
    """Every node with its path, parents before children, left to right."""
    yield path, node
    for step, child in children(node):
        yield from walk(child, path + (step,))


def node_at(root: Node, path: Path) -> Node:
    for name, index in path:
        root = getattr(root, name) if index is None else getattr(root, name)[index]
    return root


def replace(root: Node, path: Path, new: Node) -> Node:
    """root with the node at path replaced by new (the tree is immutable: the spine is rebuilt)."""
    if not path:
        return new
    (name, index), rest = path[0], path[1:]
    child = getattr(root, name) if index is None else getattr(root, name)[index]
    updated = replace(child, rest, new)
    if index is None:
        return dataclasses.replace(root, **{name: updated})
    items = list(getattr(root, name))
    items[index] = updated
    return dataclasses.replace(root, **{name: tuple(items)})


def strip_parens(node: Node) -> Node:
    while isinstance(node, Paren):
        node = node.expr
    return node


def transform(node: Node, fn) -> Node:
    """node rebuilt bottom-up with fn applied to every node (fn returns the node itself to keep it)."""
    updates = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, tuple) and any(_is_node(v) for v in value):
            updates[f.name] = tuple(transform(v, fn) if _is_node(v) else v for v in value)
        elif _is_node(value):
            updates[f.name] = transform(value, fn)
    rebuilt = dataclasses.replace(node, **updates) if updates else node
    return fn(rebuilt)
