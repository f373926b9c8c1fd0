"""What an alert compares: the signal and threshold a plot shows, read from the expression's tree.

The alert's expression is followed down the left side of ``and``/``unless`` (the guards that come
after the condition) to the first comparison with a number: ``signal > 0.95`` gives the signal, the
operator and the threshold. Expressions that compare nothing (absence alerts) have no signal: their
plot shows only the firing windows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import promql_parser as pp

from ..promql import tree


@dataclass(frozen=True)
class BacktestSignal:
    expr: str
    op: str  # >, >=, <, <=
    threshold: float

    @property
    def lower_is_worse(self) -> bool:
        return self.op in ("<", "<=")


_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def of(expr: str) -> BacktestSignal | None:
    node = tree.strip(pp.parse(expr))
    while isinstance(node, pp.BinaryExpr):
        op = tree.op(node)
        if op in ("and", "unless"):
            node = tree.strip(node.lhs)
            continue
        if op in _FLIP:
            lhs, rhs = tree.strip(node.lhs), tree.strip(node.rhs)
            if isinstance(rhs, pp.NumberLiteral) and not tree.is_scalar(lhs):
                return _checked(str(node.lhs), op, rhs.val)
            if isinstance(lhs, pp.NumberLiteral) and not tree.is_scalar(rhs):
                return _checked(str(node.rhs), _FLIP[op], lhs.val)
        return None
    return None


def _checked(text: str, op: str, threshold: float) -> BacktestSignal | None:
    text = re.sub(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{\}", r"\1", text)  # the parser writes `name{}`
    try:  # the parser's rendering of a subtree is PromQL; make sure it reads back
        pp.parse(text)
    except Exception:  # noqa: BLE001  (a signal we cannot render is only a plot we do not draw)
        return None
    return BacktestSignal(text, op, float(threshold))
