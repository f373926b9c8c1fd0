"""Links that land on a dashboard, checked against the dashboards as built: an alert's dashboard_url,
a runbook's `dashboards:` entry, and every link a dashboard or a panel carries to another dashboard.
A link must name a generated dashboard and only variables it has; a link that fills a variable from
a field label (`${__field.labels.X}`, a time series) or a table column (`${__data.fields.X}`: an instant
query's labels are its columns) must read a label the panel's series carry (or the variable is empty:
no data).
"""

from __future__ import annotations

import re

from ..errors import ServewatchError, SpecError
from ..model import Model
from ..promql import labels as promql_labels

BOARD_URL_RE = re.compile(r"^/d/([^/?]+)(?:/[^?]*)?(?:\?(.*))?$")
VAR_PARAM_RE = re.compile(r"(?:^|&)var-([^=&]+)=([^&]*)")
FIELD_LABEL_RE = re.compile(r"\$\{__(field\.labels|data\.fields)\.([^}]+)\}")
LEGEND_RE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _variables(boards: dict[str, dict]) -> dict[str, set[str]]:
    """uid -> the names of the dashboard's template variables."""
    return {b["uid"]: {v["name"] for v in b["templating"]["list"]} for b in boards.values()}


def alert_link_problems(model: Model, boards: dict[str, dict]) -> tuple[list[SpecError], int]:
    """(problems, links checked): every alert's dashboard_url lands on a generated dashboard and on
    variables it has."""
    variables = _variables(boards)
    errors, checked = [], 0
    for alert in model.alerts():
        link = alert.spec.dashboard
        if link is None:
            continue
        checked += 1
        where = model.spec.locate("alert", alert.alert, "dashboard")
        if link.uid not in variables:
            errors.append(
                SpecError(
                    f"dashboard uid {link.uid!r} is not generated; known: {', '.join(sorted(variables))}",
                    where,
                )
            )
            continue
        names = variables[link.uid]
        for var in link.vars:
            if var not in names:
                errors.append(
                    SpecError(
                        f"dashboard {link.uid!r} has no variable {var!r}; it has {', '.join(sorted(names))}",
                        where,
                    )
                )
    return errors, checked


def runbook_link_problems(model: Model, boards: dict[str, dict]) -> tuple[list[SpecError], int]:
    """(problems, links checked): every runbook's `dashboards:` link names a generated dashboard (`uid`)
    and only variables that dashboard has (`vars`); a typo would otherwise render a link to nothing,
    or a variable Grafana ignores."""
    variables = _variables(boards)
    errors: dict[str, SpecError] = {}  # keyed by text: a YAML alias shared by pages is reported once
    checked = 0

    def err(msg, name, *sub):
        e = SpecError(msg, model.spec.locate("runbook", name, *sub))
        errors.setdefault(str(e), e)

    for name, rb in model.spec.runbooks.items():
        for i, link in enumerate(rb.dashboards):
            checked += 1
            if link.uid not in variables:
                close = [
                    u for u in variables if u.replace("-", "").startswith(link.uid.replace("-", "")[:12])
                ]
                hint = f"; did you mean {close[0]!r}?" if len(close) == 1 else ""
                err(
                    f"dashboard uid {link.uid!r} is not a generated dashboard{hint} "
                    f"(generated: {', '.join(sorted(variables))})",
                    name,
                    "dashboards",
                    i,
                    "uid",
                )
                continue
            names = variables[link.uid]
            for var in link.vars:
                if var not in names:
                    err(
                        f"dashboard {link.uid!r} has no variable {var!r}; it has {', '.join(sorted(names))}",
                        name,
                        "dashboards",
                        i,
                        "vars",
                        var,
                    )
    return list(errors.values()), checked


def _panels(board: dict):
    for p in board.get("panels", []):
        yield p
        yield from p.get("panels", [])  # a collapsed row's children


def _urls(node):
    """Every non-empty `url` value in a panel's JSON (panel links, data links, overrides)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "url" and isinstance(v, str) and v:
                yield v
            else:
                yield from _urls(v)
    elif isinstance(node, list):
        for v in node:
            yield from _urls(v)


def panel_labels(panel: dict, records: dict[str, promql_labels.Labels]) -> set[str]:
    """Labels a panel's series are sure to carry: what its queries return; for a query over raw series
    (whose other labels cannot be known statically), also the labels its legend names."""
    out: set[str] = set()
    for t in panel.get("targets", []):
        got = promql_labels.returned(t["expr"], records)
        out |= got.known
        if got.open:
            out |= set(LEGEND_RE.findall(t.get("legendFormat") or ""))
    return out


def board_link_problems(
    boards: dict[str, dict], records: dict[str, promql_labels.Labels]
) -> tuple[list[str], int]:
    """(problems, links checked): links between dashboards that would land on a variable the target
    does not have, or fill a variable from a field label the panel's series do not carry."""
    variables = _variables(boards)
    problems = []
    checked = 0

    def check(where: str, url: str, fields: set[str] | None) -> None:
        nonlocal checked
        m = BOARD_URL_RE.match(url)
        if not m:
            return  # not a link to a dashboard
        checked += 1
        uid, query = m.group(1), m.group(2) or ""
        if uid not in variables:
            problems.append(
                f"{where}: links to dashboard {uid!r}, which is not generated; known: "
                f"{', '.join(sorted(variables))}"
            )
            return
        for name, value in VAR_PARAM_RE.findall(query):
            if name not in variables[uid]:
                problems.append(
                    f"{where}: {uid} has no variable {name!r}; it has {', '.join(sorted(variables[uid]))}"
                )
            for kind, label in FIELD_LABEL_RE.findall(value):
                if fields is None:
                    problems.append(f"{where}: var-{name} reads ${{__{kind}.{label}}} outside a panel")
                elif label not in fields:
                    problems.append(
                        f"{where}: var-{name} reads label {label!r}, which the panel's series do not "
                        f"carry; they carry {', '.join(sorted(fields))}"
                    )

    for name, board in boards.items():
        for link in board.get("links", []):
            if link.get("url"):
                check(f"dashboard {name} link {link.get('title')!r}", link["url"], None)
        for p in _panels(board):
            urls = list(_urls({k: v for k, v in p.items() if k != "panels"}))
            if urls:
                fields = panel_labels(p, records)
                for url in urls:
                    check(f"dashboard {name} panel {p.get('title')!r}", url, fields)
    return problems, checked


def check_board_links(model: Model, boards: dict[str, dict]) -> int:
    """The number of links between dashboards; raises when one is broken (see board_link_problems).
    These links are built by servewatch itself from config, so a broken one is not a spec mistake
    with a line to point at."""
    problems, checked = board_link_problems(boards, promql_labels.record_labels(model.records()))
    if problems:
        raise ServewatchError("broken links between dashboards:\n  " + "\n  ".join(problems))
    return checked
