"""Linting one PromQL expression: the entry point for code and tests that hold a string.

`lint(expr, ctx)` runs every query check that reads free-standing expressions (checks/); files,
dashboards and the command line go through runner.py. The AST helpers (promql/tree.py) and Grafana
macro substitution (promql/variables.py) are re-exported here for callers that hold this module.
"""

from __future__ import annotations

from .checks import ALL, Check
from .facts import LintContext
from .findings import LintLocation, Problem
from .runner import query_problems
from .subjects import parse_query
from ..promql.tree import children, is_scalar, walk
from ..promql.variables import substitute_macros

# The checks that read a single expression (rule-, dashboard- and rule-set checks need files).
CHECKS: dict[str, Check] = {k: c for k, c in ALL.items() if c.scope == "query" and "expr" in c.origins}


def lint(expr: str, ctx: LintContext, disable: set[str] | frozenset[str] = frozenset()) -> list[Problem]:
    query = parse_query(expr, LintLocation("--expr"), "expr")
    return query_problems(query, ctx, {k: c for k, c in CHECKS.items() if k not in disable})


__all__ = ["CHECKS", "LintContext", "Problem", "children", "is_scalar", "lint", "substitute_macros", "walk"]
