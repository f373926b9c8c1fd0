"""Results JSON -> Markdown tables and a PNG chart of cost vs fleet size.

``python -m bench.report bench/results/<label>.json`` redraws both from a results file.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

RULE_INTERVAL_MS = 30_000
RULE_TARGET_SHARE = 0.02  # issue 8: the whole rule set within 2% of its interval at 4,096 GPUs
HISTOGRAM_TARGET = 10.0  # issue 8: histogram-derived quantities touch >= 10x fewer samples


def growth_exponent(xs: list[float], ys: list[float]) -> float | None:
    """``b`` of the least-squares fit ``y = a * x**b`` (1 = linear); None with fewer than two points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    var = sum((p[0] - mx) ** 2 for p in pts)
    return None if var == 0 else sum((p[0] - mx) * (p[1] - my) for p in pts) / var


def _fmt_int(n: int) -> str:
    return f"{n:,}"


def _cell(samples: int, eval_ms: float) -> str:
    return f"{_fmt_int(samples)} / {eval_ms:,.1f} ms"


def _view_cell(result: dict) -> str:
    """Samples and eval time of the default view, and Prometheus' CPU per refresh when measured."""
    view, cpu = result["default_view"], result["all_panels"].get("cpu_ms")
    return _cell(view["samples"], view["eval_ms"]) + ("" if cpu is None else f" (CPU {cpu:,.0f} ms)")


def _board(uid: str, result: dict) -> str:
    view = result["default_view"]
    return f"{uid} ({view['panels']} panels, {view['queries']} queries)"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]


def quantity_target(kind: str, ratio: float | None) -> tuple[str, str]:
    """(target, verdict) of one quantity row: histograms >= 10x fewer, gauges no more than the anchor."""
    if ratio is None:
        return "-", "no data"
    if kind == "histogram":
        return f">= {HISTOGRAM_TARGET:g}x", "met" if ratio >= HISTOGRAM_TARGET else f"missed ({ratio:.2f}x)"
    if kind == "gauge":
        return "read once (>= 1x)", "met" if ratio >= 0.999 else f"missed ({ratio:.2f}x)"
    return "none set", f"{ratio:.2f}x"


def steps_kept(check: dict) -> tuple[int, int] | None:
    """(the fewest samples a checked series holds in the measured hour, the steps it should hold)
    when a replay fell behind and scrapes were lost (`loading.check_steps`), else None."""
    expected = check.get("expected_samples")
    rows = [row for row in check.values() if isinstance(row, dict)]
    fewest = [row["min_samples"] for row in rows if row.get("min_samples") is not None]
    if not expected or not fewest or min(fewest) >= expected:
        return None
    return int(min(fewest)), int(expected)


def data_cells(size: dict) -> list[str]:
    """The series, how the data got into Prometheus, and the recorded series' backfill time."""
    if "replay" in size:
        replay = size["replay"]
        kept = steps_kept(replay.get("check") or {})
        return [
            _fmt_int(size["series"]),
            f"scraped: {replay['steps']} steps in {replay['seconds']:.0f} s"
            + (f", **{kept[0]} of {kept[1]} steps per series kept**" if kept else ""),
            f"{size['backfill_s']:.0f} s",
        ]
    om, db = size["openmetrics"], size["tsdb"]
    return [
        _fmt_int(om["series"]),
        f"{_fmt_int(om['samples'])} samples backfilled: {om['bytes'] / 2**30:.2f} GiB of OpenMetrics "
        f"in {om['write_s']} s"
        + (f", {om['peak_rss_mib']} MiB peak RSS" if "peak_rss_mib" in om else "")
        + f", promtool {db.get('backfill_openmetrics', 0):.0f} s",
        f"{db.get('backfill_rules', 0):.0f} s",
    ]


def render(results: dict) -> str:
    sizes = results["sizes"]
    gpus = [s["shape"]["gpus"] for s in sizes]
    head = [f"{g:,} GPUs" for g in gpus]
    m, st = results["machine"], results["settings"]
    out = [
        f"# Fleet benchmark `{results['label']}`",
        "",
        f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']} (kernel {m['kernel']}), "
        f"Python {m['python']}; {m['prometheus']}; {m['promtool']}.",
        f"Started {results['started']}, finished {results['finished']}. {results.get('note', '')}".strip(),
        "",
        f"Queries: median of {st['repeats']} runs after {st['warmup']} warm-up; eval time = Prometheus' "
        f"`evalTotalTime`, samples = `totalQueryableSamples`. Dashboards: range queries over the last "
        f"{st['window_s'] // 60} min at a {st['step_s']} s step, `$__rate_interval` = {st['rate_interval']}.",
        "",
        "## Fleets",
        "",
    ]
    rows = [
        [
            _fmt_int(s["shape"]["gpus"]),
            _fmt_int(s["shape"]["hosts"]),
            _fmt_int(s["shape"]["mig_instances"]),
            f"{s['shape']['engines']} ({s['shape']['pods']} pods, {s['shape']['models']} models)",
            *data_cells(s),
            f"{s['load_before'][0]} -> {s['load_after'][0]}",
        ]
        for s in sizes
    ]
    out += _table(
        ["GPUs", "hosts", "MIG instances", "engines", "series", "data", "rule backfill", "load (1 min)"],
        rows,
    )
    if any("replay" in s for s in sizes):
        out += [
            "",
            "The raw series were scraped into the head (`--load scrape`): the state of a Prometheus "
            "that has been scraping the fleet. Backfilled blocks (the default) make every query decode "
            "its series' labels from the block index as well (bench/loading.py).",
        ]

    out += rules_section(sizes, "rules", head, "## Rule groups: one evaluation at the last sample")
    out += costliest_section(sizes, "rules")
    if all("rules_before" in s for s in sizes):
        ref = st.get("before", {})
        title = (
            f"## Rule groups before: `{ref.get('ref')}` ({ref.get('commit', '')[:10]}), same data, same run"
        )
        out += rules_section(sizes, "rules_before", head, title)
        out += ["", "Before / after, the whole rule set (eval time and Prometheus CPU per 30 s):", ""]
        rows = []
        for key, name in (("eval_ms", "eval time"), ("cpu", "Prometheus CPU")):
            cells = []
            for s in sizes:
                a, b = per_30s(s["rules_before"]["total"], key), per_30s(s["rules"]["total"], key)
                cells.append("-" if a is None or b is None else f"{a:,.0f} -> {b:,.0f} ms (x{a / b:.2f})")
            rows.append([name] + cells)
        samples = [
            f"{s['rules_before']['total']['samples']:,} -> {s['rules']['total']['samples']:,}" for s in sizes
        ]
        rows.append(["samples (every group once)"] + samples)
        out += _table(["per 30 s"] + head, rows)
    if all("rules_before_first" in s for s in sizes):
        out += aba_section(sizes, head)
    if any("interleaved" in s for s in sizes):
        out += interleaved_section(sizes)
    if "dashboards" not in sizes[0]:  # --rules-only
        return "\n".join(out) + "\n"

    out += ["", "## Dashboards: a full refresh (samples touched / summed eval time of its queries)", ""]
    rows = []
    for uid in sizes[0]["dashboards"]:
        for view, key in (("default view", "dashboards"), ("one model selected", "dashboards_one_model")):
            d = [s[key][uid] for s in sizes]
            rows.append([_board(uid, d[0]), view] + [_view_cell(x) for x in d])
    for uid in sizes[0]["anchors"]:
        d = [s["anchors"][uid] for s in sizes]
        view = "one model selected" if "vllm" in uid else "All (its default)"
        rows.append([_board(uid, d[0]), view] + [_view_cell(x) for x in d])
    out += _table(["dashboard", "view"] + head, rows)

    last = sizes[-1]
    out += [
        "",
        f"## Per quantity at {last['shape']['gpus']:,} GPUs, one model selected "
        f"(`{last['model']['model_name']}`)",
        "",
    ]
    rows = []
    for q in last["quantities"]:
        if "error" in q:
            rows.append(
                [q["quantity"], q["kind"], q["anchor"], q["servewatch"], "-", "-", "-", "-", q["error"]]
            )
            continue
        target, verdict = quantity_target(q["kind"], q["ratio"])
        ratio = "-" if q["ratio"] is None else f"{q['ratio']:.2f}x"
        rows.append(
            [
                q["quantity"],
                q["kind"],
                q["anchor"],
                q["servewatch"],
                _fmt_int(q["anchor_samples"]),
                _fmt_int(q["servewatch_samples"]),
                ratio,
                target,
                verdict,
            ]
        )
    out += _table(
        [
            "quantity",
            "kind",
            "anchor panel",
            "servewatch panel",
            "anchor samples",
            "servewatch samples",
            "anchor / servewatch",
            "target",
            "verdict",
        ],
        rows,
    )

    out += ["", "Anchor / servewatch samples per quantity at every size (one model selected):", ""]
    rows = []
    for i, q in enumerate(last["quantities"]):
        ratios = [s["quantities"][i].get("ratio") for s in sizes]
        panel = q["servewatch"].split(": ", 1)[-1]
        rows.append([q["quantity"], panel] + ["-" if r is None else f"{r:,.2f}x" for r in ratios])
    out += _table(["quantity", "servewatch panel"] + head, rows)

    out += ["", f"## Every panel at {last['shape']['gpus']:,} GPUs, default view (samples / eval time)", ""]
    rows = []
    for uid, d in last["dashboards"].items():
        for p in d["panels"]:
            closed = " (collapsed)" if p["collapsed"] else ""
            rows.append(
                [uid, p["row"] + closed, p["title"], str(p["queries"]), _cell(p["samples"], p["eval_ms"])]
            )
    out += _table(["dashboard", "row", "panel", "queries", "cost"], rows)

    out += ["", "## Generation time of all artefacts (`generate.build`, in-process)", ""]
    again = results.get("generation_measured")
    if again:
        out += [f"Measured again at {again['at']} (load {again['load'][0][0]} -> {again['load'][1][0]}).", ""]
    out += generation_table(results["generation"])
    out += ["", "## Targets (issue 8)", "", *targets(results)]
    return "\n".join(out) + "\n"


ABA = (
    ("rules_before_first", "A: before, first"),
    ("rules", "B: this tree"),
    ("rules_before", "A: before, again"),
)


def aba_section(sizes: list[dict], head: list[str]) -> list[str]:
    """The before rules measured on both sides of this tree's (--aba): the whole set per 30 s, and
    rule by rule every group whose rules differ between the sides."""
    out = ["", "## A-B-A: the before rules measured first and last, this tree's between", ""]
    rows = []
    for key, name in ABA:
        totals = [s[key]["total"] for s in sizes]
        rows.append(
            [name]
            + [
                f"{_fmt_int(t['samples_per_30s'])} samples, CPU {per_30s(t, 'cpu'):,.0f} ms, "
                f"eval {per_30s(t, 'eval_ms'):,.0f} ms"
                for t in totals
            ]
        )
    out += _table(["per 30 s"] + head, rows)
    for s, h in zip(sizes, head, strict=True):
        out += ["", f"Rule by rule at {h}, groups that differ (samples / eval time per evaluation):", ""]
        rows = []
        for group in differing_groups(s):
            for name in _rule_names(s, group):
                cells = []
                for key, _ in ABA:
                    rule = _rule(s[key], group, name)
                    cells.append("-" if rule is None else _cell(rule["samples"], rule["eval_ms"]))
                rows.append([group, name] + cells)
        out += _table(["group", "rule"] + [name for _, name in ABA], rows)
    return out


def interleaved_section(sizes: list[dict]) -> list[str]:
    """The differing rules run before and after in alternation (--interleave)."""
    out = []
    for s in sizes:
        rows = s.get("interleaved")
        if not rows:
            continue
        out += [
            "",
            f"Interleaved at {s['shape']['gpus']:,} GPUs: each differing rule before and after in "
            f"alternation, {rows[0]['rounds']} rounds (eval time: median; CPU: mean per run):",
            "",
        ]
        out += _table(
            ["group", "rule", "eval before", "eval after", "CPU before", "CPU after", "after faster"],
            [
                [
                    r["group"],
                    r["rule"],
                    f"{r['eval_ms_before']:.1f} ms",
                    f"{r['eval_ms_now']:.1f} ms",
                    f"{r['cpu_ms_before']:.1f} ms",
                    f"{r['cpu_ms_now']:.1f} ms",
                    f"{r['now_faster']} of {r['rounds']}",
                ]
                for r in rows
            ],
        )
    return out


def _rules_of(side: dict) -> dict[str, list[dict]]:
    return {g["name"]: g["rules"] for g in side["groups"]}


def differing_groups(size: dict) -> list[str]:
    """Groups whose rules (names, or samples read) differ between this tree and the before side."""
    now, before = _rules_of(size["rules"]), _rules_of(size["rules_before"])
    shape = lambda rules: [(r["name"], r["samples"]) for r in rules]  # noqa: E731
    names = list(dict.fromkeys([*now, *before]))
    return [g for g in names if shape(now.get(g, [])) != shape(before.get(g, []))]


def _rule_names(size: dict, group: str) -> list[str]:
    names = [r["name"] for key in ("rules", "rules_before") for r in _rules_of(size[key]).get(group, [])]
    return list(dict.fromkeys(names))


def _rule(side: dict, group: str, name: str) -> dict | None:
    return next((r for r in _rules_of(side).get(group, []) if r["name"] == name), None)


def per_30s(total: dict, key: str) -> float | None:
    """The rule set's cost per 30 s: eval time with each group weighted by 30 s / its interval, and
    Prometheus' CPU for one evaluation of every group apportioned the same way."""
    once = total["eval_ms"]
    weighted = total.get("eval_ms_per_30s", once)
    if key == "eval_ms":
        return weighted
    cpu = total.get("cpu_ms")
    return None if cpu is None or not once else cpu * weighted / once


def rules_section(sizes: list[dict], key: str, head: list[str], title: str) -> list[str]:
    out = ["", f"{title} (samples touched / eval time)", ""]
    groups = sizes[0][key]["groups"]
    rows = []
    for i, g in enumerate(groups):
        every = "" if g.get("interval_s", 30) == 30 else f" (every {g['interval_s']:g} s)"
        rows.append(
            [g["name"] + every]
            + [_cell(s[key]["groups"][i]["samples"], s[key]["groups"][i]["eval_ms"]) for s in sizes]
        )
    totals = [s[key]["total"] for s in sizes]
    rows.append(["**every group once**"] + [f"**{_cell(t['samples'], t['eval_ms'])}**" for t in totals])
    if all("samples_per_30s" in t for t in totals):
        rows.append(
            ["samples per 30 s (groups by interval)"] + [_fmt_int(t["samples_per_30s"]) for t in totals]
        )
    if all("floor" in s[key] for s in sizes):
        floors = [s[key]["floor"] for s in sizes]
        rows.append(
            ["floor: each raw selector read once (per evaluation / per 30 s)"]
            + [f"{_fmt_int(f['samples'])} / {_fmt_int(f['samples_per_30s'])}" for f in floors]
        )
        rows.append(
            ["samples per 30 s / floor per 30 s"]
            + [
                f"{t['samples_per_30s'] / f['samples_per_30s']:.2f}x"
                for t, f in zip(totals, floors, strict=True)
            ]
        )
    rows.append(
        ["eval time per 30 s (groups by interval)"] + [f"{per_30s(t, 'eval_ms'):,.0f} ms" for t in totals]
    )
    rows.append(
        ["share of the 30 s interval"] + [f"{per_30s(t, 'eval_ms') / RULE_INTERVAL_MS:.2%}" for t in totals]
    )
    if all("cpu_ms" in t for t in totals):
        rows.append(
            ["Prometheus CPU per 30 s"]
            + [f"{per_30s(t, 'cpu'):,.0f} ms ({per_30s(t, 'cpu') / RULE_INTERVAL_MS:.2%})" for t in totals]
        )
    if all("concurrent_ms" in t for t in totals):
        rows.append(
            ["one cycle, groups and independent rules concurrent"]
            + [f"{t['concurrent_ms']:,.0f} ms" for t in totals]
        )
    rows.append(
        ["growth (eval time) vs previous size", "-"]
        + [f"x{b['eval_ms'] / a['eval_ms']:.2f}" for a, b in zip(totals, totals[1:], strict=False)]
    )
    out += _table(["group"] + head, rows)
    gpus = [s["shape"]["gpus"] for s in sizes]
    b_eval = growth_exponent(gpus, [t["eval_ms"] for t in totals])
    b_samples = growth_exponent(gpus, [t["samples"] for t in totals])
    if b_eval is not None:
        law = f"eval time b = {b_eval:.2f}, samples b = {b_samples:.2f}"
        if all("cpu_ms" in t for t in totals):
            law += f", Prometheus CPU b = {growth_exponent(gpus, [t['cpu_ms'] for t in totals]):.2f}"
        out += ["", f"Growth law (least squares, cost = a * GPUs^b): {law}."]
    return out


def costliest(side: dict, n: int = 10) -> list[dict]:
    """The `n` rules that cost most per 30 s: each rule's eval time weighted by 30 s / its group's
    interval, as the rule set's total is (a rule evaluated every minute counts half)."""
    rows = []
    for g in side["groups"]:
        weight = RULE_INTERVAL_MS / 1000 / g.get("interval_s", 30)
        seen: dict[str, int] = {}
        for r in g["rules"]:
            seen[r["name"]] = seen.get(r["name"], 0) + 1
            name = r["name"] if seen[r["name"]] == 1 else f"{r['name']} #{seen[r['name']]}"
            rows.append(
                {
                    "group": g["name"],
                    "interval_s": g.get("interval_s", 30),
                    "rule": name,
                    "samples": r["samples"],
                    "eval_ms": r["eval_ms"],
                    "eval_ms_per_30s": r["eval_ms"] * weight,
                }
            )
    return sorted(rows, key=lambda r: -r["eval_ms_per_30s"])[:n]


def costliest_section(sizes: list[dict], key: str, n: int = 10) -> list[str]:
    """Per size, the costliest rules per 30 s with their share of the rule set's eval time."""
    out = []
    for s in sizes:
        total = per_30s(s[key]["total"], "eval_ms") or 0.0
        out += ["", f"The {n} costliest rules per 30 s at {s['shape']['gpus']:,} GPUs:", ""]
        rows = [
            [
                str(i),
                r["rule"],
                r["group"] + ("" if r["interval_s"] == 30 else f" (every {r['interval_s']:g} s)"),
                _fmt_int(r["samples"]),
                f"{r['eval_ms']:.1f} ms",
                f"{r['eval_ms_per_30s']:.1f} ms",
                f"{r['eval_ms_per_30s'] / total:.1%}" if total else "-",
            ]
            for i, r in enumerate(costliest(s[key], n), start=1)
        ]
        out += _table(
            ["#", "rule", "group", "samples", "eval per evaluation", "eval per 30 s", "share of the set"],
            rows,
        )
    return out


def generation_table(generation: list[dict]) -> list[str]:
    rows = [
        [
            str(g["deployments"]),
            _fmt_int(g["rules"]),
            _fmt_int(g["files"]),
            f"{g['bytes'] / 2**20:.1f} MiB",
            f"{g['median_ms']:,.0f} ms"
            + (f" (CPU {g['cpu_median_ms']:,.0f} ms)" if "cpu_median_ms" in g else ""),
            f"{g['peak_python_mib']} MiB",
        ]
        for g in generation
    ]
    return _table(["deployments", "rules", "files", "output", "median", "peak Python heap"], rows)


def targets(results: dict) -> list[str]:
    """One line per target of issue 8, with how far the measurement is from it."""
    last = results["sizes"][-1]
    gpus = last["shape"]["gpus"]
    budget = RULE_INTERVAL_MS * RULE_TARGET_SHARE
    lines = []
    for key, name in (("rules_before", "before"), ("rules", "now")):
        if key not in last:
            continue
        total = last[key]["total"]
        wall, cpu = per_30s(total, "eval_ms"), per_30s(total, "cpu")
        judged = cpu if cpu is not None else wall
        lines.append(
            f"- Rule set ({name}) <= {RULE_TARGET_SHARE:.0%} of 30 s ({budget:.0f} ms) at {gpus:,} GPUs, per "
            f"30 s: eval time {wall:,.0f} ms ({wall / RULE_INTERVAL_MS:.2%})"
            + ("" if cpu is None else f", Prometheus CPU {cpu:,.0f} ms ({cpu / RULE_INTERVAL_MS:.2%})")
            + ": "
            + (
                "met."
                if judged <= budget
                else f"missed by {judged / budget:.2f}x (judged on CPU when measured)."
            )
        )
    for kind, label in (
        ("histogram", "Histogram-derived quantities >= 10x fewer samples"),
        ("gauge", "Gauges read once"),
    ):
        rows = [q for q in last["quantities"] if q["kind"] == kind and "error" not in q]
        met = [q for q in rows if quantity_target(kind, q["ratio"])[1] == "met"]
        lines.append(
            f"- {label}: {len(met)} of {len(rows)} met"
            + (
                ""
                if len(met) == len(rows)
                else ": " + ", ".join(f"{q['quantity']} {q['ratio']}x" for q in rows if q not in met)
            )
            + "."
        )
    example = last["anchors"].get("anchor-vllm-example")
    for key, view in (("dashboards", "All selected, its default"), ("dashboards_one_model", "one model")):
        serving = last[key].get("servewatch-vllm-serving")
        if not (serving and example):
            continue
        s, e = serving["default_view"], example["default_view"]
        verdict = "met" if s["samples"] < e["samples"] else f"missed, {s['samples'] / e['samples']:.1f}x more"
        lines.append(
            f"- vLLM dashboard view ({s['panels']} panels, {view}) touches fewer samples than vLLM's "
            f"example ({e['panels']} panels, one model): {_fmt_int(s['samples'])} vs "
            f"{_fmt_int(e['samples'])}: {verdict}."
        )
    return lines


def _costs(view: dict, whole: dict) -> tuple[int, float, float | None]:
    return view["samples"], view["eval_ms"], whole.get("cpu_ms")


def chart(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = results["sizes"]
    gpus = [s["shape"]["gpus"] for s in sizes]
    fig, axes = plt.subplots(1, 3, figsize=(17, 7))
    ax = axes[0]
    for i, g in enumerate(sizes[0]["rules"]["groups"]):
        weight = 30 / g.get("interval_s", 30)
        ax.plot(
            gpus, [s["rules"]["groups"][i]["eval_ms"] * weight for s in sizes], marker="o", label=g["name"]
        )
    sets = [("rules", "black", "all groups")]
    if all("rules_before" in s for s in sizes):
        sets.append(("rules_before", "grey", "all groups before"))
    for key, color, name in sets:
        totals = [s[key]["total"] for s in sizes]
        ax.plot(gpus, [per_30s(t, "eval_ms") for t in totals], marker="s", color=color, lw=2, label=name)
        if all("cpu_ms" in t for t in totals):
            cpu = [per_30s(t, "cpu") for t in totals]
            ax.plot(gpus, cpu, marker="s", color=color, ls=":", label=f"{name}, Prometheus CPU")
    ax.axhline(RULE_INTERVAL_MS * RULE_TARGET_SHARE, color="red", ls="--", label="target: 2% of 30 s")
    ax.set_title("Rule set, eval time per 30 s")
    ax.set_ylabel("ms")
    # name -> per size: (samples, eval ms, Prometheus CPU ms or None)
    series = {"rule set (one evaluation)": [_costs(s["rules"]["total"], s["rules"]["total"]) for s in sizes]}
    for uid in sizes[0].get("dashboards", {}):
        name = f"{uid.replace('servewatch-', '')} default view"
        series[name] = [
            _costs(s["dashboards"][uid]["default_view"], s["dashboards"][uid]["all_panels"]) for s in sizes
        ]
    if "dashboards_one_model" in sizes[0]:
        one = [s["dashboards_one_model"]["servewatch-vllm-serving"] for s in sizes]
        series["vllm-serving, one model"] = [_costs(d["default_view"], d["all_panels"]) for d in one]
    for uid in sizes[0].get("anchors", {}):
        name = uid.replace("anchor-", "anchor: ")
        series[name] = [
            _costs(s["anchors"][uid]["default_view"], s["anchors"][uid]["all_panels"]) for s in sizes
        ]
    with_cpu = all(c[2] is not None for vals in series.values() for c in vals)
    for ax, i, title in (
        (axes[1], 0, "Samples touched (dashboards: 1 h refresh)"),
        (axes[2], 2, "Prometheus CPU per refresh / evaluation")
        if with_cpu
        else (axes[2], 1, "Eval time (sum)"),
    ):
        for name, vals in series.items():
            style = "--" if name.startswith("anchor") else "-"
            ax.plot(gpus, [v[i] for v in vals], marker="o", ls=style, label=name)
        ax.set_title(title)
        ax.set_ylabel("samples" if i == 0 else "ms")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(gpus, [f"{g:,}" for g in gpus])
        ax.set_xlabel("GPUs (engines = GPUs / 8)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.suptitle(f"servewatch on a synthetic fleet, Prometheus 3.5 ({results['label']})")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def write(results: dict, md: Path, png: Path) -> None:
    md.write_text(render(results))
    try:
        import matplotlib  # noqa: F401  (the `bench` extra)
    except ModuleNotFoundError:  # the tables are the results; the chart only draws them
        print(f"bench: no matplotlib, {png.name} not drawn (pip install -e '.[bench]')", file=sys.stderr)
        return
    chart(results, png)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.report bench/results/<label>.json", file=sys.stderr)
        return 2
    path = Path(argv[0])
    results = json.loads(path.read_text())
    write(results, path.with_suffix(".md"), path.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
