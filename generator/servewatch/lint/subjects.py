"""What checks look at: a query (one PromQL expression), a rule, a dashboard.

Inputs build these from files; checks only read them. Each knows where it is, so a check can
report a problem without knowing which file format it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Iterator

import promql_parser as pp

from ..promql import variables
from .findings import LintLocation

ORIGINS = ("rule", "panel", "variable", "expr")


@dataclass
class Query:
    text: str  # as written
    location: LintLocation
    origin: str  # rule | panel | variable | expr
    ast: object | None = None
    error: str | None = None  # why it does not parse
    windows: dict[timedelta, str] = field(default_factory=dict)  # sentinel range -> Grafana variable
    disabled: frozenset[str] = frozenset()  # inline suppressions


def parse_query(
    text: str,
    location: LintLocation,
    origin: str,
    values: dict[str, str] | None = None,
    disabled: frozenset[str] = frozenset(),
) -> Query:
    """A Query from text; Grafana variables are replaced first (rules have none)."""
    query = Query(text, location, origin, disabled=disabled)
    sub = variables.substitute(text, values) if origin != "rule" else variables.Substitution([text])
    errors = []
    for candidate in sub.candidates:
        try:
            query.ast = pp.parse(candidate)
            query.windows = sub.windows
            return query
        except Exception as exc:  # promql-parser raises ValueError (or a Rust panic) with the reason
            errors.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    query.error = errors[0]
    return query


@dataclass
class Rule:
    kind: str  # alert | record
    name: str
    query: Query
    location: LintLocation
    form: str  # plain | prometheusrule | mimir | thanos | helm: one form's rules are loaded together
    group: str = ""
    for_: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    field_lines: dict[str, int] = field(default_factory=dict)  # "labels.severity" -> line
    disabled: frozenset[str] = frozenset()

    def at(self, field_name: str = "") -> LintLocation:
        line = self.field_lines.get(field_name, self.location.line)
        return LintLocation(self.location.file, line, None, self.location.where)


@dataclass
class PanelQuery:
    panel: dict
    panel_path: tuple
    target: dict
    query: Query


@dataclass
class LintDashboard:
    data: dict
    file: str
    form: str  # classic | import | api | configmap | grafanadashboard | resource
    prefix: tuple = ()  # where the dashboard sits in its file (a ConfigMap key, "dashboard")
    line_of: Callable[[tuple], int | None] = lambda path: None
    queries: list[PanelQuery] = field(default_factory=list)
    variable_queries: list[Query] = field(default_factory=list)
    inputs: frozenset[str] = frozenset()  # placeholders filled on delivery (Grafana Operator datasources)
    disabled: frozenset[str] = frozenset()

    @property
    def title(self) -> str:
        return str(self.data.get("title") or self.data.get("uid") or "dashboard")

    def at(self, path: tuple, where: str = "") -> LintLocation:
        return LintLocation(self.file, self.line_of(path), format_path(self.prefix + path), where)

    def in_panel(self, pq: PanelQuery, path: tuple = ()) -> LintLocation:
        """Where something of a query's panel is (its unit, its calcs), named after the panel."""
        return self.at(pq.panel_path + path, panel_where(pq.panel))

    def shown_queries(self, panel_types: set[str] | None = None) -> Iterator[PanelQuery]:
        """Parsed queries of targets that are not hidden, of panels of the given types."""
        for pq in self.queries:
            if pq.query.ast is None or pq.target.get("hide"):
                continue
            if panel_types is None or pq.panel.get("type") in panel_types:
                yield pq

    def panels(self) -> Iterator[tuple[dict, tuple]]:
        """Every panel with its path: top level, inside rows (collapsed or schema < 16 `rows`)."""
        for i, panel in enumerate(self.data.get("panels") or []):
            if isinstance(panel, dict):
                yield panel, ("panels", i)
                for j, inner in enumerate(panel.get("panels") or []):
                    if isinstance(inner, dict):
                        yield inner, ("panels", i, "panels", j)
        for i, row in enumerate(self.data.get("rows") or []):
            for j, panel in enumerate(row.get("panels") or [] if isinstance(row, dict) else []):
                if isinstance(panel, dict):
                    yield panel, ("rows", i, "panels", j)

    def variables(self) -> Iterator[tuple[dict, tuple]]:
        templating = self.data.get("templating") or {}
        for i, var in enumerate(templating.get("list") or [] if isinstance(templating, dict) else []):
            if isinstance(var, dict) and var.get("name"):
                yield var, ("templating", "list", i)


def format_path(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def panel_where(panel: dict) -> str:
    return f"panel {panel.get('title') or panel.get('type') or '?'!r}"
