"""variable-undefined: every $var a dashboard uses is defined.

An undefined variable is sent to Prometheus as written: `${DS_PROMETHEUS}` left in a provisioned
copy of an "export for sharing" dashboard (no __inputs resolution: "Datasource ${DS_PROMETHEUS}
was not found"), or a query filtering on a variable someone deleted.
"""

from __future__ import annotations

import difflib

from ...promql import variables
from ..findings import Severity
from ..references import references
from . import Check


def run(dashboard, ctx):
    defined = {var["name"] for var, _ in dashboard.variables()} | dashboard_inputs(dashboard)
    reported = set()
    for name, path in references(dashboard.data):
        if name in defined or variables.is_builtin(name) or path[-1] in ("repeat", "repeatRow"):
            continue
        if (name, path) in reported:
            continue
        reported.add((name, path))
        close = difflib.get_close_matches(name, sorted(defined), n=1)
        yield CHECK.problem(
            f"${name} is used but no variable defines it",
            f"did you mean ${close[0]}?" if close else f"add a variable named {name}, or remove ${name}",
            at=dashboard.at(path),
        )


def dashboard_inputs(dashboard) -> set[str]:
    """Placeholders that an import (`__inputs`) or the Grafana Operator (`datasources`) fills."""
    names = {i.get("name") for i in dashboard.data.get("__inputs") or [] if isinstance(i, dict)}
    return (names | set(dashboard.inputs)) - {None}


CHECK = Check(
    id="variable-undefined",
    severity=Severity.ERROR,
    summary="Every $variable a dashboard uses is defined (or an import input).",
    scope="dashboard",
    run=run,
)
