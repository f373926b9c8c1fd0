"""Triage reports: text for a terminal, Markdown for a ticket or chat, JSON for machines."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from typing import TYPE_CHECKING

from ..model import Model
from ..runbooks import fmt

if TYPE_CHECKING:  # imported when an investigation runs, not to name --format's choices
    from .runner import Investigation, StepResult

MARK = {
    "unhealthy": "UNHEALTHY",
    "suspicious": "SUSPICIOUS",
    "healthy": "healthy",
    "no-data": "no data",
    "info": "info",
    "error": "ERROR",
}


def when(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _labels(d: dict) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in d.items())


def _filters(inv: Investigation) -> str:
    return ", ".join(f'{k}{op}"{v}"' for k, op, v in inv.filters)


def _value(r: StepResult, v: float) -> str:
    return fmt.value(v, r.step.step.unit)


def _summary(inv: Investigation) -> str:
    if inv.verdict == "no-data":
        return "no data: no step returned anything to judge (check the URL, --label filters and --at)"
    if inv.verdict == "error":
        return "error: some queries failed"
    sym = inv.symptom
    parts = []
    holds = sym is not None and sym.verdict == "unhealthy"
    if holds:
        parts.append(f"the alert's condition holds ({sym.detail})")
    elif sym is not None and sym.verdict in ("healthy", "suspicious"):
        parts.append(f"the alert's condition does not hold now ({sym.detail})")
    if inv.verdict == "healthy":
        return "healthy: every judged step is within its thresholds" + (f"; {parts[0]}" if parts else "")
    top = [r for r in inv.findings if r.verdict == "unhealthy"] or inv.findings
    if top:
        parts.append("most likely: " + top[0].cause)
    elif not inv.scoped:
        parts.append("no evidence of a cause: no series holds the alert's condition to investigate")
    else:
        parts.append("no evidence of a cause in the runbook's steps")
    return f"{inv.verdict}: " + "; ".join(parts)


def subject(inv: Investigation) -> tuple[str, str, str] | None:
    """(heading, labels, note) of what the steps are narrowed to, or None when they are not."""
    if not inv.alert_labels:
        return None
    if inv.source == "worst subject":
        more = f"; {inv.others} more series hold it too (pick one with --label)" if inv.others else ""
        return (
            "subject",
            _labels(inv.alert_labels),
            f" (the worst series holding the alert's condition{more})",
        )
    return "firing", _labels(inv.alert_labels), ""


# -- text -------------------------------------------------------------------------------------------


def text(model: Model, invs: list[Investigation], url: str, top: int, notes: list[str]) -> str:
    out = []
    for note in notes:
        out.append(note)
    if notes:
        out.append("")
    for inv in invs:
        head = f"== {inv.alert.alert}: {MARK.get(inv.verdict, inv.verdict)}"
        out.append(head)
        out.append(f"   {_summary(inv)}")
        if (subj := subject(inv)) is not None:
            out.append(f"   {subj[0]}: {subj[1]}{subj[2]}")
        if inv.filters:
            out.append(f"   filters: {_filters(inv)}")
        out.append(f"   Prometheus {url} at {when(inv.at)}")
        if inv.runbook_url:
            out.append(f"   runbook: {inv.runbook_url}")
        if inv.findings:
            out.append("")
            out.append("   Likely causes:")
            for r in inv.findings:
                out.append(f"   - [{MARK[r.verdict]}] {r.cause}")
                out.append(f"       ({r.step.id}: {r.detail})")
        out.append("")
        out.append("   Steps:")
        for r in inv.results:
            out.append(f"   {r.step.number:>2}. [{MARK.get(r.verdict, r.verdict):<10}] {r.step.step.title}")
            out.append(f"       {r.detail}")
            if r.skipped_filters:
                out.append(f"       (filters not applicable here: {', '.join(r.skipped_filters)})")
            for row in r.rows[:top] if r.verdict != "error" else []:
                out.append(f"         {_value(r, row.value):>14}  {row.label_text()}")
            if len(r.rows) > top:
                out.append(f"         ... {len(r.rows) - top} more series")
        dash = inv.dashboards(model)
        if dash:
            out.append("")
            out.append("   Dashboards:")
            for title, link in dash:
                out.append(f"   - {title}: {link}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- markdown ---------------------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(model: Model, invs: list[Investigation], url: str, top: int, notes: list[str]) -> str:
    out = ["# Triage report", ""]
    if invs:
        out += [f"Prometheus `{url}` at {when(invs[0].at)}.", ""]
    out += [f"> {n}" for n in notes] + ([""] if notes else [])
    for inv in invs:
        out += [f"## {inv.alert.alert}: {MARK.get(inv.verdict, inv.verdict)}", "", _summary(inv), ""]
        facts = []
        if (subj := subject(inv)) is not None:
            facts.append(f"- {subj[0].capitalize()}: `{subj[1]}`{subj[2]}")
        if inv.filters:
            facts.append(f"- Filters: `{_filters(inv)}`")
        if inv.runbook_url:
            facts.append(f"- Runbook: [{inv.alert.alert}]({inv.runbook_url})")
        for title, link in inv.dashboards(model):
            facts.append(f"- Dashboard: [{title}]({link})")
        out += facts + ([""] if facts else [])
        if inv.findings:
            out += ["### Likely causes", ""]
            for r in inv.findings:
                out.append(f"- **{r.verdict}**: {_md(r.cause)} (`{r.step.id}`: {_md(r.detail)})")
            out.append("")
        out += ["### Steps", "", "| # | Step | Verdict | Finding |", "|---|---|---|---|"]
        for r in inv.results:
            out.append(f"| {r.step.number} | {_md(r.step.step.title)} | {r.verdict} | {_md(r.detail)} |")
        out.append("")
        for r in inv.results:
            if not r.rows and r.verdict != "error":
                continue
            out += [
                f"<details><summary>{r.step.number}. {_md(r.step.step.title)}</summary>",
                "",
                "```promql",
                r.expr,
                "```",
                "",
            ]
            if r.rows:
                out += ["| Value | Labels |", "|---|---|"]
                out += [f"| {_value(r, row.value)} | `{_md(row.label_text())}` |" for row in r.rows[:top]]
                if len(r.rows) > top:
                    out.append(f"| ... | {len(r.rows) - top} more series |")
            out += ["", "</details>", ""]
    return "\n".join(out).rstrip() + "\n"


# -- json -------------------------------------------------------------------------------------------


def as_json(model: Model, invs: list[Investigation], url: str, top: int, notes: list[str]) -> str:
    doc = {
        "prometheus": url,
        "notes": notes,
        "investigations": [_inv(model, inv, top) for inv in invs],
    }
    return json.dumps(doc, indent=2, sort_keys=False, default=_finite) + "\n"


def _finite(v):
    return str(v)


def _num(v: float):
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return v


def _inv(model: Model, inv: Investigation, top: int) -> dict:
    return {
        "alert": inv.alert.alert,
        "verdict": inv.verdict,
        "summary": _summary(inv),
        "at": when(inv.at),
        "alert_labels": inv.alert_labels,
        "scope_from": inv.source,
        "others_holding": inv.others,
        "filters": [{"label": k, "op": op, "value": v} for k, op, v in inv.filters],
        "runbook_url": inv.runbook_url,
        "causes": [
            {"step": r.step.id, "verdict": r.verdict, "cause": r.cause, "detail": r.detail}
            for r in inv.findings
        ],
        "dashboards": [{"title": t, "url": u} for t, u in inv.dashboards(model)],
        "steps": [
            {
                "id": r.step.id,
                "number": r.step.number,
                "title": r.step.step.title,
                "verdict": r.verdict,
                "detail": r.detail,
                "cause": r.cause if r.verdict in ("unhealthy", "suspicious") else "",
                "unit": r.step.step.unit,
                "thresholds": {
                    "op": r.step.limits.op,
                    "suspicious": r.step.limits.suspicious,
                    "unhealthy": r.step.limits.unhealthy,
                    "suspicious_from": r.step.limits.source("suspicious")
                    if r.step.limits.suspicious is not None
                    else "",
                    "unhealthy_from": r.step.limits.source("unhealthy")
                    if r.step.limits.unhealthy is not None
                    else "",
                },
                "query": r.expr,
                "series_count": len(r.rows),
                "series": [{"labels": row.labels, "value": _num(row.value)} for row in r.rows[:top]],
                "error": r.error,
                "filters_not_applied": list(r.skipped_filters),
                "seconds": round(r.seconds, 4),
            }
            for r in inv.results
        ],
    }


FORMATS = {"text": text, "markdown": markdown, "json": as_json}
