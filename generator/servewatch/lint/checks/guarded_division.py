"""guarded-division: a division by a vector keeps only denominators above zero.

0/0 is NaN and x/0 is +Inf in PromQL: an unguarded ratio fires or draws a spike when the
denominator is idle. Filtering it (`(denominator > 0)`) gives no result instead.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check


def _guarded(rhs) -> bool:
    rhs = tree.strip(rhs)
    return isinstance(rhs, pp.BinaryExpr) and tree.op(rhs) in (">", "!=") and tree.is_scalar(rhs.rhs)


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        is_division = isinstance(node, pp.BinaryExpr) and tree.op(node) == "/"
        if is_division and not tree.is_scalar(node.rhs) and not _guarded(node.rhs):
            yield CHECK.problem(
                f"division by `{tree.short(node.rhs, 50)}`, which is not filtered to > 0 "
                "(0/0 and x/0 give NaN and +Inf)",
                "divide by `(denominator > 0)` so an idle denominator gives no result",
            )


CHECK = Check(
    id="guarded-division",
    severity=Severity.WARNING,
    summary="Divisions by a vector filter the denominator to > 0.",
    scope="query",
    run=run,
)
