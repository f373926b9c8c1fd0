"""The report: each source's steps against the targets, then the proposals; as text or JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

from .propose import CalibrateResult
from .measures import parse_key
from .targets import show


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _units(step) -> dict:
    return {k: parse_key(k) for k in step.measures}


def _signals(sw) -> list[list[str]]:
    names = sorted({a for s in sw.steps for a in s.traces})
    rows = [["alert", *[s.label.split(" ")[0] for s in sw.steps]]]
    for name in names:
        rows.append([name, *[f"{s.observed[name]:.3g}" if name in s.observed else "-" for s in sw.steps]])
    return rows


def text(result: CalibrateResult, costs: dict[str, list[float | None]], currency: str) -> str:
    out = ["targets: " + ", ".join(f"{t.shown()} ({t.origin})" for t in result.targets), ""]
    for sw in result.sweeps:
        keys = [t.measure.key for t in result.targets]
        keys += sorted({k for s in sw.steps for k in s.measures} - set(keys))
        units = {k: m.unit for s in sw.steps for k, m in _units(s).items()}
        head = ["step", "requests", *keys, "verdict"]
        if sw.name in costs:
            head.append(f"{currency}/1M good tokens")
        rows = [head]
        for i, s in enumerate(sw.steps):
            cells = [s.label, str(s.requests)]
            cells += [show(s.measures[k], units[k]) if k in s.measures else "-" for k in keys]
            verdict = "broke: " + "; ".join(sw.broken[i]) if i in sw.broken else "met"
            cells.append(("SUSTAINABLE " if i == result.sustainable else "") + verdict)
            if sw.name in costs:
                c = costs[sw.name][i]
                why = "no good token" if s.good_tokens is not None else "no per-request data"
                cells.append(f"undefined ({why})" if c is None else f"{c:.3g}")
            rows.append(cells)
        out += [f"{sw.name}: {len(sw.steps)} steps", *_table(rows), ""]
        if any(s.observed for s in sw.steps):
            out += [
                "each alert's signal per step (worst engine or GPU; a gauge's median, else over the step):",
                *_table(_signals(sw)),
                "",
            ]
    rows = [["subject", "field", "now", "proposed", "rule / why not"]]
    for p in result.proposals:
        rows.append([p.subject, p.field, p.current, p.proposed or "-", p.rule if p.proposed else p.reason])
    out += ["proposals:", *_table(rows), ""]
    evidence = [
        f"  {p.subject} {p.field}: {p.evidence}" for p in result.proposals if p.proposed and p.evidence
    ]
    out += ["evidence:", *evidence]
    if result.notes:
        out += ["", *[f"note: {n}" for n in result.notes]]
    return "\n".join(out) + "\n"


def as_json(result: CalibrateResult, costs: dict[str, list[float | None]], currency: str, diff: str) -> str:
    """The same as `text`, for a CI job or a pull-request bot: steps, proposals, the overrides diff."""
    sweeps = []
    for sw in result.sweeps:
        steps = []
        for i, s in enumerate(sw.steps):
            row = {
                "label": s.label,
                "source": s.source,
                "load": s.load,
                "requests": s.requests,
                "seconds": s.seconds,
                "measures": {k: None if math.isnan(v) else v for k, v in s.measures.items()},
                "signals": s.observed,
                "broke": sw.broken.get(i, []),
                "sustainable": i == result.sustainable,
            }
            if sw.name in costs:
                row[f"cost_per_1m_good_tokens_{currency}"] = costs[sw.name][i]
            steps.append(row)
        sweeps.append({"source": sw.name, "steps": steps})
    doc = {
        "targets": [{"measure": t.measure.key, "limit": t.limit, "from": t.origin} for t in result.targets],
        "sources": sweeps,
        "proposals": [asdict(p) for p in result.proposals],
        "notes": result.notes,
        "overrides_diff": diff,
    }
    return json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n"
