"""--html DIR: one self-contained page (inline SVG, no script, no network) with a plot per alert.

Each plot shows the signal's worst value across its series (max, or min for a `<` alert) over the
range, the threshold as a dashed line and every firing episode as a shaded band (one colour per
spec set when two are compared).
"""

from __future__ import annotations

import html
from pathlib import Path

from .. import writer
from .report import BacktestRun, pages_per_week
from .runner import AlertResult
from .timespec import human, iso

W, H, PAD = 760, 180, 40
COLOURS = ("#d62728", "#1f77b4")  # episodes of the first and the compared spec set


def _x(t: float, start: float, end: float) -> float:
    return PAD + (W - 2 * PAD) * (t - start) / (end - start)


def _plot(alerts: list[AlertResult | None], start: float, end: float) -> str:
    main = next(a for a in alerts if a is not None)
    values = [v for _, v in main.plot]
    # each set's threshold, in its colour: a comparison usually moves exactly this line
    thresholds = [
        (a.signal.threshold, COLOURS[n % 2]) for n, a in enumerate(alerts) if a is not None and a.signal
    ]
    lo = min(values + [t for t, _ in thresholds], default=0.0)
    hi = max(values + [t for t, _ in thresholds], default=1.0)
    if hi == lo:
        hi, lo = hi + 1, lo - 1 if lo else 0
    top = hi + (hi - lo) * 0.08

    def y(v: float) -> float:
        return H - PAD / 2 - (H - PAD) * (v - lo) / (top - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}">']
    parts.append(f'<rect x="{PAD}" y="{PAD / 2}" width="{W - 2 * PAD}" height="{H - PAD}" fill="#fafafa"/>')
    for n, a in enumerate(alerts):
        if a is None:
            continue
        band = (H - PAD) / len(alerts)
        for e in a.episodes:
            x0 = _x(max(e.start, start), start, end)
            x1 = _x(e.end if e.end is not None else end, start, end)
            parts.append(
                f'<rect x="{x0:.1f}" y="{PAD / 2 + n * band:.1f}" width="{max(1.0, x1 - x0):.1f}" '
                f'height="{band:.1f}" fill="{COLOURS[n % 2]}" fill-opacity="0.22">'
                f"<title>{html.escape(iso(e.start))} firing {human(e.duration(end))}</title></rect>"
            )
    if main.plot:
        path = " ".join(f"{_x(t, start, end):.1f},{y(v):.1f}" for t, v in main.plot)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#333" stroke-width="1.2"/>')
    for threshold, colour in dict(thresholds).items():
        parts.append(
            f'<line x1="{PAD}" x2="{W - PAD}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" '
            f'stroke="{colour}" stroke-dasharray="5,4"/>'
            f'<text x="{W - PAD + 2}" y="{y(threshold) + 4:.1f}" font-size="10">{threshold:g}</text>'
        )
    for v in (lo, hi):
        parts.append(f'<text x="2" y="{y(v) + 4:.1f}" font-size="10">{v:.3g}</text>')
    parts.append(f'<text x="{PAD}" y="{H - 4}" font-size="10">{html.escape(iso(start))}</text>')
    parts.append(
        f'<text x="{W - PAD}" y="{H - 4}" font-size="10" text-anchor="end">{html.escape(iso(end))}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def page(runs: list[BacktestRun]) -> str:
    first = runs[0].result
    start, end = first.start, first.end
    names = [r.result.name for r in runs]
    out = [
        "<!doctype html><html><head><meta charset='utf-8'><title>servewatch backtest</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}code{font-size:12px}",
        "</style></head><body>",
        f"<h1>Back-test {html.escape(iso(start))} .. {html.escape(iso(end))}</h1>",
    ]
    legend = ", ".join(
        f"<span style='color:{COLOURS[i % 2]}'>&#9632;</span> {html.escape(n)}" for i, n in enumerate(names)
    )
    out.append(f"<p>Firing windows: {legend}. Line: the signal's worst series; dashed: the threshold.</p>")
    for run in runs:
        ppw = ", ".join(f"{k} {v:g}" for k, v in pages_per_week(run.result).items())
        out.append(f"<p><b>{html.escape(run.result.name)}</b>: pages per week: {html.escape(ppw)}</p>")
        if run.verdicts:
            out.append("<table><tr><th>incident</th><th>alert</th><th>caught</th><th>after</th></tr>")
            for v in run.verdicts:
                after = human(v.delay_s) if v.caught else "-"
                out.append(
                    f"<tr><td>{html.escape(v.incident.name)}</td><td>{html.escape(v.incident.alert)}</td>"
                    f"<td>{'yes' if v.caught else 'MISSED'}</td><td>{after}</td></tr>"
                )
            out.append("</table>")
    keys = list(dict.fromkeys(a.rule.key for r in runs for a in r.result.alerts))
    for key in keys:
        per = [next((a for a in r.result.alerts if a.rule.key == key), None) for r in runs]
        main = next(a for a in per if a is not None)
        counts = " / ".join(str(len(a.episodes)) if a else "-" for a in per)
        out.append(f"<h2 id='{html.escape(key)}'>{html.escape(key)}</h2>")
        out.append(f"<p>episodes: {counts}; for {human(main.rule.for_s)}")
        if main.rule.keep_firing_for_s:
            out.append(f", keep_firing_for {human(main.rule.keep_firing_for_s)}")
        sig = html.escape(main.signal.expr) if main.signal else "(no threshold: the alert's own result)"
        out.append(f"</p><p><code>{sig}</code></p>")
        out.append(_plot(per, start, end))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(directory: Path, runs: list[BacktestRun]) -> Path:
    path = Path(directory) / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.replace(path, page(runs))
    return path
