"""alert-metadata: every alert says how bad it is and what to do.

A severity label routes it; summary and description tell the on-call engineer what happened;
runbook_url says what to do next (the monitoring-mixin convention).
"""

from __future__ import annotations

from ..findings import Severity
from . import Check

REQUIRED_LABELS = ("severity",)
REQUIRED_ANNOTATIONS = ("summary", "description", "runbook_url")


def run(rule, ctx):
    if rule.kind != "alert":
        return
    missing = [f"label {k}" for k in REQUIRED_LABELS if not rule.labels.get(k)]
    missing += [f"annotation {k}" for k in REQUIRED_ANNOTATIONS if not rule.annotations.get(k)]
    if missing:
        yield CHECK.problem(
            f"alert {rule.name} has no {', no '.join(missing)}",
            "add them: severity routes it, summary and description explain it, runbook_url says what to do",
        )


CHECK = Check(
    id="alert-metadata",
    severity=Severity.WARNING,
    summary="Alerts carry a severity label and summary, description and runbook_url annotations.",
    scope="rule",
    run=run,
)
