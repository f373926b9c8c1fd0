"""syntax: the expression must parse (Grafana variables are replaced first)."""

from __future__ import annotations

from ..findings import Severity
from . import Check


def run(query, ctx):
    if query.error:
        yield CHECK.problem(
            f"does not parse: {query.error}",
            "fix the expression; `promtool check rules` or Grafana's query editor show the same error",
        )


CHECK = Check(
    id="syntax",
    severity=Severity.ERROR,
    summary="The expression parses (after Grafana variables are replaced).",
    scope="query",
    run=run,
)
