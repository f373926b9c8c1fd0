"""The tables of ``python -m bench.native``: one rule set against the other, group by group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .report import _fmt_int, _table, per_30s


def _ratio(native: float, classic: float) -> str:
    return f"{native / classic:.2f}x" if classic else "-"


def _pair(classic: int, native: int) -> str:
    return f"{_fmt_int(classic)} / {_fmt_int(native)} ({_ratio(native, classic)})"


def rules_table(size: dict) -> list[str]:
    """Per group and in total: samples per evaluation and eval ms, classic (the second A of A-B-A)
    next to native; the totals per 30 s with Prometheus' CPU."""
    classic, native = size["rules"]["classic"], size["rules"]["native"]
    by_name = {g["name"]: g for g in native["groups"]}
    rows = []
    for g in classic["groups"]:
        n = by_name.get(g["name"])
        if n is None:
            continue
        rows.append(
            [
                f"{g['name']} ({g['interval_s']} s)",
                _fmt_int(g["samples"]),
                _fmt_int(n["samples"]),
                _ratio(n["samples"], g["samples"]),
                f"{g['eval_ms']:,.1f}",
                f"{n['eval_ms']:,.1f}",
            ]
        )
    rows.append(
        [
            "**total, one evaluation of every group**",
            _fmt_int(classic["total"]["samples"]),
            _fmt_int(native["total"]["samples"]),
            _ratio(native["total"]["samples"], classic["total"]["samples"]),
            f"{classic['total']['eval_ms']:,.1f}",
            f"{native['total']['eval_ms']:,.1f}",
        ]
    )
    head = ["group (interval)", "samples classic", "native", "native/classic", "eval ms classic", "native"]
    return _table(head, rows)


def totals_table(size: dict) -> list[str]:
    rows = []
    for key, label in (
        ("classic_first", "classic (A, first)"),
        ("native", "native (B)"),
        ("classic", "classic (A, again)"),
    ):
        t = size["rules"][key]["total"]
        cpu = per_30s(t, "cpu_ms")
        rows.append(
            [
                label,
                _fmt_int(t["samples_per_30s"]),
                f"{per_30s(t, 'eval_ms'):,.1f} ms",
                "-" if cpu is None else f"{cpu:,.1f} ms",
                f"{t['concurrent_ms']:,.1f} ms",
            ]
        )
    for form in ("classic", "native"):
        floor = size["floor"][form]
        rows.append([f"floor, {form}", _fmt_int(floor["samples_per_30s"]), "", "", ""])
    return _table(
        ["rule set", "samples per 30 s", "eval per 30 s", "Prometheus CPU per 30 s", "one cycle, concurrent"],
        rows,
    )


def dashboards_table(size: dict) -> list[str]:
    """Each dashboard over the hour: its default view (collapsed rows shut) and every panel, samples
    classic / native; eval time of the default view and Prometheus' CPU per refresh of every panel."""
    boards = size.get("dashboards")
    if not boards:
        return []
    rows = []
    for uid, c in boards["classic"].items():
        n = boards["native"].get(uid)
        if n is None:
            continue
        cv, nv, ca, na = c["default_view"], n["default_view"], c["all_panels"], n["all_panels"]
        rows.append(
            [
                f"{uid} ({cv['panels']} of {ca['panels']} panels)",
                _pair(cv["samples"], nv["samples"]),
                f"{cv['eval_ms']:,.1f} / {nv['eval_ms']:,.1f}",
                _pair(ca["samples"], na["samples"]),
                f"{ca.get('cpu_ms', 0):,.0f} / {na.get('cpu_ms', 0):,.0f}",
            ]
        )
    head = ["dashboard", "default view: samples", "eval ms", "every panel: samples", "CPU ms"]
    return _table(head, rows)


def render(results: dict) -> str:
    out = [f"# {results['label']}: rules and dashboards, classic vs native histograms", ""]
    m = results["machine"]
    out += [
        f"Machine: {m['cpu']} ({m['cores']} cores), {m['ram_gib']} GiB, {m['os']}, "
        f"Prometheus {m['prometheus']}.",
        f"Started {results['started']}, finished {results.get('finished', '?')}. {results['note']}".strip(),
        "",
    ]
    for size in results["sizes"]:
        s = size["shape"]
        out += [f"## {s['gpus']:,} GPUs ({s['engines']} engines, {size['series']:,} series replayed)", ""]
        r = size["replay"]
        check = {k: v for k, v in r["check"].items() if k != "expected_samples"}
        out.append(
            f"Replay: {r['steps']} steps in {r['seconds']} s; load {size['load_before']} before, "
            f"{size['load_after']} after. Samples per series over the replayed hour "
            f"(expected {r['check']['expected_samples']}):"
        )
        out.append("")
        out += _table(
            ["series", "count", "min samples", "max samples"],
            [
                [k, _fmt_int(int(v["series"] or 0)), str(v["min_samples"]), str(v["max_samples"])]
                for k, v in check.items()
            ],
        )
        out += ["", "**Rule sets** (classic measured before and after native, A-B-A):", ""]
        out += totals_table(size)
        out += ["", "**Per group** (one evaluation; classic = the second A):", ""]
        out += rules_table(size)
        dash = dashboards_table(size)
        if dash:
            out += ["", "**Dashboards**, one refresh over the hour (classic / native):", ""]
            out += dash
        for form in ("classic", "native"):
            short = size["history"][form]["short"]
            if short:
                listed = ", ".join(
                    f"`{k}` ({'none' if v is None else f'{v} min'})" for k, v in sorted(short.items())
                )
                out += [
                    "",
                    f"Records of the {form} set with less than the hour at the measured time: {listed}.",
                ]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.native_report bench/results/<label>.json", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.with_suffix(".md").write_text(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
