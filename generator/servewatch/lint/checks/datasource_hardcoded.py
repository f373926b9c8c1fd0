"""datasource-hardcoded: panels and variables name their data source through a variable.

A data source uid (or name) is local to the Grafana the dashboard was exported from: anywhere else
the panels say "data source not found". `{"type": "prometheus", "uid": "${datasource}"}` with a
datasource-type variable works in every delivery form.
"""

from __future__ import annotations

from typing import Iterator

from ..findings import Severity
from ..subjects import panel_where
from . import Check

BUILTIN = {"-- Grafana --", "-- Mixed --", "-- Dashboard --", "grafana", "__expr__"}
BUILTIN_TYPES = {"grafana", "datasource", "__expr__"}


def hardcoded(ref) -> str | None:
    """What is hard-coded in a datasource reference, or None when it is a variable or default."""
    if ref is None:
        return None
    if isinstance(ref, str):
        return None if ref.startswith("$") or ref in BUILTIN else f"name {ref!r}"
    if not isinstance(ref, dict):
        return None
    uid = ref.get("uid")
    if uid is None or ref.get("type") in BUILTIN_TYPES or uid in BUILTIN:
        return None
    return None if str(uid).startswith("$") else f"uid {uid!r}"


def _refs(dashboard) -> Iterator[tuple[object, tuple, str]]:
    for panel, path in dashboard.panels():
        where = panel_where(panel)
        yield panel.get("datasource"), path + ("datasource",), where
        for i, target in enumerate(panel.get("targets") or []):
            if isinstance(target, dict):
                yield target.get("datasource"), path + ("targets", i, "datasource"), where
    for var, path in dashboard.variables():
        if var.get("type") == "query":
            yield var.get("datasource"), path + ("datasource",), f"variable {var['name']}"
    annotations = dashboard.data.get("annotations") or {}
    for i, ann in enumerate(annotations.get("list") or [] if isinstance(annotations, dict) else []):
        if isinstance(ann, dict) and not ann.get("builtIn"):
            yield ann.get("datasource"), ("annotations", "list", i, "datasource"), "annotation"


FIX = 'add a datasource variable and use {"type": "prometheus", "uid": "${datasource}"}'


def run(dashboard, ctx):
    found = [(hardcoded(ref), path, where) for ref, path, where in _refs(dashboard)]
    for what, path, where in (f for f in found if f[0]):
        message = f"{where} uses the data source by {what}, which exists only in the Grafana it came from"
        yield CHECK.problem(message, FIX, at=dashboard.at(path, where))


CHECK = Check(
    id="datasource-hardcoded",
    severity=Severity.WARNING,
    summary="Panels and variables use the data source through a variable, not a hard-coded uid or name.",
    scope="dashboard",
    run=run,
)
