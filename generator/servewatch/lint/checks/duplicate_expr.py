"""duplicate-expr: two rules with the same expression and labels do the same work twice.

Two recording rules compute one series under two names; two alerts page twice for one problem.
"""

from __future__ import annotations

from ..findings import Severity
from . import Check
from .duplicate_rule import first_seen, where


def _normalized(rule) -> str:
    return str(rule.query.ast) if rule.query.ast is not None else " ".join(rule.query.text.split())


def key(rule) -> tuple:
    return (rule.form, rule.kind, _normalized(rule), tuple(sorted(rule.labels.items())))


def run(rules, ctx):
    for rule, first in first_seen(rules, key):
        if rule.name != first.name:  # same name: duplicate-rule reports it
            yield CHECK.problem(
                f"{rule.kind} {rule.name} has the same expression and labels as {first.name} "
                f"({where(first)})",
                "keep one of them",
                at=rule.location,
            )


CHECK = Check(
    id="duplicate-expr",
    severity=Severity.WARNING,
    summary="No two rules share an expression and labels (per rule-file form).",
    scope="rules",
    run=run,
)
