"""template-labels: annotation and label templates read only labels the expression can return.

`sum by (namespace) (...) > 1` with "pod {{ $labels.pod }}" renders "pod " forever: the label
was aggregated away. The expression's labels come from the label flow (lint/flow.py). The rule's
own static labels do not count: Prometheus expands both annotations and labels with the labels of
the query's result only, so `{{ $labels.severity }}` is empty even when the rule sets severity.
"""

from __future__ import annotations

import re

from ..findings import Severity
from ..flow import flow
from . import Check

LABEL_REFS = re.compile(r"\$labels\.([A-Za-z_]\w*)|\.Labels\.([A-Za-z_]\w*)|index \$labels \"([^\"]+)\"")


def run(rule, ctx):
    if rule.kind != "alert" or rule.query.ast is None:
        return
    returned = flow(rule.query.ast, ctx)
    possible = returned
    fields = [(f"annotations.{k}", v) for k, v in rule.annotations.items()]
    fields += [(f"labels.{k}", v) for k, v in rule.labels.items()]
    for field_name, text in fields:
        reported = set()
        for m in LABEL_REFS.finditer(str(text)):
            label = m.group(1) or m.group(2) or m.group(3)
            hint = possible.missing(label, ctx.label_universe)
            if hint is None or label in reported:
                continue
            reported.add(label)
            shown = ", ".join(sorted(returned.labels)) or "no labels"
            yield CHECK.problem(
                f"{field_name} of alert {rule.name} reads $labels.{label}, which the expression never "
                f"returns (it returns {shown})",
                hint or f"keep {label} in the expression's by (...) / on (...), or drop it from the text",
                at=rule.at(field_name),
            )


CHECK = Check(
    id="template-labels",
    severity=Severity.ERROR,
    summary="Annotation and label templates read only labels the alert's expression can return.",
    scope="rule",
    run=run,
)
