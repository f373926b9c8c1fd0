"""An expression with the records the history lacks written out in place, as one PromQL query.

Why inline rather than evaluate the records' range queries first: the records' results would then
have to be combined with the alert expression outside Prometheus, which means a second PromQL engine
in Python; written out, Prometheus evaluates everything with its own semantics in one range query.
A record read as ``rec{m}`` becomes the union of the rules that produce ``rec`` whose own labels
agree with the matchers, each with those labels set (label_replace) and the other matchers applied
as set operations; a record read over a window, ``rec[w]``, becomes the subquery
``(...)[w:interval]`` at its group's interval, which holds the samples a live rule would have written
(evaluated at the interval's multiples rather than at the group's phase: at most one interval apart).
A record present in the history is read from it, as the deployed alert reads it. A memory
(promql.builders.remember) reads its own previous value, which a history without it cannot give: it
is written out as its equal that reads the whole horizon instead (`promql.builders.unrolled`).
"""

from __future__ import annotations

import re
from typing import Callable

import promql_parser as pp

from ..errors import ServewatchError
from ..promql import builders as b
from .rules import Record

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_MARK = "__backtest_keep"


class InlineError(ServewatchError):
    """A record is read in a way the back-test cannot write out in place."""


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _fmt_duration(s: float) -> str:
    return f"{int(s)}s" if float(s).is_integer() else f"{int(round(s * 1000))}ms"


def _matchers(selector: str) -> list[tuple[str, str, str]]:
    """(label, op, value) of a selector's matchers, read by the PromQL parser."""
    node = pp.parse(selector)
    out = []
    for m in node.matchers.matchers:
        out.append((m.name, str(m.op).split(".")[-1], m.value))
    return out


_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def _static_ok(op: str, value: str, actual: str) -> bool:
    if op == "=":
        return actual == value
    if op == "!=":
        return actual != value
    full = re.fullmatch(value, actual) is not None
    return full if op == "=~" else not full


def _filter(expr: str, label: str, op: str, value: str) -> str:
    """`expr` keeping only series whose `label` satisfies the matcher (PromQL has no label filter on an
    expression: set operations against a one-series vector carrying the wanted value do it)."""
    if op in ("=", "!="):
        one = f'label_replace(vector(1), {_quote(label)}, {_quote(value)}, "", "")'
        word = "and" if op == "=" else "unless"
        return f"({expr} {word} on ({label}) {one})"
    marked = f'label_replace({expr}, {_quote(_MARK)}, "1", {_quote(label)}, {_quote(value)})'
    one = f'label_replace(vector(1), {_quote(_MARK)}, "1", "", "")'
    if op == "=~":
        return f'label_replace(({marked} and on ({_MARK}) {one}), {_quote(_MARK)}, "", "", "")'
    return f"({marked} unless on ({_MARK}) {one})"


class Inliner:
    """Writes records out in place; `in_history(name)` says which records to read as stored."""

    def __init__(self, records: dict[str, tuple[Record, ...]], in_history: Callable[[str], bool]):
        self.records = records
        self.in_history = in_history
        names = sorted(records, key=len, reverse=True)
        self._re = (
            re.compile(
                r"(?<![a-zA-Z0-9_:\"])("
                + "|".join(re.escape(n) for n in names)
                + r")(?![a-zA-Z0-9_:])(\{[^{}]*\})?(\s*\[[^\]]*\])?(\s+offset\s+\S+)?"
            )
            if names
            else None
        )
        self.inlined: set[str] = set()  # the records written out, for the report

    def expand(self, expr: str, path: tuple[str, ...] = ()) -> str:
        if self._re is None:
            return expr
        return self._re.sub(lambda m: self._replace(m, path), expr)

    def _replace(self, m: re.Match, path: tuple[str, ...]) -> str:
        name, sel, window, offset = m.group(1), m.group(2) or "", m.group(3) or "", m.group(4) or ""
        if self.in_history(name):
            return m.group(0)
        if name in path:
            raise InlineError(f"recording rules read each other in a cycle: {' -> '.join((*path, name))}")
        if offset:
            raise InlineError(
                f"{name} is read with an offset and is not in the history; backfill it first "
                "(promtool tsdb create-blocks-from rules) or run with the records deployed"
            )
        self.inlined.add(name)
        body = self._record(name, _matchers(name + (sel or "{}")), path + (name,))
        if window:
            w = window.strip()[1:-1].strip()
            return f"({body})[{w}:{_fmt_duration(self.records[name][0].interval)}]"
        return f"({body})"

    def _record(self, name: str, matchers: list[tuple[str, str, str]], path: tuple[str, ...]) -> str:
        parts = []
        for rec in self.records[name]:
            own = dict(rec.labels)
            dynamic, ok = [], True
            for label, op, value in matchers:
                op = _OPS.get(op, op)
                if label == "__name__":
                    continue
                if label in own:
                    ok = ok and _static_ok(op, value, own[label])
                else:
                    dynamic.append((label, op, value))
            if not ok:
                continue
            memory = b.unrolled(name, rec.expr, _fmt_duration(rec.interval))
            expr = self.expand(memory or rec.expr, path)
            for label, value in rec.labels:
                expr = f'label_replace({expr}, {_quote(label)}, {_quote(value)}, "", "")'
            for label, op, value in dynamic:
                expr = _filter(expr, label, op, value)
            parts.append(f"({expr})")
        if not parts:  # no rule of this record matches: an empty vector of the same shape
            return "vector(1) < 0"
        return " or ".join(parts)


def expand(expr: str, records: dict[str, tuple[Record, ...]], in_history: Callable[[str], bool]) -> str:
    """`expr` with every record not in the history written out (and checked by the parser)."""
    out = Inliner(records, in_history).expand(expr)
    pp.parse(out)
    return out
