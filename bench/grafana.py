"""What Grafana sends to Prometheus for a dashboard: its panels, their queries, and the queries with
the template variables and macros filled in the way Grafana's Prometheus data source fills them.

Pure functions over the dashboard JSON; ``bench/dashboard_cost.py`` asks Prometheus for the
variables' options and runs the queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALL = "$__all"
_VAR = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)\]\]")
_QUERY_RESULT = re.compile(r"^\s*query_result\((?P<expr>.+)\)\s*$", re.S)
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<selector>.+?)\s*,\s*)?(?P<label>\w+)\s*\)\s*$", re.S)
_REGEX_META = re.compile(r"[$^*{}\[\]'+?.()|]")


@dataclass(frozen=True)
class Target:
    expr: str
    instant: bool  # a table or bar gauge "now" value: one instant query, not a range


@dataclass(frozen=True)
class Panel:
    title: str
    row: str  # the row it sits under ("" above the first row)
    collapsed: bool  # inside a collapsed row: not drawn until the row is opened
    targets: tuple[Target, ...]


def panels(dashboard: dict) -> list[Panel]:
    """Every panel with queries, in layout order. A collapsed row keeps its panels inside itself; an
    open row's panels follow it at the top level."""
    out: list[Panel] = []
    row = ""
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            row = p.get("title", "")
            for inner in p.get("panels", []) if p.get("collapsed") else []:
                out += _panel(inner, row, collapsed=True)
            continue
        out += _panel(p, row, collapsed=False)
    return out


def _panel(p: dict, row: str, collapsed: bool) -> list[Panel]:
    targets = tuple(
        Target(t["expr"], bool(t.get("instant")) and not t.get("range"))
        for t in p.get("targets", [])
        if t.get("expr") and not t.get("hide")
    )
    return [Panel(p.get("title", ""), row, collapsed, targets)] if targets else []


def default_view(dashboard: dict) -> list[Panel]:
    """The panels a dashboard loads with: collapsed rows stay closed."""
    return [p for p in panels(dashboard) if not p.collapsed]


# ------------------------------------------------------------------------ variables and macros


def rate_interval(interval_s: float, scrape_s: float) -> float:
    """Grafana's ``$__rate_interval``: ``max($__interval + scrape interval, 4 x scrape interval)``."""
    return max(interval_s + scrape_s, 4 * scrape_s)


def duration(seconds: float) -> str:
    """A PromQL duration (``120`` -> ``2m``, ``90`` -> ``90s``)."""
    s = int(seconds)
    if s != seconds or s <= 0:
        raise ValueError(f"not a whole positive number of seconds: {seconds}")
    for unit, size in (("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def regex_escape(value: str) -> str:
    """One value of a multi-value or All variable: regex metacharacters get a backslash, and every
    backslash is doubled once more because the result lands inside a PromQL string."""
    return _REGEX_META.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def plain_escape(value: str) -> str:
    """A single-value variable (no multi, no All): only backslashes and single quotes are escaped."""
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


def format_selection(variable: dict, values: list[str], is_all: bool) -> str:
    """The text that replaces ``$name`` for the selected ``values``.

    All with an ``allValue`` is that value, unescaped; otherwise a multi-value or All variable
    becomes one escaped value or an alternation ``(a|b|c)`` of all of them.
    """
    if is_all and variable.get("allValue"):
        return variable["allValue"]
    if not values:
        raise ValueError(f"variable {variable.get('name')!r} has no value to select")
    if not (variable.get("multi") or variable.get("includeAll")):
        return plain_escape(values[0])
    escaped = [regex_escape(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def interpolate(expr: str, values: dict[str, str]) -> str:
    """``expr`` with every ``$name``, ``${name}``, ``${name:fmt}`` and ``[[name]]`` of ``values``
    replaced. Others stay as Grafana leaves them (``$1`` of label_replace); an unknown variable name
    left behind is an error, since Prometheus would reject or misread it."""

    def sub(m: re.Match) -> str:
        name, fmt = m.group(1) or m.group(3) or m.group(4), m.group(2)
        # ${name:raw} (a repeated panel's one value, as it is) has its own text where one is given
        return values.get(f"{name}:{fmt}", values.get(name, m.group(0)))

    out = _VAR.sub(sub, expr)
    left = sorted({n for n in re.findall(r"\$\{?([A-Za-z_]\w*)", out)})
    if left:
        raise ValueError(f"no value for Grafana variable(s) {', '.join(left)} in: {expr}")
    return out


def label_values_query(variable: dict) -> tuple[str | None, str]:
    """``(selector, label)`` of a ``label_values(selector, label)`` or ``label_values(label)`` query."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query", "")
    m = _LABEL_VALUES.match(query or "")
    if not m:
        raise ValueError(f"variable {variable.get('name')!r}: not a label_values() query: {query!r}")
    return m.group("selector"), m.group("label")


def query_result_query(variable: dict) -> str | None:
    """The expression of a ``query_result(expr)`` variable (None for any other query)."""
    query = variable.get("query")
    m = _QUERY_RESULT.match(query if isinstance(query, str) else "")
    return m.group("expr") if m else None


def query_result_options(variable: dict, series: list[dict]) -> list[str]:
    """What Grafana lists for query_result: each series as ``{labels} value``, through the variable's
    regex (its first group), once each."""
    regex = re.compile((variable.get("regex") or "/(.*)/").strip("/"))
    out: dict[str, None] = {}
    for s in series:
        text = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(s["metric"].items())) + "}"
        for m in regex.finditer(text):
            out.setdefault(m.group(1) if m.groups() else m.group(0), None)
    return list(out)


def sort_options(variable: dict, options: list[str]) -> list[str]:
    """Options in the variable's ``sort`` order (1/2 alphabetical, 3/4 numerical; odd = ascending)."""
    mode = variable.get("sort") or 0
    if mode in (1, 2):
        return sorted(options, reverse=mode == 2)
    if mode in (3, 4):
        return sorted(options, key=_number, reverse=mode == 4)
    return list(options)


def _number(s: str) -> float:
    m = re.search(r"-?\d+(\.\d+)?", s)
    return float(m.group(0)) if m else float("inf")


def choose(
    variable: dict, options: list[str], pick: dict[str, str], prefer: dict[str, str] | None = None
) -> tuple[list[str], bool]:
    """The values a dashboard view selects, and whether that is All.

    ``pick[name]`` wins when it is one of the options; then the saved ``current`` (All, or a saved
    value still offered); then ``prefer[name]`` if offered, else the first option, which is what
    Grafana selects when nothing is saved (so a single-select namespace can follow a picked model).
    """
    name = variable.get("name", "")
    if name in pick and pick[name] in options:
        return [pick[name]], False
    current = variable.get("current") or {}
    saved = current.get("value")
    saved = saved if isinstance(saved, list) else [saved] if saved else []
    if ALL in saved and variable.get("includeAll"):
        return list(options), True
    kept = [v for v in saved if v in options]
    if kept:
        return kept, False
    if not options:
        raise ValueError(f"variable {name!r} offers no value: the data has no series for its query")
    preferred = (prefer or {}).get(name)
    return [preferred if preferred in options else options[0]], False


__all__ = [
    "ALL",
    "Panel",
    "Target",
    "panels",
    "default_view",
    "rate_interval",
    "duration",
    "regex_escape",
    "plain_escape",
    "format_selection",
    "interpolate",
    "label_values_query",
    "query_result_options",
    "query_result_query",
    "sort_options",
    "choose",
]
