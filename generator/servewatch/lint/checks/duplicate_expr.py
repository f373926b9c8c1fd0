"""duplicate-expr: two rules with the same expression and labels do the same work twice.

Two recording rules compute one series under two names; two alerts page twice for one problem.
"""

from __future__ import annotations

from ..findings import Severity
from . import Check
from .duplicate_rule import repeats


def _normalized(rule) -> str:
    return str(rule.query.ast) if rule.query.ast is not None else " ".join(rule.query.text.split())


def key(rule) -> tuple:
    return (rule.form, rule.kind, _normalized(rule), tuple(sorted(rule.labels.items())))


def _describe(rule, first, where: str) -> str | None:
    if rule.name == first.name:
        return None  # same name: duplicate-rule reports it
    return f"{rule.kind} {rule.name} has the same expression and labels as {first.name} ({where})"


def run(rules, ctx):
    yield from repeats(CHECK, rules, key, _describe, "keep one of them")


CHECK = Check(
    id="duplicate-expr",
    severity=Severity.WARNING,
    summary="No two rules share an expression and labels (per rule-file form).",
    scope="rules",
    run=run,
)
