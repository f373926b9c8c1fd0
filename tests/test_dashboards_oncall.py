"""What an on-call engineer needs from the dashboards at 3 a.m., read from the generated JSON.

Each test encodes one promise of issue 9: a healthy fleet shows values (problem lists say they are
empty), no panel adds up what cannot be added (bucket layouts, means of different models), every
panel of an alerted signal draws that alert's threshold as resolved from the specs, units say what
the values are, every panel says what it shows, links keep the datasource and cluster, variables
filter what they claim to, an alert's link opens the panel that shows its culprit, and the first
screen loads only the overview, from recording rules.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import promql_parser as pp
import pytest
import yaml

from servewatch import catalog, templates
from servewatch.lint import runner
from servewatch.lint.facts import LintContext
from servewatch.model import Model
from servewatch.plan import dashboards
from servewatch.promql import labels as promql_labels
from servewatch.plan.dashboards.context import UNITS
from servewatch.spec.dashboards import BOARDS
from test_dashboards import _boards, planned, selectors, substitute

REPO = Path(__file__).resolve().parents[1]
NAMES = tuple(BOARDS)
# Grafana's per-second units (Throughput and Data rate), and its custom count unit with a "/s" symbol
PER_SECOND = {"cps", "ops", "reqps", "rps", "wps", "iops", "eps", "mps", "recps", "rowsps", "Bps", "binBps"}
ANGULAR = {"graph", "singlestat", "table-old", "grafana-piechart-panel", "grafana-worldmap-panel"}
PANEL_TYPES = {"timeseries", "stat", "table", "heatmap", "bargauge", "gauge", "row"}
NOT_APPLY = "do not apply"  # how a vllm-serving row says the pod and engine variables do not narrow it


@pytest.fixture(scope="module")
def built(default_build):
    return default_build


@pytest.fixture(scope="module")
def boards(built):
    return _boards(built[1])


# Settings of the default specs changed at once, each read by its own test below: one validation
# instead of one per test. They touch different things (alert thresholds, the cluster label in the
# links, the datasource variable, the SM clock's unit).
TUNED = {
    "VLLMKVCacheUsageHigh": 0.91,
    "VLLMRequestsWaitingHigh": 33,
    "VLLMPreemptionsHigh": 2.5,
    "VLLMTimeToFirstTokenP95High": 3.5,
    "VLLMInterTokenLatencyP95High": 0.15,
    "VLLMEndToEndLatencyP95High": 45,
    "VLLMRequestErrorRateHigh": 0.07,
    "GPUFramebufferUsageHigh": 0.97,
}
DATASOURCE_REGEX = "/^prom-.*/"


@pytest.fixture(scope="module")
def tuned(specs_with):
    """(model, boards) of the default specs with TUNED's thresholds, a cluster label, a datasource
    regex and the framebuffer in bytes."""
    overrides = "overrides:\n  alerts:\n" + "".join(
        f"    {a}: {{threshold: {v}}}\n" for a, v in TUNED.items()
    )
    return planned(
        specs_with(
            {
                "overrides.yaml": overrides,
                "config.yaml": [
                    ("cluster_label: null", "cluster_label: cluster"),
                    ("fb_units: mib", "fb_units: bytes"),
                ],
                "dashboards.yaml": [('regex: ""', f"regex: {DATASOURCE_REGEX}")],
            }
        )
    )


def sections(board: dict):
    """(row title or "", whether the row is collapsed, panel) for every panel, nested ones included."""
    title, collapsed = "", False
    for p in board["panels"]:
        if p["type"] == "row":
            title, collapsed = p["title"], p["collapsed"]
            for child in p.get("panels", []):
                yield title, collapsed, child
        else:
            yield title, collapsed, p


def parse(expr: str):
    return pp.parse(substitute(expr))


def names_read(panel: dict) -> set[str]:
    return {s.name for t in panel["targets"] for s in selectors(parse(t["expr"]))}


def steps(panel: dict) -> list[float]:
    return [
        s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"] if s["value"] is not None
    ]


def labels_only(node) -> bool:
    """Whether the right side of a join only brings labels: a group() (every value 1), or the topk of
    one of them per identity (promql.builders.with_context)."""
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    if isinstance(node, pp.AggregateExpr) and str(node.op) == "topk" and node.param.val == 1:
        node = node.expr
    return isinstance(node, pp.AggregateExpr) and str(node.op) == "group"


def strip(node):
    """The series a panel shows under wrappers that keep its values: parentheses, max/min/topk over
    everything, sort, `x and on (...) condition`, `x or vector(0)`, a filter `x > 1` (no `bool`),
    `x * on (...) group_left (...) labels` (a group() of the labels a table or legend names)."""
    while True:
        if isinstance(node, pp.ParenExpr):
            node = node.expr
        elif isinstance(node, pp.BinaryExpr) and str(node.op) == "*" and labels_only(node.rhs):
            node = node.lhs
        elif (
            isinstance(node, pp.BinaryExpr)
            and str(node.op) in (">", ">=", "<", "<=", "==", "!=")
            and not (node.modifier and node.modifier.return_bool)
            and isinstance(node.rhs, pp.NumberLiteral)
        ):
            node = node.lhs
        elif isinstance(node, pp.AggregateExpr) and str(node.op) in ("max", "min", "topk", "bottomk"):
            if node.modifier and node.modifier.labels:
                return node
            node = node.expr
        elif isinstance(node, pp.Call) and node.func.name in ("sort", "sort_desc"):
            node = node.args[0]
        elif isinstance(node, pp.BinaryExpr) and str(node.op) in ("and", "or", "unless"):
            node = node.lhs
        else:
            return node


def quantile_matcher(sel) -> str | None:
    for m in sel.matchers.matchers:
        if m.name == "quantile":
            return m.value if m.op == pp.MatchOp.Equal else None
    return None


def shown_signals(expr: str, model) -> set[tuple[str, float | None]]:
    """(signal, quantile) a query shows as they are: the signal's recording rule (quantile None: all of
    a quantile signal's recorded quantiles), or a quantile computed live from its histogram."""
    node = strip(parse(expr))
    out = set()
    for name, sig in model.spec.signals.items():
        if isinstance(node, pp.VectorSelector) and node.name == sig.record:
            q = quantile_matcher(node)
            out.add((name, float(q) if q is not None else None))
        if (
            isinstance(node, pp.Call)
            and node.func.name == "histogram_quantile"
            and sig.kind == "quantile"
            and f"{sig.metric}_bucket" in {s.name for s in selectors(node)}
        ):
            out.add((name, float(node.args[0].val)))
    return out


def alerts_shown(panel: dict, model) -> list:
    """The enabled alerts whose signal (and quantile) one of the panel's queries shows."""
    shown = set().union(*(shown_signals(t["expr"], model) for t in panel["targets"]))
    return [
        a
        for a in model.alerts()
        if a.spec.signal and any(s == a.spec.signal and (q is None or q == a.spec.quantile) for s, q in shown)
    ]


# ---------------------------------------------------------------------------------------------
# a healthy fleet shows values; problem lists say they are empty
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_stats_that_count_problems_show_zero_not_no_data(boards, name):
    for _, _, p in sections(boards[name]):
        if p["type"] != "stat":
            continue
        for t in p["targets"]:
            node = parse(t["expr"])
            assert not (isinstance(node, pp.AggregateExpr) and str(node.op) == "count"), (
                f"{name} / {p['title']}: count() of nothing is no data, not 0: add `or vector(0)`"
            )


@pytest.mark.parametrize("name", NAMES)
def test_every_table_says_what_an_empty_table_means(boards, name):
    tables = [p for _, _, p in sections(boards[name]) if p["type"] == "table"]
    assert tables
    for p in tables:
        text = p["fieldConfig"]["defaults"].get("noValue") or ""
        assert len(text.split()) >= 3, f"{name} / {p['title']}: an empty table must say why ({text!r})"


# ---------------------------------------------------------------------------------------------
# nothing adds up what cannot be added
# ---------------------------------------------------------------------------------------------
def per_deployment_buckets() -> set[str]:
    return {f"{m.name}_bucket" for m in catalog.load().metrics.values() if m.buckets_per_deployment}


def records_of(names: set[str]) -> set[str]:
    """The generated recording rules that read any of `names`."""
    rules = [
        r
        for f in sorted((REPO / "rules").glob("*.rules.yaml"))
        for g in yaml.safe_load(f.read_text())["groups"]
        for r in g["rules"]
    ]
    return {
        r["record"] for r in rules if "record" in r and {s.name for s in selectors(parse(r["expr"]))} & names
    }


def test_length_heatmaps_show_one_model_per_panel(boards):
    varying = per_deployment_buckets()
    assert "vllm:request_prompt_tokens_bucket" in varying
    varying |= records_of(varying)  # the per-model bucket rates the heatmaps read
    heatmaps = [p for _, _, p in sections(boards["vllm-serving"]) if p["type"] == "heatmap"]
    checked = 0
    for p in heatmaps:
        for t in p["targets"]:
            sels = list(selectors(parse(t["expr"])))
            if not {s.name for s in sels} & varying:
                continue
            assert p.get("repeat") == "model", f"{p['title']}: repeat it per model"
            for s in sels:
                pinned = [m for m in s.matchers.matchers if m.name == "model_name"]
                assert pinned and pinned[0].op == pp.MatchOp.Equal, f"{p['title']}: {s.name} pins no model"
            checked += 1
    assert checked >= 2


def test_lint_finds_no_heatmap_bucket_mix_without_suppressions():
    ctx = LintContext(catalog.load(), scrape_interval_s=30, min_range_s=120)
    files = sorted(str(p) for p in (REPO / "rules").glob("*.rules.yaml"))
    files += [str(REPO / "dashboards" / f"{name}.json") for name in NAMES]
    result = runner.run(files, [], ctx, runner.select())
    assert [f for f in result.findings if f.check == "heatmap-bucket-mix"] == []
    assert "heatmap-bucket-mix" not in (REPO / ".servewatch-lint.yaml").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_stats_show_one_value_the_worst_or_the_total(built, boards, name):
    records = promql_labels.record_labels(built[0].records())
    for _, _, p in sections(boards[name]):
        if p["type"] != "stat":
            continue
        for t in p["targets"]:
            got = promql_labels.returned(t["expr"], records)
            per = sorted(got.known)
            assert not got.known and not got.open, (
                f"{name} / {p['title']}: a stat shows one value, not one per {per}"
            )


@pytest.mark.parametrize("name", NAMES)
def test_stacked_means_stack_one_model_at_a_time(boards, name):
    for _, _, p in sections(boards[name]):
        custom = p["fieldConfig"]["defaults"].get("custom", {})
        if custom.get("stacking", {}).get("mode", "none") == "none":
            continue
        for t in p["targets"]:
            if any(isinstance(n, pp.BinaryExpr) and str(n.op) == "/" for n in walk(parse(t["expr"]))):
                assert p.get("repeat") == "model", f"{name} / {p['title']}: stacks means of several models"


def walk(node):
    yield node
    for attr in ("expr", "lhs", "rhs", "vector_selector"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, str):
            yield from walk(child)
    for arg in getattr(node, "args", None) or []:
        yield from walk(arg)


# ---------------------------------------------------------------------------------------------
# tables: links that read a column, colours from the alert
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_table_links_read_columns_not_series_labels(boards, name):
    for _, _, p in sections(boards[name]):
        if p["type"] != "table":
            continue
        text = json.dumps(p["fieldConfig"])
        assert "${__field.labels." not in text, f"{name} / {p['title']}: use ${{__data.fields.<column>}}"


# ---------------------------------------------------------------------------------------------
# thresholds: drawn wherever an alerted signal is shown, as resolved (overrides included)
# ---------------------------------------------------------------------------------------------
def threshold_problems(boards: dict, model) -> tuple[list[str], int]:
    problems, checked = [], 0
    for name in NAMES:
        for _, _, p in sections(boards[name]):
            for alert in alerts_shown(p, model):
                checked += 1
                if alert.spec.threshold not in steps(p):
                    problems.append(
                        f"{name} / {p['title']}: no step at {alert.alert}'s {alert.spec.threshold}"
                    )
                style = p["fieldConfig"]["defaults"].get("custom", {}).get("thresholdsStyle", {})
                if p["type"] == "timeseries" and style.get("mode", "off") == "off":
                    problems.append(f"{name} / {p['title']}: the threshold of {alert.alert} is not drawn")
    return problems, checked


def test_every_panel_of_an_alerted_signal_draws_its_threshold(built, boards):
    problems, checked = threshold_problems(boards, built[0])
    assert not problems, "\n".join(problems)
    alerted = {a.alert for a in built[0].alerts() if a.spec.signal}
    shown = {a.alert for n in NAMES for _, _, p in sections(boards[n]) for a in alerts_shown(p, built[0])}
    assert shown == alerted  # the end-to-end latency alert (60 s) included
    assert checked >= 20


def test_thresholds_follow_the_overrides(tuned):
    model, boards = tuned
    assert {a.alert: a.spec.threshold for a in model.alerts() if a.alert in TUNED} == TUNED
    problems, checked = threshold_problems(boards, model)
    assert not problems, "\n".join(problems)
    assert checked >= 20


# ---------------------------------------------------------------------------------------------
# units
# ---------------------------------------------------------------------------------------------
def is_rate(node, rate_records: set[str]) -> bool:
    """Whether a query's values are per second: a rate() or a rate recording rule, summed or not."""
    while True:
        if isinstance(node, pp.ParenExpr):
            node = node.expr
        elif isinstance(node, pp.AggregateExpr) and str(node.op) in ("sum", "max", "min"):
            node = node.expr
        elif isinstance(node, pp.BinaryExpr) and str(node.op) in ("and", "or", "unless"):
            node = node.lhs
        else:
            break
    if isinstance(node, pp.Call):
        return node.func.name == "rate"
    return isinstance(node, pp.VectorSelector) and node.name in rate_records


@pytest.mark.parametrize("name", NAMES)
def test_rates_are_shown_per_second(built, boards, name):
    rate_records = {s.record for s in built[0].spec.signals.values() if s.kind == "rate"}
    checked = 0
    for _, _, p in sections(boards[name]):
        if p["type"] == "heatmap":  # its unit is the bucket's (tokens), the colour is the rate
            continue
        if any(is_rate(parse(t["expr"]), rate_records) for t in p["targets"]):
            unit = p["fieldConfig"]["defaults"]["unit"]
            assert unit in PER_SECOND or (unit.startswith("count:") and unit.endswith("/s")), (
                f"{name} / {p['title']}: a rate shown as {unit!r}"
            )
            checked += 1
    assert checked or name == "gpu-fleet"


def test_sm_clock_is_shown_in_the_profile_unit(tuned, boards):
    for fleet, unit in ((boards["gpu-fleet"], "MHz"), (tuned[1]["gpu-fleet"], "hertz")):
        clock = [p for _, _, p in sections(fleet) if p["title"] == "SM clock"]
        assert len(clock) == 1
        assert clock[0]["fieldConfig"]["defaults"]["unit"] == UNITS[unit]


# ---------------------------------------------------------------------------------------------
# descriptions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_panel_says_what_it_shows_reads_and_its_runbook(built, boards, name):
    model = built[0]
    problems = []
    for _, _, p in sections(boards[name]):
        text = p["description"]
        if len(re.findall(r"[.!?](?:\s|$)", text)) < 2:
            problems.append(f"{p['title']}: say what it shows and what to do ({text!r})")
        if not any(f"`{n}`" in text for n in names_read(p)):
            problems.append(f"{p['title']}: name what it reads ({sorted(names_read(p))})")
        for alert in alerts_shown(p, model):
            if alert.annotations["runbook_url"] not in text:
                problems.append(f"{p['title']}: link the runbook of {alert.alert}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# links and variables
# ---------------------------------------------------------------------------------------------
def board_links(board: dict):
    for _, _, p in sections(board):
        for link in p["fieldConfig"]["defaults"].get("links", []):
            yield p["title"], link["url"]


def test_links_between_dashboards_keep_the_datasource_and_cluster(tuned, boards):
    clustered = tuned[1]
    for variant, kept in ((boards, ["${datasource:queryparam}"]), (clustered, ["${cluster:queryparam}"])):
        seen = 0
        for name in NAMES:
            for title, url in board_links(variant[name]):
                params = [k for k, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)]
                for want in kept + ["${datasource:queryparam}"]:
                    assert want in params, f"{name} / {title}: {url} loses {want}"
                seen += 1
        assert seen >= 3


def test_pod_and_engine_narrow_every_vllm_panel_or_its_row_says_not(built, boards):
    model = built[0]
    vllm_records = {s.record for s in model.spec.signals.values() if s.level in ("engine", "model")}
    ignoring, honouring = [], 0
    for row, _, p in sections(boards["vllm-serving"]):
        for t in p["targets"]:
            marked = substitute(t["expr"], {"pod": "__pod__", "engine": "__engine__"})
            for s in selectors(pp.parse(marked)):
                if not (s.name.startswith("vllm:") or s.name in vllm_records):
                    continue
                narrowed = {m.name for m in s.matchers.matchers if m.value in ("__pod__", "__engine__")}
                if narrowed == {"pod", "engine"}:
                    honouring += 1
                    assert NOT_APPLY not in row, f"{row} / {p['title']}: the row says pod/engine do not apply"
                elif NOT_APPLY not in row:
                    ignoring.append(f"{row} / {p['title']}: {s.name} ignores $pod/$engine")
    assert not ignoring, "\n".join(ignoring)
    assert honouring >= 7  # the per-engine row; the length heatmaps read per-model records


def test_the_host_variable_lists_and_filters_both_host_spellings(boards):
    spellings = sorted(catalog.load().dcgm.host_labels)
    assert spellings == ["Hostname", "hostname"]
    fleet = boards["gpu-fleet"]
    host = next(v for v in fleet["templating"]["list"] if v["name"] == "host")
    assert all(s in host["query"] + host["regex"] for s in spellings), host
    filtered = 0
    for _, _, p in sections(fleet):
        for t in p["targets"]:
            if '"$host"' in t["expr"]:
                for s in spellings:
                    assert f'{s}=~"$host"' in t["expr"], f"{p['title']}: hosts spelt {s} are never matched"
                filtered += 1
    assert filtered >= 10


def test_datasource_variable_takes_the_configured_regex(tuned, boards):
    for board in boards.values():
        assert next(v for v in board["templating"]["list"] if v["name"] == "datasource")["regex"] == ""
    for board in tuned[1].values():
        ds = next(v for v in board["templating"]["list"] if v["name"] == "datasource")
        assert ds["regex"] == DATASOURCE_REGEX


# ---------------------------------------------------------------------------------------------
# an alert's link opens the panel that shows it
# ---------------------------------------------------------------------------------------------
def _view_panel(url: str) -> str | None:
    """The panel a dashboard_url opens, whichever labels fill its variables in (an absence alert sets
    each only inside a {{ with }})."""
    return dict(parse_qsl(urlsplit(templates.render(url, {}, None)).query)).get("viewPanel")


def test_every_alert_link_opens_the_panel_that_shows_the_alert(built, boards):
    model = built[0]
    by_uid = {b["uid"]: b for b in boards.values()}
    checked = 0
    for alert in model.alerts():
        url = alert.annotations.get("dashboard_url")
        if not url:
            continue
        parts = urlsplit(url)
        uid = parts.path.split("/")[2]
        view = _view_panel(url)
        assert view, f"{alert.alert}: {url} names no panel"
        panel = next((p for _, _, p in sections(by_uid[uid]) if str(p["id"]) == view), None)
        assert panel is not None, f"{alert.alert}: {uid} has no panel {view}"
        if alert.spec.signal:
            assert alert in alerts_shown(panel, model), f"{alert.alert}: {panel['title']} does not show it"
        else:
            assert alert.expr in [t["expr"] for t in panel["targets"]], f"{alert.alert}: {panel['title']}"
        checked += 1
    assert checked == len([a for a in model.alerts() if a.spec.dashboard])


def test_an_alert_set_per_deployment_adds_no_panel_and_every_copy_opens_its_panel(tmp_path, boards):
    """Teams give each deployment its own alerts (bench/generation_cost.py builds that): the dashboards
    keep their panels, link one runbook per signal, and every copy's link opens the original's panel."""
    from bench.generation_cost import scaled_specs

    model, scaled = planned(scaled_specs(3, REPO / "specs", tmp_path / "specs"))
    for name in NAMES:
        before = [(p["title"], p["description"].count("[Runbook:")) for _, _, p in sections(boards[name])]
        assert [
            (p["title"], p["description"].count("[Runbook:")) for _, _, p in sections(scaled[name])
        ] == before
    views = {}
    for alert in model.alerts():
        if alert.spec.dashboard:
            views.setdefault(alert.alert.split("Copy")[0], set()).add(
                _view_panel(alert.annotations["dashboard_url"])
            )
    assert views and all(len(ids) == 1 and None not in ids for ids in views.values()), views


# ---------------------------------------------------------------------------------------------
# what the anchors show, and the first screen
# ---------------------------------------------------------------------------------------------
def quantiles_of(panel: dict, model, metric: str) -> set[float]:
    out = set()
    recorded = {s.record: s for s in model.spec.signals.values() if s.kind == "quantile"}
    buckets = {f"{metric}_bucket"} | {
        s.record for s in model.spec.signals.values() if s.kind == "bucket_rate" and s.metric == metric
    }
    for t in panel["targets"]:
        node = strip(parse(t["expr"]))
        if (
            isinstance(node, pp.VectorSelector)
            and node.name in recorded
            and recorded[node.name].metric == metric
        ):
            q = quantile_matcher(node)
            out |= {float(q)} if q else set(recorded[node.name].quantiles)
        if isinstance(node, pp.Call) and node.func.name == "histogram_quantile":
            if buckets & {s.name for s in selectors(node)}:
                out.add(float(node.args[0].val))
    return out


def reads_mean(panel: dict, metric: str) -> bool:
    return any(
        {f"{metric}_sum", f"{metric}_count"} <= {s.name for s in selectors(parse(t["expr"]))}
        for t in panel["targets"]
    )


def test_latency_panels_show_p50_p90_p95_p99_and_the_mean(built, boards):
    serving = [p for _, _, p in sections(boards["vllm-serving"])]
    for metric in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_time_per_output_token_seconds",  # TPOT, per request
    ):
        full = [
            p
            for p in serving
            if {0.5, 0.9, 0.95, 0.99} <= quantiles_of(p, built[0], metric) and reads_mean(p, metric)
        ]
        assert full, f"no panel shows p50, p90, p95, p99 and the mean of {metric}"


def test_queue_prefill_and_decode_p95_are_shown(built, boards):
    serving = [p for _, _, p in sections(boards["vllm-serving"])]
    for phase in ("queue", "prefill", "decode"):
        metric = f"vllm:request_{phase}_time_seconds"
        assert any(0.95 in quantiles_of(p, built[0], metric) for p in serving), metric


def test_iteration_batch_size_heatmap(boards):
    heatmaps = [p for _, _, p in sections(boards["vllm-serving"]) if p["type"] == "heatmap"]
    assert any("vllm:iteration_tokens_total_bucket" in names_read(p) for p in heatmaps)


def test_target_health_stat_per_source(built, boards):
    targets = built[0].config.targets
    for name, source in (("vllm-serving", "vllm"), ("gpu-fleet", "dcgm")):
        up = [
            p
            for _, _, p in sections(boards[name])
            if p["type"] == "stat"
            and any(
                s.name == "up" and targets[source] in t["expr"]
                for t in p["targets"]
                for s in selectors(parse(t["expr"]))
            )
        ]
        assert up, f"{name}: no stat of {source}'s `up`"


@pytest.mark.parametrize("name", NAMES)
def test_the_first_screen_is_the_overview_and_the_rest_is_collapsed(boards, name):
    rows = [p for p in boards[name]["panels"] if p["type"] == "row"]
    assert rows[0]["gridPos"]["y"] == 0 and not rows[0]["collapsed"]
    assert all(r["collapsed"] and r["panels"] for r in rows[1:]), [r["title"] for r in rows]
    assert len(rows) >= 3
    top = [p for p in boards[name]["panels"] if p["type"] != "row"]
    assert top and all(p["type"] in ("stat", "bargauge", "gauge") or p["gridPos"]["h"] <= 8 for p in top)


@pytest.mark.parametrize("name", NAMES)
def test_the_first_screen_reads_recording_rules_where_one_exists(built, boards, name):
    model = built[0]
    computed_live = set()
    for s in model.spec.signals.values():
        if s.kind == "quantile":
            computed_live.add(f"{s.metric}_bucket")
        elif s.kind == "matched_ratio":
            computed_live.add(model.builder.metric_name(s.numerator))
        else:
            computed_live.add(model.builder.metric_name(s.metric))
    for _, collapsed, p in sections(boards[name]):
        if collapsed:
            continue
        for t in p["targets"]:
            for s in selectors(parse(t["expr"])):
                assert not s.name.endswith("_bucket"), (
                    f"{name} / {p['title']}: raw histogram on the first screen"
                )
                assert s.name not in computed_live, f"{name} / {p['title']}: {s.name} has a recording rule"


@pytest.mark.parametrize("name", NAMES)
def test_no_angular_panel_types(boards, name):
    types = {p["type"] for p in boards[name]["panels"]} | {p["type"] for _, _, p in sections(boards[name])}
    assert types <= PANEL_TYPES and not types & ANGULAR, types


# ---------------------------------------------------------------------------------------------
# optional panels, declared once
# ---------------------------------------------------------------------------------------------
OPTIONAL = [(b, k) for b in NAMES for k in type(BOARDS[b].panels).model_fields]


def titled_ids(board: dict) -> dict[str, int]:
    return {p["title"]: p["id"] for _, _, p in sections(board)}


@functools.cache  # each test here reads it, none changes it
def switched_off(model, board: str, panel: str) -> dict:
    """`board` planned from the default specs with `panel` switched off (the setting changed on the
    loaded specs: test_optional_panels_switched_off_in_the_specs_file proves the file's keys)."""
    settings = model.spec.dashboards
    field = next(n for n, f in type(settings).model_fields.items() if f.alias == board)
    old = settings.board(board)
    new = old.model_copy(update={"panels": old.panels.model_copy(update={panel: False})})
    spec = dataclasses.replace(model.spec, dashboards=settings.model_copy(update={field: new}))
    assert not spec.dashboards.shows(board, panel) and model.spec.dashboards.shows(board, panel)
    return dashboards.build(Model(spec))[board]


@pytest.mark.parametrize("board, panel", OPTIONAL)
def test_each_optional_panel_switches_panels_off_and_renumbers_nothing(built, boards, board, panel):
    after = titled_ids(switched_off(built[0], board, panel))
    before = titled_ids(boards[board])
    assert set(after) < set(before), f"switching {panel} off hides nothing"
    assert all(before[t] == i for t, i in after.items())


def test_optional_panels_switched_off_in_the_specs_file(specs_with, built, boards):
    """Every optional panel switched off in specs/dashboards.yaml at once: the specs still validate,
    and each board shows exactly the panels no single switch hides, under the same ids."""
    edits = [(f"{panel}: true", f"{panel}: false") for _, panel in OPTIONAL]
    _, off = planned(specs_with({"dashboards.yaml": edits}))
    for name in NAMES:
        before = titled_ids(boards[name])
        kept = set(before).intersection(
            *(titled_ids(switched_off(built[0], b, p)) for b, p in OPTIONAL if b == name)
        )
        assert titled_ids(off[name]) == {t: before[t] for t in kept}, name


# ---------------------------------------------------------------------------------------------
# docs/dashboards.md: a table per dashboard of its rows and panels
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_docs_table_lists_every_panel_of_the_dashboard(boards, name):
    text = (REPO / "docs" / "dashboards.md").read_text()
    section = text.split(f"(`{BOARDS[name].uid}`)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "**" in line]
    documented = [re.search(r"\*\*(.+?)\*\*", line).group(1) for line in rows]
    generated = [p["title"] for _, _, p in sections(boards[name])]
    assert documented == generated
    assert all(line.count("|") == 4 and line.split("|")[3].strip() for line in rows)  # each says what for


# ---------------------------------------------------------------------------------------------
# recording rules are read as soon as they exist, whatever they are called
# ---------------------------------------------------------------------------------------------
ENGINE = "namespace, pod, model_name, engine"
TTFT = "vllm:time_to_first_token_seconds"
# what issue 8 asks for: bucket rates per engine and per model, per-engine quantiles, token rates
SCALE_RULES = {
    "engine:ttft_bucket:rate5m": f"max by ({ENGINE}, le) (rate({TTFT}_bucket[5m]))",
    "model:ttft_bucket:rate5m": (
        f"sum by (namespace, model_name, le) (max by ({ENGINE}, le) (rate({TTFT}_bucket[5m])))"
    ),
    "model:ttft_count:rate5m": f"sum by (namespace, model_name) (max by ({ENGINE}) (rate({TTFT}_count[5m])))",
    "engine:ttft:p95": (  # guarded as servewatch's own quantile rules: no NaN for an idle engine
        f"histogram_quantile(0.95, max by ({ENGINE}, le) (rate({TTFT}_bucket[5m])))"
        f" and on ({ENGINE}) max by ({ENGINE}) (rate({TTFT}_count[5m])) > 0"
    ),
    "model:prompt_tokens:rate5m": "sum by (namespace, model_name) (rate(vllm:prompt_tokens_total[5m]))",
}


def with_scale_rules(model, monkeypatch):
    from servewatch.model import RecordRule

    records = model.records()
    extra = [RecordRule(name, expr) for name, expr in SCALE_RULES.items()]
    monkeypatch.setattr(model, "records", lambda: [*records, *extra])
    return model


def test_bucket_rate_and_quantile_rules_are_read_once_they_exist(built, monkeypatch):
    # a model of its own: the session's is shared, and a model keeps what it plans
    boards = dashboards.build(with_scale_rules(Model(built[0].spec), monkeypatch))
    serving = {p["title"]: p for _, _, p in sections(boards["vllm-serving"])}
    p90 = serving["Time to first token"]["targets"][1]["expr"]
    assert "histogram_quantile(0.9, model:ttft_bucket:rate5m{" in p90 and f"{TTFT}_bucket" not in p90
    assert "model:ttft_count:rate5m{" in p90  # the `observed > 0` guard too
    # a per-engine quantile rule serves the per-engine panel as it is (the default specs record one)
    per_engine = serving["Time to first token p95 per engine"]["targets"][0]["expr"]
    recorded = ("engine:ttft:p95{", "engine:vllm_time_to_first_token_seconds:histogram_quantile_rate5m{")
    assert per_engine.startswith(recorded) and 'pod=~"$pod"' in per_engine
    # a per-model rule cannot narrow by pod: the per-engine queue p95 stays live; heatmaps by pod too
    tokens = serving["Token throughput"]["targets"][0]["expr"]
    assert tokens.startswith("model:prompt_tokens:rate5m{")  # fewer series than the per-engine rule
    assert "model:ttft_bucket" not in json.dumps(serving["Prompt length: $model"])
