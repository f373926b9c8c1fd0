"""duplicate-rule: one rule name with the same labels is defined once.

Two recording rules writing the same series make Prometheus drop samples ("duplicate sample for
timestamp"); two alerts with one name and the same labels fire twice or hide each other. Rules are
compared within one form (plain files, PrometheusRule objects, Mimir namespaces), the set one
Prometheus or ruler loads together.
"""

from __future__ import annotations

from ..findings import Severity
from . import Check


def identity(rule) -> tuple:
    return (rule.form, rule.kind, rule.name, tuple(sorted(rule.labels.items())))


def repeats(check, rules, key, describe, fix: str):
    """A problem at every rule whose key an earlier rule has; describe(rule, first, where_first)."""
    seen = {}
    for rule in rules:
        first = seen.setdefault(key(rule), rule)
        if first is not rule and (
            message := describe(rule, first, f"{first.location.file}:{first.location.line}")
        ):
            yield check.problem(message, fix, at=rule.location)


def run(rules, ctx):
    yield from repeats(
        CHECK,
        rules,
        identity,
        lambda rule, first, where: (
            f"{rule.kind} {rule.name} is defined again with the same labels (first at {where})"
        ),
        "remove one, or tell them apart with a label",
    )


CHECK = Check(
    id="duplicate-rule",
    severity=Severity.ERROR,
    summary="A rule name with the same labels is defined once (per rule-file form).",
    scope="rules",
    run=run,
)
