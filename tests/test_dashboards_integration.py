"""Every dashboard query on a real Prometheus 3.5 holding synthetic fleets and the recording rules.

Three kinds of data, each backfilled into its own Prometheus:

* the busy fleet (servewatch_testkit.synth.fleet: three hosts, full GPUs and MIG instances, one GPU
  scraped by two jobs, two exporter versions (Hostname / hostname), two models with data-parallel
  engines and a pod restart) as it is: busy, and nothing wrong with it. Every panel target must return
  data carrying the labels its legend names, except the problem lists, which must be empty and say so;
* the same fleet with troubles on top: a model that generates no tokens on a GPU with an XID, and the
  ALERTS series Prometheus would have written while alerts fired, so the problem lists have rows. A few
  panels are checked against the exact values the synthetic data implies;
* each incident of servewatch_testkit.synth.INCIDENTS: every alert that fires there opens, through its
  dashboard_url, a panel that shows the culprit (the alert's labels and value, at the top).

Queries are evaluated at each scenario's last step with the variables set as a user (or an alert's
link) would set them; a panel repeated per model is evaluated once per model.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
import yaml

from servewatch import rule_slices, templates
from servewatch.model import Model
from servewatch.plan import dashboards
from servewatch_testkit import ahead, rule_reads, synth
from servewatch_testkit.ahead import Ahead
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import INCIDENTS, incident, truth
from test_dashboards_oncall import SCALE_RULES, with_scale_rules

fleet_mod = importlib.import_module(
    "servewatch_testkit.synth.fleet"
)  # the package re-exports fleet() over the module

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

REPO = Path(__file__).resolve().parents[1]
NAMES = ("vllm-serving", "gpu-fleet", "moe-deployment")
WINDOW = "5m"  # what $__rate_interval becomes (Grafana: max(interval + scrape, 4 x scrape))
WINDOW_S = 300.0
RANGE = "6h"
IDLE_NS, IDLE_POD, IDLE_MODEL, IDLE_HOST = "batch", "idle-llm-6d5f7c9b8-q2w4e", "acme/idle-7b", "gpu-node-d"
XID_CODE = 79
VAR_RE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")
LABEL_VALUES_RE = re.compile(r"^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$", re.S)
QUERY_RESULT_RE = re.compile(r"^query_result\((.*)\)$", re.S)
LEGEND_RE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
ALTERNATIVES = ({"Hostname", "hostname"},)  # either spelling names the host
MIG_ONLY = {"GPU_I_PROFILE", "GPU_I_ID"}  # absent on full GPUs
# The tables that list what is wrong (reviewed by eye): empty on a healthy fleet, and saying so.
PROBLEM_LISTS = {
    "vllm-serving": {
        "vLLM targets down or without metrics",
        "vLLM engines with work in flight and no progress",
        "vLLM metrics the alerts read, missing",
        "vLLM engines seen recently, gone while their target is up",
        # not "vLLM engines idle while a sibling rank serves": pod A's engine 1 gets no requests while
        # engine 0 is hot, which that list rightly shows
    },
    "gpu-fleet": {
        "dcgm-exporter targets down",
        "dcgm-exporter GPUs and MIG instances seen recently, gone while their target is up",
        "GPUs or exporters without both fb_used and fb_free",
        "GPUs with recent XIDs",
        "Last XID per GPU",
    },
    "moe-deployment": {"Alerts firing for this deployment"},
}
SERVING_MODELS = (fleet_mod.DEEPSEEK, fleet_mod.MIXTRAL)  # the fleet's models with traffic


def grafana_regex(value: str) -> str:
    """A variable value as Grafana interpolates it into a Prometheus regex matcher."""
    escaped = re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", value)
    return escaped.replace("\\", "\\\\")


def interpolate(expr: str, values: dict[str, str]) -> str:
    """Grafana's macros and variables; `${x:raw}` takes the value as it is (`values["x:raw"]`)."""
    expr = expr.replace("$__rate_interval", WINDOW).replace("$__interval", "1m").replace("$__range", RANGE)

    def sub(m):
        name, fmt = m.group(1) or m.group(3), m.group(2)
        if name.isdigit():
            return m.group(0)
        key = f"{name}:{fmt}" if fmt else name
        assert key in values, f"no value for ${key} in {expr[:80]}"
        return values[key]

    return VAR_RE.sub(sub, expr)


def all_panels(board: dict) -> list[dict]:
    """Every panel (not rows), those of collapsed rows included."""
    return [q for p in board["panels"] for q in [p, *p.get("panels", [])] if q["type"] != "row"]


def copies(panel: dict, values: dict[str, str], models=SERVING_MODELS) -> list[dict[str, str]]:
    """The variable values of each copy Grafana draws of a panel: one per model when it repeats."""
    if panel.get("repeat") != "model":
        return [values]
    return [{**values, "model": grafana_regex(m), "model:raw": m} for m in models]


def _extra_series(scenario) -> list:
    """A model that generates nothing on a GPU that reported an XID, and ALERTS series."""
    steps, step = scenario.steps, scenario.step
    out = synth.vllm_engine(
        IDLE_NS, IDLE_POD, IDLE_MODEL, 0, steps=steps, step=step, requests=0, kv_usage=0.1, prior_steps=100
    )
    out += synth.dcgm_gpu(
        IDLE_HOST,
        0,
        synth.stable_uuid("test", IDLE_HOST),
        20480,
        60506,
        steps=steps,
        step=step,
        pod=IDLE_POD,
        namespace=IDLE_NS,
        xid=synth.step_fn(0, {100: XID_CODE}),
        targets=[synth.dcgm_target(IDLE_HOST)],
    )
    gpus, engines = scenario.truth["gpus"], scenario.truth["engines"]
    firing = lambda i: 1 if i >= 70 else None  # noqa: E731
    a0, c2 = gpus["a0"], gpus["c2_mig1"]
    alerts = [
        {
            "alertname": "VLLMKVCacheUsageHigh",
            "severity": "warning",
            **{k: engines["a0"][k] for k in ("namespace", "pod", "model_name", "engine")},
        },
        {
            "alertname": "GPUFramebufferUsageHigh",
            "severity": "warning",
            "UUID": a0["UUID"],
            "gpu": a0["gpu"],
            "Hostname": a0["host"],
            "exported_namespace": a0["namespace"],
            "exported_pod": a0["pod"],
        },
        {
            "alertname": "VLLMTimeToFirstTokenP95High",
            "severity": "warning",
            "namespace": engines["m0"]["namespace"],
            "model_name": engines["m0"]["model_name"],
            "quantile": "0.95",
        },
        {
            "alertname": "GPUFramebufferUsageHigh",
            "severity": "warning",
            "UUID": c2["UUID"],
            "gpu": c2["gpu"],
            "GPU_I_ID": c2["GPU_I_ID"],
            "exported_namespace": c2["namespace"],
            "exported_pod": c2["pod"],
        },
    ]
    out += [
        synth.Series("ALERTS", {**labels, "alertstate": "firing"}, [firing(i) for i in range(steps)])
        for labels in alerts
    ]
    return out


@dataclass
class Env:
    prom: LocalPrometheus
    t: float
    scenario: object
    extra: list
    boards: dict[str, dict]
    model: Model


def _rule_files(files: dict[str, str], folder: Path) -> list[Path]:
    out = []
    for path, text in sorted(files.items()):
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", path):
            out.append(folder / Path(path).name)
            out[-1].write_text(text)
    assert out
    return out


def _start(scenario, extra: list, model: Model, boards: dict, rule_files: list[Path]) -> Env:
    start = backfill_start(scenario.steps, scenario.step)
    openmetrics = synth.to_openmetrics(list(scenario) + extra, start, scenario.step)
    prom = LocalPrometheus(openmetrics, rule_files=rule_files).start()
    return Env(prom, scenario.time_at(start, scenario.eval_step), scenario, extra, boards, model)


def incident_server(name: str, names: set[str] | None, rule_files: list[Path], reuse: Path) -> tuple:
    """(scenario, start, its Prometheus, not started) of incident `name`: the series named in
    `names` (all of them for None) and `rule_files` (named as generated), backfilled in `reuse`.
    test_alerts_on_incidents serves its incidents here too, so a session builds each one's blocks
    once for both modules (servewatch_testkit.kept_data)."""
    scenario = rule_reads.read_by_rules(incident(name), names)
    start = backfill_start(scenario.steps, scenario.step)
    prom = LocalPrometheus(scenario.openmetrics(start), rule_files=rule_files, reuse=reuse)
    return scenario, start, prom


def boards_of(files: dict[str, str]) -> dict[str, dict]:
    """Every board an alert links to: the three, and the SLO board the burn-rate alerts open."""
    return {n: json.loads(files[f"dashboards/{n}.json"]) for n in (*NAMES, "slo")}


def _board_queries(board: dict) -> list[str]:
    """Every PromQL query a board makes (panels, annotations, variables), with its variables at All."""
    values = {**ALL, "model:raw": ".*"}
    exprs = [t["expr"] for p in all_panels(board) for t in p.get("targets", [])]
    exprs += [a["expr"] for a in board["annotations"]["list"] if a.get("expr")]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            m = LABEL_VALUES_RE.match(v["query"]) or QUERY_RESULT_RE.match(v["query"])
            exprs.append(m.group(1) if m else v["query"])
    return [interpolate(e, values) for e in exprs]


def _rule_files_read(rule_files: list[Path], boards: list[dict]) -> list[Path]:
    """The rule files that record something `boards` read, directly or through other records: a fleet
    server backfills only those (each file more is a backfill stage more, rule_stages.py); all of
    them when a query or a rule selects a series it does not name."""
    try:
        wanted = {n for board in boards for e in _board_queries(board) for n in rule_slices.read_names(e)}
        defined = {
            rule["record"]: (path, rule_slices.read_names(rule["expr"]))
            for path in rule_files
            for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"]
            if "record" in rule
        }
    except rule_slices.Unsliceable:
        return rule_files
    todo, seen = list(wanted & set(defined)), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n for n in defined[name][1] if n in defined]
    return [path for path in rule_files if any(defined[r][0] == path for r in seen)]


QUEUE_PANEL = ("vllm-serving", "Queue, prefill and decode p95")  # test_queue_and_prefill_... reads it


def incident_reads(model: Model, boards: dict, rule_files: list[Path]) -> set[str] | None:
    """The metric names the incident tests can see: what the rules read (the alerts' expressions
    too), and what the panels read that an alert's dashboard_url opens (and QUEUE_PANEL); None
    (everything) when one of them selects a series it does not name. An incident server holds only
    those series (servewatch_testkit.rule_reads): about half of them, and no answer changes."""
    names = rule_reads.selected_names(rule_files)
    by_uid = {b["uid"]: b for b in boards.values()}
    opened = [panel for panel in all_panels(boards[QUEUE_PANEL[0]]) if panel["title"] == QUEUE_PANEL[1]]
    for alert in model.alerts():
        url = urlsplit(alert.annotations.get("dashboard_url") or "")
        if url.path:
            view = dict(parse_qsl(url.query))["viewPanel"]
            opened += [p for p in all_panels(by_uid[url.path.split("/")[2]]) if str(p["id"]) == view]
    values = {**ALL, "model:raw": ".*"}
    try:
        shown = {
            n
            for p in opened
            for t in p["targets"]
            for n in rule_slices.read_names(interpolate(t["expr"], values))
        }
    except rule_slices.Unsliceable:
        return None
    return None if names is None else names | shown


# servers prepared at once (servewatch_testkit.ahead): a backfill mostly waits, it computes little
PREPARING = len(os.sched_getaffinity(0)) + 1
FLEETS = ("busy", "env")  # the fleet as it is, and with troubles on top; the rest are incidents


@pytest.fixture(scope="module")
def servers(request, tmp_path_factory, default_build, prometheus_data):
    """name -> Env: "busy" (the fleet as it is: busy, nothing wrong, and the recording rules issue 8
    asks for, loaded), "env" (the fleet with troubles on top, see _extra_series) and one per incident;
    each its own Prometheus, prepared in the background in the order the selected tests ask for them,
    all stopped when the module ends."""
    model, files = default_build
    boards = boards_of(files)
    rule_files = _rule_files(files, tmp_path_factory.mktemp("rules"))
    more = tmp_path_factory.mktemp("more") / "more.rules.yaml"
    group = {"name": "more", "rules": [{"record": r, "expr": e} for r, e in SCALE_RULES.items()]}
    more.write_text(yaml.safe_dump({"groups": [group]}))

    # the fleet tests read the three boards only: not the SLO records, say, three backfill stages
    fleet_rules = _rule_files_read(rule_files, [boards[n] for n in NAMES])

    read = incident_reads(model, boards, rule_files)

    def make(name: str) -> Env:
        if name == "busy":
            return _start(synth.fleet(), [], model, boards, [*fleet_rules, more])
        if name == "env":
            scenario = synth.fleet()
            return _start(scenario, _extra_series(scenario), model, boards, fleet_rules)
        scenario, start, prom = incident_server(name, read, rule_files, prometheus_data)
        return Env(prom.start(), scenario.time_at(start, scenario.eval_step), scenario, [], boards, model)

    fixtures = [f for f in FLEETS if any(f in item.fixturenames for item in _module_items(request))]
    incidents = [n for n in ahead.asked(request) if n in INCIDENTS]  # not the boards of the fleet tests
    prepared = Ahead(make, [*fixtures, *incidents], PREPARING)
    yield prepared
    prepared.close(lambda e: e.prom.close())


def _module_items(request) -> list:
    return [item for item in request.session.items if item.module is request.module]


@pytest.fixture(scope="module")
def busy(servers):
    return servers("busy")


@pytest.fixture(scope="module")
def env(servers):
    return servers("env")


ALL = {
    "datasource": "prometheus",
    "namespace": ".*",
    "model": ".*",
    "pod": ".*",
    "engine": ".*",
    "host": ".*",
    "uuid": ".*",
}


def moe_values() -> dict[str, str]:
    return {**ALL, "namespace": grafana_regex(fleet_mod.NS), "model": grafana_regex(fleet_mod.DEEPSEEK)}


def run(env, expr: str, values: dict[str, str]) -> list[dict]:
    return env.prom.query(interpolate(expr, values), env.t)


def panel(env, board: str, title: str) -> dict:
    return next(p for p in all_panels(env.boards[board]) if p["title"] == title)


def by_title(env, board: str, title: str, values: dict[str, str], ref: int = 0) -> list[dict]:
    return run(env, panel(env, board, title)["targets"][ref]["expr"], values)


def value(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def _legend_problems(legend: str, result: list[dict]) -> list[str]:
    used = set(LEGEND_RE.findall(legend))
    problems = []
    for series in result:
        labels = series["metric"]
        for label in used - MIG_ONLY - set().union(*ALTERNATIVES):
            if not labels.get(label):
                problems.append(f"series {labels} has no {label!r}")
        for group in ALTERNATIVES:
            if used & group and not any(labels.get(x) for x in group):
                problems.append(f"series {labels} has none of {sorted(group)}")
    return problems


def panel_problems(
    query, board: dict, values: dict[str, str], problem_lists: set[str] | None, models=SERVING_MODELS
) -> list[str]:
    """Every target of every panel (each copy of a repeated one, one per model of `models`), run
    with `query(expr)`: it returns data with the labels its legend names. A problem list (by title)
    must instead be empty and say so; with `problem_lists` None, problem lists are not checked."""
    problems = []
    for p in all_panels(board):
        listing = p["type"] == "table" and p["fieldConfig"]["defaults"].get("noValue")
        for copy in copies(p, values, models):
            for t in p["targets"]:
                result = query(interpolate(t["expr"], copy))
                where = f"{board['uid']} / {p['title']} / {t['refId']}"
                if problem_lists is not None and p["title"] in problem_lists:
                    if result or not listing:
                        problems.append(f"{where}: a problem list, {len(result)} rows, says {listing!r}")
                elif not result:
                    if problem_lists is None and listing:
                        continue  # a table that may be empty, and says what that means
                    problems.append(f"{where}: no data ({copy.get('model:raw', 'every model')})")
                elif t["format"] in ("time_series", "heatmap"):
                    problems += [f"{where}: {x}" for x in _legend_problems(t["legendFormat"], result)]
    return problems


# ---------------------------------------------------------------------------------------------
# a busy, healthy fleet: every panel shows data, problem lists are empty and say so
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_on_a_busy_healthy_fleet_every_panel_shows_data(busy, name):
    values = moe_values() if name == "moe-deployment" else ALL
    lists = {
        p["title"]
        for p in all_panels(busy.boards[name])
        if p["type"] == "table" and p["fieldConfig"]["defaults"].get("noValue")
    }
    assert PROBLEM_LISTS[name] <= lists
    problems = panel_problems(
        lambda e: busy.prom.query(e, busy.t), busy.boards[name], values, PROBLEM_LISTS[name]
    )
    assert not problems, "\n".join(problems)


FIELD_LABEL_RE = re.compile(r"\$\{__(?:field\.labels|data\.fields)\.([^}]+)\}")
WORKLOAD = {"exported_namespace", "exported_pod", "exported_container"}  # dcgm-exporter's, on held GPUs only


def _field_labels(panel: dict) -> set[str]:
    """Labels (or table columns) the panel's links fill dashboard variables from."""
    return set(FIELD_LABEL_RE.findall(json.dumps({k: v for k, v in panel.items() if k != "targets"})))


@pytest.mark.parametrize("name", NAMES)
def test_every_link_field_label_is_on_the_panels_series(env, name):
    """A link that fills a variable from a series label or a table column gets a value on every row."""
    values = moe_values() if name == "moe-deployment" else ALL
    problems, checked = [], 0
    for p in all_panels(env.boards[name]):
        wanted = _field_labels(p)
        for t in p.get("targets", []) if wanted else []:
            result = run(env, t["expr"], values)
            assert result, f"{name} / {p['title']}: no data"
            for label in wanted:
                if not any(r["metric"].get(label) for r in result):
                    problems.append(f"{name} / {p['title']}: no series has {label!r}")
                # an idle GPU (no pod holds it) has no workload labels: the only series allowed without
                problems += [
                    f"{name} / {p['title']}: {r['metric']} has no {label!r}"
                    for r in result
                    if not r["metric"].get(label)
                    and not (label in WORKLOAD and not r["metric"].get("exported_pod"))
                ]
            checked += 1
    assert not problems, "\n".join(problems)
    assert checked >= 1


@pytest.mark.parametrize("name", NAMES)
def test_every_annotation_query_runs(env, name):
    values = moe_values() if name == "moe-deployment" else ALL
    for a in env.boards[name]["annotations"]["list"]:
        if a.get("expr"):
            result = run(env, a["expr"], values)
            assert result and all(r["metric"]["alertstate"] == "firing" for r in result), a["name"]


def variable_values(env, variable: dict, values: dict[str, str]) -> set[str]:
    """What Grafana lists: label_values(selector, label) through the series API over the time range,
    query_result(expr) as the text of an instant query's series, through the variable's regex."""
    lv = LABEL_VALUES_RE.match(variable["query"])
    if lv:
        selector, label = lv.groups()
        return set(
            env.prom.api(
                f"/api/v1/label/{label}/values",
                **{
                    "match[]": interpolate(selector, values),
                    "start": str(env.t - 6 * 3600),
                    "end": str(env.t),
                },
            )
        )
    expr = QUERY_RESULT_RE.match(variable["query"]).group(1)
    regex = re.compile(variable["regex"].strip("/"))
    out = set()
    for series in env.prom.query(interpolate(expr, values), env.t):
        text = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(series["metric"].items())) + "}"
        out |= {m.group(1) for m in regex.finditer(text)}
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_variable_query_lists_values(env, name):
    values = moe_values() if name == "moe-deployment" else ALL
    listed = {}
    for v in env.boards[name]["templating"]["list"]:
        if v["type"] != "query":
            continue
        listed[v["name"]] = variable_values(env, v, values)
        assert listed[v["name"]], f"{name} variable {v['name']}: {v['query']} lists nothing"
    sc = env.scenario.truth
    if name == "vllm-serving":
        assert {fleet_mod.NS, IDLE_NS} <= listed["namespace"]
        assert {fleet_mod.DEEPSEEK, fleet_mod.MIXTRAL, IDLE_MODEL} <= listed["model"]
        assert {sc["restart"]["old_pod"], sc["restart"]["new_pod"]} <= listed["pod"]  # in the 6 h range
        assert listed["engine"] == {"0", "1"}
    elif name == "gpu-fleet":
        # gpu-node-c's exporter spells the label `hostname`: listed all the same
        assert {"gpu-node-a", "gpu-node-b", "gpu-node-c", IDLE_HOST} == listed["host"]
        assert {g["UUID"] for g in sc["gpus"].values()} <= listed["uuid"]
        assert {fleet_mod.NS, "rag", IDLE_NS} == listed["namespace"]
        only_c = variable_values(env, _variable(env, name, "uuid"), {**values, "host": "gpu-node-c"})
        assert only_c == {g["UUID"] for g in sc["gpus"].values() if g["host"] == "gpu-node-c"}
    else:
        assert {fleet_mod.NS, IDLE_NS} <= listed["namespace"]
        # asked with namespace=llm-serving: that namespace's deployments only
        assert listed["model"] == {fleet_mod.DEEPSEEK, fleet_mod.MIXTRAL}


def _variable(env, board: str, name: str) -> dict:
    return next(v for v in env.boards[board]["templating"]["list"] if v["name"] == name)


def test_the_host_variable_narrows_every_gpu_panel_under_either_spelling(env):
    """gpu-node-c spells its host label `hostname`, the config says `Hostname`: selecting it still
    narrows every GPU panel to its GPUs."""
    gpus = env.scenario.truth["gpus"]
    on_c = {g["UUID"] for g in gpus.values() if g["host"] == "gpu-node-c"}
    ratio = by_title(
        env, "gpu-fleet", "Framebuffer used per GPU / MIG instance", {**ALL, "host": "gpu-node-c"}
    )
    assert {r["metric"]["UUID"] for r in ratio} == on_c
    temp = by_title(env, "gpu-fleet", "GPU temperature", {**ALL, "host": "gpu-node-c"})
    assert {r["metric"]["UUID"] for r in temp} == on_c
    a_only = by_title(env, "gpu-fleet", "GPU temperature", {**ALL, "host": "gpu-node-a"})
    assert {r["metric"]["UUID"] for r in a_only} == {
        g["UUID"] for g in gpus.values() if g["host"] == "gpu-node-a"
    }


# ---------------------------------------------------------------------------------------------
# exact values
# ---------------------------------------------------------------------------------------------
def test_framebuffer_ratio_of_a_known_gpu_and_mig_instance(env):
    gpus = env.scenario.truth["gpus"]
    title = "Framebuffer used per GPU / MIG instance"
    a0 = by_title(env, "gpu-fleet", title, {**ALL, "uuid": gpus["a0"]["UUID"]})
    assert math.isclose(value(a0), gpus["a0"]["fb_ratio"], rel_tol=1e-12)
    assert a0[0]["metric"]["Hostname"] == "gpu-node-a" and a0[0]["metric"]["gpu"] == "0"
    mig = {
        r["metric"]["GPU_I_ID"]: r
        for r in by_title(env, "gpu-fleet", title, {**ALL, "uuid": gpus["c2_mig1"]["UUID"]})
    }
    assert set(mig) == {"1", "2"}
    assert math.isclose(float(mig["1"]["value"][1]), gpus["c2_mig1"]["fb_ratio"], rel_tol=1e-12)
    # gpu-node-c's exporter spells the host label `hostname`; the legend still names the host
    assert mig["1"]["metric"]["hostname"] == "gpu-node-c" and mig["1"]["metric"]["GPU_I_PROFILE"] == "3g.40gb"


def test_fleet_counts_each_gpu_once_and_sums_power_per_physical_gpu(env):
    gpus = env.scenario.truth["gpus"]
    assert (
        value(by_title(env, "gpu-fleet", "GPUs and MIG instances", ALL)) == len(gpus) + 1
    )  # + the idle model's GPU
    assert math.isclose(
        value(by_title(env, "gpu-fleet", "Fullest GPU framebuffer", ALL)),
        max(g["fb_ratio"] for g in gpus.values()),
        rel_tol=1e-12,
    )
    power: dict[str, float] = {}
    for s in list(env.scenario) + env.extra:
        if s.name == "DCGM_FI_DEV_POWER_USAGE":
            power[dict(s.labels)["UUID"]] = truth.instant(s, env.scenario.eval_step)
    assert math.isclose(
        value(by_title(env, "gpu-fleet", "Power draw", ALL)), sum(power.values()), rel_tol=1e-9
    )
    # the idle GPU's XID gauge still says XID_CODE, but no XID is in the exporter's window: not recent
    assert value(by_title(env, "gpu-fleet", "GPUs with new XIDs", ALL)) == 0
    xid = by_title(env, "gpu-fleet", "Last XID per GPU", ALL)
    assert [(r["metric"]["Hostname"], r["metric"]["err_code"], float(r["value"][1])) for r in xid] == [
        (IDLE_HOST, str(XID_CODE), XID_CODE)
    ]


def test_time_to_first_token_p95_of_a_known_engine(env):
    eng = env.scenario.truth["engines"]["a0"]
    values = {**ALL, "pod": grafana_regex(eng["pod"]), "engine": eng["engine"]}
    p95 = by_title(env, "vllm-serving", "Time to first token p95 per engine", values)
    assert math.isclose(value(p95), env.scenario.truth["ttft_p95_a0"], rel_tol=1e-9)
    # 40 requests a step: 34 TTFTs at or below 0.5 s, the 6 long prompts (0.9 s) in (0.75, 1.0]: rank 38
    assert env.scenario.truth["ttft_p95_a0"] == pytest.approx(0.75 + 0.25 * 4 / 6)
    idle = {**ALL, "pod": grafana_regex(eng["pod"]), "engine": "1"}  # no requests: no quantile, not NaN
    assert by_title(env, "vllm-serving", "Time to first token p95 per engine", idle) == []


def _generation_rate(env, model_name: str) -> float:
    total = 0.0
    for s in env.scenario.select("vllm:generation_tokens_total", model_name=model_name):
        r = truth.rate(s, env.scenario.eval_step, WINDOW_S, env.scenario.step)
        total += r or 0.0
    return total


def test_cost_per_million_output_tokens_from_the_configured_price(env):
    cost = env.model.spec.dashboards.defaults.cost.price_per_gpu_hour
    result = {
        r["metric"]["model_name"]: float(r["value"][1])
        for r in by_title(env, "vllm-serving", "Cost per 1M output tokens (instantaneous)", ALL)
    }
    gpus = env.scenario.truth["gpus"]
    held = lambda pods: sum(1 for g in gpus.values() if g["pod"] in pods)  # noqa: E731
    models = env.scenario.truth["models"]
    for model_name in (fleet_mod.DEEPSEEK, fleet_mod.MIXTRAL):
        n = held(models[model_name]["pods"])
        expected = n * cost / 3600 / _generation_rate(env, model_name) * 1e6
        assert math.isclose(result[model_name], expected, rel_tol=1e-9), model_name
    assert held(models[fleet_mod.DEEPSEEK]["pods"]) == 4
    # the idle model holds a GPU but generates nothing: no value, not +Inf
    assert IDLE_MODEL not in result and all(math.isfinite(v) for v in result.values())


def test_moe_deployment_joins_its_gpus_and_measures_imbalance(env):
    gpus = env.scenario.truth["gpus"]
    values = moe_values()
    held = by_title(env, "moe-deployment", "Framebuffer used per GPU", values)
    want = {g["UUID"] for k, g in gpus.items() if k in ("a0", "a1", "b0", "b1")}
    assert {r["metric"]["UUID"] for r in held} == want and len(held) == 4
    assert {r["metric"]["exported_pod"] for r in held} == {
        fleet_mod.POD_A,
        env.scenario.truth["restart"]["new_pod"],
    }
    fullest = max(gpus[k]["fb_ratio"] for k in ("a0", "a1", "b0", "b1"))
    assert math.isclose(
        value(by_title(env, "moe-deployment", "Fullest GPU framebuffer", values)), fullest, rel_tol=1e-12
    )
    assert math.isclose(
        value(by_title(env, "moe-deployment", "Headroom on the fullest GPU", values)),
        1 - fullest,
        rel_tol=1e-9,
    )
    least_free = min(gpus[k]["fb_free_mib"] for k in ("a0", "a1", "b0", "b1"))
    assert value(by_title(env, "moe-deployment", "Least free framebuffer", values)) == least_free
    # KV cache usage of engines a0 (hot), a1 (idle), b0, b1 of the restarted pod at the last step
    sc, engines = env.scenario, env.scenario.truth["engines"]
    kv = [
        truth.instant(s, sc.eval_step)
        for k in ("a0", "a1", "b0", "b1")
        for s in sc.select("vllm:kv_cache_usage_perc", pod=engines[k]["pod"], engine=engines[k]["engine"])
    ]
    hot = sc.truth["kv_hot"]
    assert len(kv) == 4 and kv[:2] == [hot["kv_cache_usage_perc"], hot["sibling_kv_cache_usage_perc"]]
    imbalance = by_title(env, "moe-deployment", "Imbalance (max / avg across ranks)", values, ref=1)
    assert math.isclose(value(imbalance), max(kv) / (sum(kv) / len(kv)), rel_tol=1e-9)


def test_moe_alerts_are_the_deployments_own(env):
    rows = by_title(env, "moe-deployment", "Alerts firing for this deployment", moe_values())
    got = sorted(
        (r["metric"]["alertname"], r["metric"].get("pod") or r["metric"].get("exported_pod")) for r in rows
    )
    assert got == [("GPUFramebufferUsageHigh", fleet_mod.POD_A), ("VLLMKVCacheUsageHigh", fleet_mod.POD_A)]
    assert value(by_title(env, "moe-deployment", "Firing alerts", moe_values())) == 2


# ---------------------------------------------------------------------------------------------
# incidents: the panel an alert's dashboard_url opens shows the culprit
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(servers):
    """incident name -> Env; one Prometheus per incident (see servers)."""
    return servers


def opened(env: Env, url: str) -> tuple[dict, dict, dict[str, str]]:
    """(dashboard, panel, variable values) a dashboard_url opens: its var-X set as Grafana sets them
    (a multi-value variable's value regex-escaped), the others at All; viewPanel names the panel."""
    parts = urlsplit(url)
    uid = parts.path.split("/")[2]
    board = next(b for b in env.boards.values() if b["uid"] == uid)
    params = parse_qsl(parts.query, keep_blank_values=True)
    values = dict(ALL)
    for key, val in params:
        if key.startswith("var-"):
            values[key[4:]] = grafana_regex(unquote(val))
    view = dict(params)["viewPanel"]
    return board, next(p for p in all_panels(board) if str(p["id"]) == view), values


def culprit_shown(env: Env, panel: dict, values: dict[str, str], labels: dict, val: float) -> str | None:
    """None when one of the panel's queries returns a series with every label of the alert its series
    carry and the alert's value, and, for an alert on a signal, that series is the highest of its query;
    else why not. A GPU alert's `namespace` is the workload last seen on the GPU (alert_context.py), a
    label the panel's series of now need not have."""
    wanted = {k: v for k, v in labels.items() if k not in ("__name__", "alertname", "severity")}
    for copy in copies(panel, values):
        for t in panel["targets"]:
            result = run(env, t["expr"], copy)
            carried = {k for r in result for k in r["metric"]}
            hits = [
                r for r in result if all(r["metric"].get(k) == v for k, v in wanted.items() if k in carried)
            ]
            if hits and math.isclose(float(hits[0]["value"][1]), val, rel_tol=1e-9):
                top = max(float(r["value"][1]) for r in result)
                return None if val >= top else f"{panel['title']}: {wanted} is not the top series ({top})"
    return f"{panel['title']}: no series with {wanted} = {val}"


@pytest.mark.parametrize("name", sorted(set(INCIDENTS) - {"healthy"}))
def test_an_alerts_link_opens_the_panel_that_shows_the_culprit(served, name):
    env = served(name)
    checked, problems = [], []
    for alert in env.model.alerts():
        template = alert.annotations.get("dashboard_url")
        if not template:
            continue
        for fired in env.prom.query(alert.expr, env.t):
            labels, val = fired["metric"], float(fired["value"][1])
            url = templates.render(template, labels, val)  # as Prometheus fills it in
            _, panel, values = opened(env, url)
            why = culprit_shown(env, panel, values, labels, val)
            if why:
                problems.append(f"{alert.alert} ({url}): {why}")
            checked.append(alert.alert)
    assert not problems, "\n".join(problems)
    assert checked, f"no alert with a dashboard fires in {name}"


def test_queue_and_prefill_p95_tell_queueing_from_long_prompts(served):
    """The panel that splits time to first token: queueing raises the queue p95, long prompts the
    prefill p95 (values per engine = per model here: the four engines are identical)."""
    values = {**ALL, "namespace": grafana_regex(incident("healthy").truth["namespace"])}
    queueing, prompts = served("ttft_queueing"), served("ttft_long_prompts")
    split = {
        n: {
            phase: value(by_title(e, *QUEUE_PANEL, values, ref=i))
            for i, phase in enumerate(("queue", "prefill"))
        }
        for n, e in (("queueing", queueing), ("prompts", prompts))
    }
    q, p = queueing.scenario.truth, prompts.scenario.truth
    assert math.isclose(split["queueing"]["queue"], q["queue_p95_after"], rel_tol=1e-9)
    assert math.isclose(split["queueing"]["prefill"], q["prefill_p95"], rel_tol=1e-9)
    assert math.isclose(split["prompts"]["queue"], p["queue_p95"], rel_tol=1e-9)
    assert math.isclose(split["prompts"]["prefill"], p["prefill_p95_after"], rel_tol=1e-9)


def test_recording_rules_that_land_later_give_the_same_values(busy, monkeypatch):
    """Bucket-rate and per-engine quantile rules (test_dashboards_oncall.SCALE_RULES) change what a
    panel reads, not what it shows."""
    # a model of its own (the session's is shared, and a model keeps what it plans), of the same spec
    recorded = dashboards.build(with_scale_rules(Model(busy.model.spec), monkeypatch))
    checked = 0
    for title, ref in (("Time to first token", 1), ("Time to first token p95 per engine", 0)):
        results = []
        for board in (busy.boards["vllm-serving"], recorded["vllm-serving"]):
            expr = next(p for p in all_panels(board) if p["title"] == title)["targets"][ref]["expr"]
            rows = run(busy, expr, ALL)
            results.append(
                {
                    tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(
                        r["value"][1]
                    )
                    for r in rows
                }
            )
        live, from_rules = results
        assert live and set(live) == set(from_rules), title
        assert all(math.isclose(live[k], from_rules[k], rel_tol=1e-9) for k in live), (
            title,
            live,
            from_rules,
        )
        checked += len(live)
    assert checked >= 4
