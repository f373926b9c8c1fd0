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


def first_seen(rules, key):
    """(rule, earlier rule with the same key) for every repeat."""
    seen = {}
    for rule in rules:
        k = key(rule)
        if k in seen:
            yield rule, seen[k]
        else:
            seen[k] = rule


def where(rule) -> str:
    return f"{rule.location.file}:{rule.location.line}"


def run(rules, ctx):
    for rule, first in first_seen(rules, identity):
        yield CHECK.problem(
            f"{rule.kind} {rule.name} is defined again with the same labels (first at {where(first)})",
            "remove one, or tell them apart with a label",
            at=rule.location,
        )


CHECK = Check(
    id="duplicate-rule",
    severity=Severity.ERROR,
    summary="A rule name with the same labels is defined once (per rule-file form).",
    scope="rules",
    run=run,
)
