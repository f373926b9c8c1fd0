"""variable-unused: every variable a dashboard defines is used.

A variable no query reads is a filter that filters nothing: vLLM's performance_statistics.json
offers a Deployment_id picker while every panel still mixes all models.
"""

from __future__ import annotations

from ..findings import Severity
from ..references import references
from . import Check

SELF_APPLYING = {"adhoc", "groupby"}  # Grafana applies these to every query by itself


def run(dashboard, ctx):
    used: set[str] = set()
    for name, path in references(dashboard.data):
        owner = path[:3] if path[:2] == ("templating", "list") else None
        own_name = dashboard_var_name(dashboard.data, owner)
        if name != own_name:
            used.add(name)
    for var, path in dashboard.variables():
        if var["name"] not in used and var.get("type") not in SELF_APPLYING:
            yield CHECK.problem(
                f"variable {var['name']} is defined but no query, title or other variable uses it",
                f'filter the queries with it (label=~"${var["name"]}") or remove it',
                at=dashboard.at(path + ("name",), f"variable {var['name']}"),
            )


def dashboard_var_name(data: dict, path: tuple | None) -> str | None:
    if path is None:
        return None
    try:
        return data["templating"]["list"][path[2]].get("name")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


CHECK = Check(
    id="variable-unused",
    severity=Severity.WARNING,
    summary="Every variable a dashboard defines is used by a query, a title or another variable.",
    scope="dashboard",
    run=run,
)
