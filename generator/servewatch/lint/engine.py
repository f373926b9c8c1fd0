"""PromQL lint: read an expression back and check it against the catalogs and the house rules.

Each check has one shape, (expression AST, context) -> problems, and one documentation section
in docs/lint.md with a failing and a passing example. A check can be excluded by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

import promql_parser as pp

from .. import catalog as catalog_mod

# Functions that may take a raw counter: they read a counter correctly or only test presence.
COUNTER_SAFE_FUNCS = {
    "rate",
    "increase",
    "irate",
    "resets",
    "absent",
    "absent_over_time",
    "present_over_time",
}
COUNTER_SAFE_AGGS = {"group", "count"}
SET_OPS = {"and", "or", "unless"}
GRAFANA_MACROS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "${__range}": "1h",
    "$__range_s": "3600",
    "$__interval_ms": "60000",
}


@dataclass(frozen=True)
class Problem:
    check: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


@dataclass
class LintContext:
    catalog: catalog_mod.Catalog
    records: set[str] = field(default_factory=set)
    min_range_s: float | None = None  # 4 x scrape interval, for rules


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
    yield node, parents
    for child in children(node):
        yield from walk(child, parents + (node,))


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


def _strip(node):
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


# -- checks ------------------------------------------------------------------------------
def check_metric_known(ast, ctx: LintContext) -> list[Problem]:
    out = []
    for node, _ in walk(ast):
        if isinstance(node, pp.VectorSelector) and node.name:
            if node.name in ctx.records or ctx.catalog.lookup(node.name):
                continue
            out.append(Problem("metric-known", ctx.catalog.problem(node.name)))
    return out


def check_explicit_matching(ast, ctx: LintContext) -> list[Problem]:
    out = []
    for node, _ in walk(ast):
        if not isinstance(node, pp.BinaryExpr) or str(node.op).lower() == "or":
            continue
        if is_scalar(node.lhs) or is_scalar(node.rhs):
            continue
        if node.modifier is None or node.modifier.matching is None:
            out.append(
                Problem(
                    "explicit-matching",
                    f"`{str(node.op)}` between two vectors without on(...) or ignoring(...)",
                )
            )
    return out


def check_counter_rate(ast, ctx: LintContext) -> list[Problem]:
    out = []
    for node, parents in walk(ast):
        if not isinstance(node, pp.VectorSelector) or not node.name:
            continue
        entry = ctx.catalog.lookup(node.name)
        is_counter = entry is not None and (
            entry.type == "counter" or (entry.type == "histogram" and node.name != entry.name)
        )
        if not is_counter:
            continue
        up = [p for p in parents if not isinstance(p, pp.ParenExpr)]
        ok = False
        if len(up) >= 2 and isinstance(up[-1], pp.MatrixSelector) and isinstance(up[-2], pp.Call):
            ok = up[-2].func.name in COUNTER_SAFE_FUNCS
        elif up and isinstance(up[-1], pp.Call) and up[-1].func.name in COUNTER_SAFE_FUNCS:
            ok = True
        elif up and isinstance(up[-1], pp.AggregateExpr) and str(up[-1].op).lower() in COUNTER_SAFE_AGGS:
            ok = True
        if not ok:
            out.append(
                Problem("counter-rate", f"counter {node.name} is read raw; wrap it in rate() or increase()")
            )
    return out


def check_rate_window(ast, ctx: LintContext) -> list[Problem]:
    if ctx.min_range_s is None:
        return []
    out = []
    for node, _ in walk(ast):
        if isinstance(node, pp.MatrixSelector) and node.range.total_seconds() < ctx.min_range_s:
            out.append(
                Problem(
                    "rate-window",
                    f"range [{int(node.range.total_seconds())}s] is shorter than "
                    f"4 x the scrape interval ({int(ctx.min_range_s)}s)",
                )
            )
    return out


def check_quantile_le(ast, ctx: LintContext) -> list[Problem]:
    out = []
    for node, _ in walk(ast):
        if isinstance(node, pp.Call) and node.func.name == "histogram_quantile":
            arg = _strip(node.args[1])
            if isinstance(arg, pp.AggregateExpr):
                mod = arg.modifier
                by = mod is not None and "By" in str(mod.type)
                keeps_le = (by and "le" in mod.labels) or (
                    mod is not None and not by and "le" not in mod.labels
                )
                if not keeps_le:
                    out.append(
                        Problem("quantile-le", "histogram_quantile() over an aggregation that drops `le`")
                    )
    return out


def check_guarded_division(ast, ctx: LintContext) -> list[Problem]:
    out = []
    for node, _ in walk(ast):
        if isinstance(node, pp.BinaryExpr) and str(node.op) == "/" and not is_scalar(node.rhs):
            rhs = _strip(node.rhs)
            guarded = isinstance(rhs, pp.BinaryExpr) and str(rhs.op) in (">", "!=") and is_scalar(rhs.rhs)
            if not guarded:
                out.append(
                    Problem(
                        "guarded-division",
                        "division by a vector that is not filtered to > 0 (0/0 and x/0 would give NaN/Inf)",
                    )
                )
    return out


CHECKS: dict[str, Callable] = {
    "metric-known": check_metric_known,
    "explicit-matching": check_explicit_matching,
    "counter-rate": check_counter_rate,
    "rate-window": check_rate_window,
    "quantile-le": check_quantile_le,
    "guarded-division": check_guarded_division,
}


def substitute_macros(expr: str, variables: dict[str, str] | None = None) -> str:
    """Make a Grafana query parseable: macros become durations, $var becomes a plain value."""
    for macro, value in sorted(GRAFANA_MACROS.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(macro, value)
    variables = variables or {}
    expr = re.sub(r"\$\{(\w+)(?::\w+)?\}", lambda m: variables.get(m.group(1), "x"), expr)
    return re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), "x"), expr)


def lint(expr: str, ctx: LintContext, disable: set[str] = frozenset()) -> list[Problem]:
    try:
        ast = pp.parse(expr)
    except Exception as exc:  # the parser raises a plain exception type with the reason
        return [Problem("syntax", str(exc).strip().splitlines()[0])]
    problems = []
    for name, check in CHECKS.items():
        if name not in disable:
            problems.extend(check(ast, ctx))
    return problems
