"""The back-test as text (a table per spec set, then the episodes) and as JSON (everything)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .timespec import human, iso

if TYPE_CHECKING:  # imported when a back-test runs, not to name --format's choices
    from .incidents import Verdict
    from .runner import AlertResult, BacktestResult

WEEK = 7 * 86400
SHOWN_EPISODES = 20  # per alert in the text report; JSON has all
SHOWN_RECORDS = 6


@dataclass
class BacktestRun:
    result: BacktestResult
    verdicts: list[Verdict] = field(default_factory=list)


def pages_per_week(result: BacktestResult) -> dict[str, float]:
    """Firing episodes per week, by the alerts' severity and tier."""
    weeks = (result.end - result.start) / WEEK
    counts: dict[str, int] = {}
    for a in result.alerts:
        own = dict(a.rule.labels)
        key = "/".join(x for x in (own.get("severity", "none"), own.get("tier")) if x)
        counts[key] = counts.get(key, 0) + len(a.episodes)
    return {k: round(n / weeks, 3) for k, n in sorted(counts.items())}


def _episode(e, end: float) -> dict:
    return {
        "labels": dict(e.labels),
        "pending_from": iso(e.active_at),
        "start": iso(e.start),
        "end": iso(e.end) if e.end is not None else None,
        "firing_s": e.duration(end),
        "peak": e.peak,
    }


def _alert(a: AlertResult, end: float) -> dict:
    r = a.rule
    return {
        "alert": r.name,
        "key": r.key,
        "file": r.file,
        "group": r.group,
        "interval_s": r.interval,
        "for_s": r.for_s,
        "keep_firing_for_s": r.keep_firing_for_s,
        "labels": dict(r.labels),
        "signal": None
        if a.signal is None
        else {"expr": a.signal.expr, "op": a.signal.op, "threshold": a.signal.threshold},
        "records_evaluated_in_place": a.inlined,
        "episodes": [_episode(e, end) for e in a.episodes],
        "firing_s": a.firing_s(end),
        "pending_without_firing": a.never_fired,
    }


def _verdict(v: Verdict) -> dict:
    i = v.incident
    return {
        "incident": i.name,
        "alert": i.alert,
        "labels": dict(i.labels),
        "start": iso(i.start),
        "end": iso(i.end),
        "caught": v.caught,
        "delay_s": v.delay_s,
        "episode_labels": dict(v.labels) if v.caught else None,
    }


def as_json(runs: list[BacktestRun]) -> str:
    first = runs[0].result
    doc = {
        "range": {"start": iso(first.start), "end": iso(first.end), "seconds": first.end - first.start},
        "sets": [
            {
                "specs": run.result.name,
                "records": {
                    k: "history" if v else "evaluated in place" for k, v in sorted(run.result.history.items())
                },
                "pages_per_week": pages_per_week(run.result),
                "alerts": [_alert(a, run.result.end) for a in run.result.alerts],
                "incidents": [_verdict(v) for v in run.verdicts],
            }
            for run in runs
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def as_text(runs: list[BacktestRun]) -> str:
    first = runs[0].result
    span = first.end - first.start
    out = [f"Back-test of {iso(first.start)} .. {iso(first.end)} ({human(span)})", ""]
    names = [r.result.name for r in runs]
    header = ["alert"] + [f"{n}: episodes" for n in names] + [f"{n}: firing" for n in names]
    rows = [header]
    keys = list(dict.fromkeys(a.rule.key for r in runs for a in r.result.alerts))
    for key in keys:
        per = [next((a for a in r.result.alerts if a.rule.key == key), None) for r in runs]
        rows.append(
            [key]
            + [str(len(a.episodes)) if a else "-" for a in per]
            + [human(a.firing_s(first.end)) if a else "-" for a in per]
        )
    out += _table(rows)
    out.append("")
    for run in runs:
        ppw = pages_per_week(run.result)
        out.append(f"{run.result.name}: pages per week: " + ", ".join(f"{k} {v:g}" for k, v in ppw.items()))
        inlined = sorted(k for k, v in run.result.history.items() if not v)
        stored = len(run.result.history) - len(inlined)
        if len(inlined) > SHOWN_RECORDS:  # --format json names each
            out.append(
                f"{run.result.name}: records: {stored} read from the history, "
                f"{len(inlined)} evaluated in place"
            )
        elif inlined:
            out.append(f"{run.result.name}: evaluated in place (not in the history): " + ", ".join(inlined))
    for run in runs:
        if run.verdicts:
            out += ["", f"Incidents ({run.result.name}):"]
            rows = [["incident", "alert", "caught", "after", "labels"]]
            for v in run.verdicts:
                rows.append(
                    [
                        v.incident.name,
                        v.incident.alert,
                        "yes" if v.caught else "MISSED",
                        human(v.delay_s) if v.caught else "-",
                        ",".join(f"{k}={val}" for k, val in v.incident.labels),
                    ]
                )
            out += _table(rows)
    for run in runs:
        shown = [a for a in run.result.alerts if a.episodes]
        if not shown:
            continue
        out += ["", f"Episodes ({run.result.name}):"]
        for a in shown:
            out.append(f"  {a.rule.key}:")
            for e in a.episodes[:SHOWN_EPISODES]:
                own = {k for k, _ in a.rule.labels} | {"alertname"}
                labels = ",".join(f"{k}={v}" for k, v in e.labels if k not in own)
                end = iso(e.end) if e.end is not None else "(still firing)"
                took = human(e.duration(first.end))
                out.append(f"    {iso(e.start)} .. {end}  {took}  peak {e.peak:.4g}  {{{labels}}}")
            if len(a.episodes) > SHOWN_EPISODES:
                out.append(f"    ... {len(a.episodes) - SHOWN_EPISODES} more (--format json has all)")
    return "\n".join(out) + "\n"


FORMATS = {"text": as_text, "json": as_json}
