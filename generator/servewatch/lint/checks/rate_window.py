"""rate-window: a range in a rule covers at least 4 scrapes, or rate() sees too few samples."""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check


def run(query, ctx):
    if ctx.min_range_s is None:
        return
    for node, _ in tree.walk(query.ast):
        if isinstance(node, pp.MatrixSelector) and node.range.total_seconds() < ctx.min_range_s:
            yield CHECK.problem(
                f"range [{pp.display_duration(node.range)}] is shorter than 4 x the scrape interval "
                f"({int(ctx.min_range_s)}s)",
                f"use a range of at least {int(ctx.min_range_s)}s",
            )


CHECK = Check(
    id="rate-window",
    severity=Severity.WARNING,
    summary="Ranges in rules cover at least 4 scrape intervals (needs the scrape interval).",
    scope="query",
    run=run,
    origins=("rule", "expr"),
)
