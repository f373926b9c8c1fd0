"""Judging one step's query result by the thresholds the spec gives it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..runbooks import fmt
from ..runbooks.book import PageStep

ORDER = {"unhealthy": 3, "suspicious": 2, "healthy": 1, "info": 0, "no-data": 0, "error": 4}


@dataclass(frozen=True)
class ResultRow:
    """One series of a step's query result: its labels and value."""

    labels: dict
    value: float

    def label_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.labels.items()) or "{}"


@dataclass(frozen=True)
class Judgement:
    verdict: str
    worst: ResultRow | None
    detail: str  # one line: what was found


def rows_of(result: list[dict]) -> list[ResultRow]:
    out = []
    for r in result:
        labels = dict(r.get("metric", {}))
        try:
            value = float(r.get("value", [0, "NaN"])[1])
        except (TypeError, ValueError, IndexError):
            value = math.nan
        out.append(ResultRow(labels, value))
    return out


def sort_worst_first(ps: PageStep, rows: list[ResultRow]) -> list[ResultRow]:
    low_is_bad = ps.limits.op == "<"

    def key(r: ResultRow):
        v = r.value
        bad = v if not math.isnan(v) else -math.inf
        return (math.isnan(v), bad if low_is_bad else -bad, r.label_text())

    return sorted(rows, key=key)


def judge(ps: PageStep, rows: list[ResultRow]) -> Judgement:
    st, lim, unit = ps.step, ps.limits, ps.step.unit
    if not rows:
        return Judgement(st.empty, None, "no series")
    if st.query.kind == "names" and ps.expected_names:
        return _names(ps, rows)
    if st.query.kind == "labels" and st.query.expect:
        return _labels(ps, rows)
    finite = [r for r in rows if not math.isnan(r.value)]
    ordered = sort_worst_first(ps, finite)
    worst = ordered[0] if ordered else None
    if lim.judged and unit == "up" and worst is not None:
        down = [r for r in finite if r.value < 1]
        if not down:
            return Judgement("healthy", worst, f"all {len(finite)} target(s) up")
        return Judgement(
            "unhealthy",
            down[0],
            f"{len(down)} of {len(finite)} target(s) down: " + "; ".join(r.label_text() for r in down[:3]),
        )
    if lim.judged:
        if worst is None:
            return Judgement("no-data", None, "only NaN values")
        v = worst.value

        def beyond(t):
            # exactly the alert's comparison: a value equal to the threshold is not beyond it, and a
            # value a hair above it is, as Prometheus evaluating `signal > threshold` sees it
            if t is None:
                return False
            return v > t if lim.op == ">" else v < t

        verdict = (
            "unhealthy" if beyond(lim.unhealthy) else "suspicious" if beyond(lim.suspicious) else "healthy"
        )
        which = (
            verdict if verdict != "healthy" else ("suspicious" if lim.suspicious is not None else "unhealthy")
        )
        edge = lim.unhealthy if which == "unhealthy" else lim.suspicious
        rel = (
            {">": "above", "<": "below"}[lim.op]
            if verdict != "healthy"
            else {">": "at or below", "<": "at or above"}[lim.op]
        )
        where = f" at {worst.label_text()}" if len(rows) > 1 or verdict != "healthy" else ""
        return Judgement(
            verdict,
            worst,
            f"{'worst' if len(rows) > 1 else 'value'} {fmt.value(v, unit)}{where} "
            f"({rel} {fmt.value(edge, unit)}, {lim.source(which)})",
        )
    if st.present is not None:
        n = len(rows)
        return Judgement(
            st.present, worst or rows[0], f"{n} series" + (f", e.g. {rows[0].label_text()}" if n else "")
        )
    if st.query.kind in ("names", "labels"):
        return Judgement("info", worst, _layout(rows, ps.listed_labels))
    if worst is None:
        return Judgement("info", None, f"{len(rows)} series, no numeric value")
    if len(rows) == 1:
        return Judgement("info", worst, f"value {fmt.value(worst.value, unit)}")
    hi = max(finite, key=lambda r: r.value)
    lo = min(finite, key=lambda r: r.value)
    spread = (
        f"from {fmt.value(lo.value, unit)} to {fmt.value(hi.value, unit)}"
        if lo.value != hi.value
        else f"all {fmt.value(hi.value, unit)}"
    )
    return Judgement("info", worst, f"{len(rows)} series, {spread}")


def _names(ps: PageStep, rows: list[ResultRow]) -> Judgement:
    present = {r.labels.get("__name__") for r in rows if r.labels.get("__name__")}
    missing = [n for n in ps.expected_names if n not in present]
    if not missing:
        return Judgement("healthy", None, f"present: {', '.join(sorted(ps.expected_names))}")
    instead = sorted({alt for n in missing for alt in ps.expected_names[n] if alt in present})
    detail = f"missing: {', '.join(missing)}"
    if instead:
        detail += f"; present instead: {', '.join(instead)} (renamed)"
    elif present:
        detail += f"; present: {', '.join(sorted(present))}"
    return Judgement("unhealthy", None, detail)


def _labels(ps: PageStep, rows: list[ResultRow]) -> Judgement:
    seen = {k for r in rows for k, v in r.labels.items() if v != ""}
    expect = ps.expected_labels
    missing = [label for label in expect if label not in seen]
    if not missing:
        return Judgement("healthy", None, f"series carry {', '.join(expect)}")
    alts = sorted({k for k in seen for m in missing if k.lower() == m.lower() and k != m})
    detail = f"no series carries {', '.join(missing)}"
    if alts:
        detail += f"; found {', '.join(alts)} instead"
    return Judgement("unhealthy", None, detail)


def breaches(ps: PageStep, row: ResultRow) -> bool:
    """Whether one series of the alert's own step holds the alert's condition (its unhealthy side)."""
    lim = ps.limits
    if lim.unhealthy is not None:
        return not math.isnan(row.value) and (
            row.value > lim.unhealthy if lim.op == ">" else row.value < lim.unhealthy
        )
    return ps.step.present == "unhealthy"


def overall(verdicts: list[str]) -> str:
    judged = [v for v in verdicts if v in ("healthy", "suspicious", "unhealthy", "error")]
    if not judged:
        return "no-data"
    return max(judged, key=lambda v: ORDER[v])


def _layout(rows: list[ResultRow], listed: tuple[str, ...] = ()) -> str:
    """For names/labels steps: the distinct values of each label, which is the finding."""
    keys = sorted({k for r in rows for k in r.labels})
    parts = []
    for k in keys:
        values = sorted({r.labels[k] for r in rows if r.labels.get(k, "") != ""})
        if not values:
            continue
        shown = ", ".join(values[:4]) + (f", ... ({len(values)} values)" if len(values) > 4 else "")
        parts.append(f"{k}: {shown}")
    absent = [k for k in dict.fromkeys(list(listed) + keys) if all(r.labels.get(k, "") == "" for r in rows)]
    text = "; ".join(parts) or f"{len(rows)} series without labels"
    return text + (f"; never set: {', '.join(absent)}" if absent else "")
