"""Beyond one Prometheus, on real servers on 127.0.0.1: two clusters, one incident each, scraped live.

Both clusters run the same deployment, down to the pod names and GPU UUIDs (the shared incident
fleet of servewatch_testkit.synth.incidents), so a rule that lost the cluster label would merge
them. East's engine fills its KV cache and decodes slowly (kv_saturation); west's GPU fills its
framebuffer (ep_rank_gpu_full). servewatch_testkit.scrape_server serves both fleets over HTTP, one
30 s scenario step a second, with every rate as the scenario states it.

- Prometheus: one Prometheus 3.5 agent per cluster (``external_labels: {cluster: ...}``) scrapes
  its fleet and remote-writes to a central Prometheus (``--web.enable-remote-write-receiver``) that
  evaluates servewatch's rules generated with ``cluster_label: cluster``;
- VictoriaMetrics: one vmagent per cluster (``-remoteWrite.label=cluster=...``) remote-writes to one
  victoria-metrics; vmalert evaluates the same generated rule files.

The rules are the default specs with time divided by 30 (servewatch_testkit.fastforward): a 5 m rate
window is 10 s, a 10 m ``for`` 20 s. Thresholds are the defaults.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import promql_parser as pp
import pytest
import yaml

from servewatch import generate, tools, verify, yamlio
from servewatch.spec.schema import seconds
from servewatch.promql import tree
from servewatch.promapi import Client
from servewatch_testkit.collectors import LocalPrometheusAgent, LocalVMAgent, LocalVMAlert
from servewatch_testkit.fastforward import compressed_specs
from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.scrape_server import ScrapeServer
from servewatch_testkit.synth import incident
from servewatch_testkit.synth.incidents import INCIDENT_STEP, MODEL, NS
from servewatch_testkit.victoriametrics import LocalVictoriaMetrics

pytestmark = [
    pytest.mark.integration,
    pytest.mark.tools("prometheus", "promtool", "victoria-metrics", "vmagent", "vmalert"),
]

REPO = Path(__file__).resolve().parents[1]
FACTOR = 30  # scenario seconds per wall-clock second
# PromQL's rate() extrapolates each series to the window's edges; scraped live at its own phase, each
# engine's rates come out a little off its steady value, which moves a model's quantile a little
REL = 1e-2
CLUSTERS = {"east": "kv_saturation", "west": "ep_rank_gpu_full"}
# healthy steps served before the incident starts (no assertion reads them): vmalert's last record of
# a chain was there about 11 s after the first scrape, the incident reached the records from 14 s
LEAD_STEPS = 4
WAIT_S = 150

# what fires, per cluster: (alertname, the labels that name the thing, the truth key of its value)
ENGINE = ("cluster", "namespace", "pod", "model_name", "engine")
MODEL_LABELS = ("cluster", "namespace", "model_name", "quantile")
GPU = ("cluster", "UUID", "gpu")


def named(alertname: str, labels: tuple[str, ...], values: tuple[str, ...]) -> tuple:
    return (alertname, *zip(labels, values, strict=True))


def expected() -> dict[tuple, float]:
    """(alertname, (label, value), ...) -> the value the alert should show, from the scenarios' truth."""
    east, west = (incident(n).truth for n in CLUSTERS.values())
    [kv] = east["bad"]
    [gpu] = west["bad"]
    return {
        named("VLLMKVCacheUsageHigh", ENGINE, ("east", *(kv[k] for k in ENGINE[1:]))): east[
            "kv_cache_usage_perc"
        ],
        named("VLLMInterTokenLatencyP95High", MODEL_LABELS, ("east", NS, MODEL, "0.95")): east[
            "itl_p95_model_after"
        ],
        named("GPUFramebufferUsageHigh", GPU, ("west", gpu["UUID"], gpu["gpu"])): west["fb_ratio"],
    }


def key_of(alert: dict) -> tuple:
    """An alert as `expected()` names it."""
    labels = alert["labels"]
    name = labels["alertname"]
    keys = {
        "VLLMKVCacheUsageHigh": ENGINE,
        "VLLMInterTokenLatencyP95High": MODEL_LABELS,
        "GPUFramebufferUsageHigh": GPU,
    }.get(name, tuple(sorted(k for k in labels if k not in ("alertname", "severity"))))
    return (name, *((k, labels.get(k)) for k in keys))


def firing(url: str) -> list[dict]:
    with Client(url) as client:
        return [a for a in client.get("/api/v1/alerts")["alerts"] if a["state"] == "firing"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distributed")
    specs = compressed_specs(REPO / "specs", tmp / "specs", FACTOR, cluster_label="cluster")
    model, files = generate.build(specs, tmp)
    rule_files = []
    for path, text in sorted(files.items()):
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", path):
            rule_files.append(tmp / Path(path).name)
            rule_files[-1].write_text(text)
    fleets = {cluster: incident(name) for cluster, name in CLUSTERS.items()}
    scrape = "1s"
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(ScrapeServer(fleets, first_step=INCIDENT_STEP - LEAD_STEPS))
        central = stack.enter_context(
            LocalPrometheus(
                None,
                rule_files=rule_files,
                backfill_rules=False,
                rule_eval_interval=scrape,
                extra_args=["--web.enable-remote-write-receiver"],
            )
        )
        vm = stack.enter_context(
            # data is queryable 1 s after it arrives (the default waits 30 s), and vmalert asks that late;
            # a series asked for before it is indexed stayed unseen for 9-10 s, 3-4 s with the tag
            # filters cache at 1 byte: vmalert asks for each record before its first sample, and each
            # record of a chain lost those seconds
            LocalVictoriaMetrics(
                extra_args=[
                    "-search.latencyOffset=1s",
                    "-search.disableCache",
                    "-storage.cacheSizeIndexDBTagFilters=1",
                ]
            )
        )
        vmalert = stack.enter_context(
            # a record is sent within 0.2 s (the default waits 2 s): the next evaluation of its group,
            # a few seconds on, reads it
            LocalVMAlert(
                rule_files,
                vm.url,
                evaluation_interval=scrape,
                extra_args=["-rule.evalDelay=1s", "-remoteWrite.flushInterval=200ms"],
            )
        )
        srv.restart()  # the incident plays from here, whatever the start-up took
        for cluster in CLUSTERS:
            configs = [srv.scrape_config(cluster, scrape)]
            stack.enter_context(
                LocalPrometheusAgent(configs, central.url + "/api/v1/write", {"cluster": cluster})
            )
            stack.enter_context(LocalVMAgent(configs, vm.url + "/api/v1/write", {"cluster": cluster}))
        want = set(expected())
        deadline = time.monotonic() + WAIT_S
        while True:
            got_prom = {key_of(a) for a in firing(central.url)}
            got_vm = {key_of(a) for a in firing(vmalert.url)}
            if want <= got_prom and want <= got_vm:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"after {WAIT_S} s, at step {srv.step()}: Prometheus fires {sorted(got_prom)}, "
                    f"vmalert fires {sorted(got_vm)}; expected {sorted(want)}"
                )
            time.sleep(0.5)
        yield SimpleNamespace(
            model=model, files=files, srv=srv, central=central, vm=vm, vmalert=vmalert, tmp=tmp
        )


# -- Prometheus: agents per cluster, one central Prometheus -----------------------------------------------


def test_alerts_fire_per_cluster_on_the_central_prometheus(stack):
    """Each incident fires in its own cluster only, for exactly its engine, model or GPU; the same
    engine, model and GPU of the other cluster, healthy, do not fire."""
    alerts = firing(stack.central.url)
    want = expected()
    assert {key_of(a) for a in alerts} == set(want)
    for a in alerts:
        assert float(a["value"]) == pytest.approx(want[key_of(a)], rel=REL), a["labels"]


def test_recorded_series_keep_the_clusters_apart(stack):
    """The same GPU UUIDs, engines and model exist in both clusters: every record has one series per
    cluster, each with its own cluster's value."""
    prom, east, west = stack.central, *(incident(n).truth for n in CLUSTERS.values())
    fb = prom.query_map("gpu:dcgm_fb_used:ratio", by=("cluster", "UUID"))
    assert len(fb) == 2 * len(east["gpus"])
    [bad] = west["bad"]
    for g in east["gpus"]:
        assert fb[("east", g["UUID"])] == pytest.approx(west["fb_ratio_siblings"])  # all at baseline
        want = west["fb_ratio"] if g["UUID"] == bad["UUID"] else west["fb_ratio_siblings"]
        assert fb[("west", g["UUID"])] == pytest.approx(want)
    kv = prom.query_map("engine:vllm_kv_cache_usage:max", by=("cluster", "pod", "engine"))
    [sat] = east["bad"]
    assert kv.pop(("east", sat["pod"], sat["engine"])) == pytest.approx(east["kv_cache_usage_perc"])
    assert len(kv) == 7 and all(v == pytest.approx(east["kv_cache_usage_perc_others"]) for v in kv.values())
    itl = prom.query_map(
        'model:vllm_inter_token_latency_seconds:histogram_quantile_rate5m{quantile="0.95"}', by=("cluster",)
    )
    assert itl[("east",)] == pytest.approx(east["itl_p95_model_after"], rel=REL)
    assert itl[("west",)] == pytest.approx(incident("healthy").truth["itl_p95"], rel=REL)


# -- VictoriaMetrics: vmagents per cluster, one victoria-metrics, vmalert -----------------------------------


def test_vmalert_fires_what_prometheus_fires(stack):
    """Same rule files, no fork: vmalert's firing alerts are Prometheus' (labels and annotations),
    and their values agree."""
    prom = {key_of(a): a for a in firing(stack.central.url)}
    vm = {key_of(a): a for a in firing(stack.vmalert.url)}
    assert set(vm) == set(prom) == set(expected())
    for key, a in vm.items():
        assert a["labels"] == prom[key]["labels"]
        assert a["annotations"]["summary"] == prom[key]["annotations"]["summary"]
        # MetricsQL's rate() does not extrapolate to the window's edges: on a steady counter it
        # gives what PromQL gives (docs/scale.md)
        assert float(a["value"]) == pytest.approx(float(prom[key]["value"]), rel=REL), key


def test_victoria_metrics_holds_the_recorded_quantiles_per_cluster(stack):
    with Client(stack.vm.url) as vm:
        rows = vm.query('model:vllm_inter_token_latency_seconds:histogram_quantile_rate5m{quantile="0.95"}')
    got = {r["metric"]["cluster"]: float(r["value"][1]) for r in rows}
    assert got == {
        "east": pytest.approx(incident("kv_saturation").truth["itl_p95_model_after"], rel=REL),
        "west": pytest.approx(incident("healthy").truth["itl_p95"], rel=REL),
    }


# -- dashboards: the cluster variable ---------------------------------------------------------------------


def dashboard_queries(files: dict[str, str]) -> list[tuple[str, str, str]]:
    """(dashboard, panel, expr) of every panel target of the classic dashboards."""
    import json

    out = []
    for path, text in sorted(files.items()):
        if re.fullmatch(r"dashboards/[^/]+\.json", path):
            board = json.loads(text)
            panels = [p for p in board["panels"] if p.get("type") != "row"]
            panels += [q for p in board["panels"] if p.get("type") == "row" for q in p.get("panels", [])]
            for p in panels:
                out += [(board["uid"], p["title"], t["expr"]) for t in p.get("targets", []) if t.get("expr")]
    return out


def interpolate(expr: str, cluster: str) -> str:
    values = {"cluster": cluster, "namespace": NS, "model": re.escape(MODEL).replace("\\", "\\\\")}
    expr = expr.replace("$__rate_interval", "10s").replace("$__interval", "1s").replace("$__range", "1m")
    expr = re.sub(r"\$\{(\w+):raw\}", lambda m: values.get(m.group(1), ".*"), expr)
    return re.sub(
        r"\$\{?(\w+)\}?",
        lambda m: values.get(m.group(1), ".*") if not m.group(1).isdigit() else m.group(0),
        expr,
    )


def test_the_cluster_variable_filters_every_panel(stack):
    """Every series every panel reads is narrowed by the cluster variable, and with cluster=east a
    panel shows east's values only: the fullest KV cache is east's saturated engine, the fullest GPU
    west's only under cluster=west."""
    queries = dashboard_queries(stack.files)
    assert len(queries) > 40
    unfiltered = []
    for uid, title, expr in queries:
        ast = pp.parse(interpolate(expr, "east"))
        for sel in tree.selectors(ast):
            if not any(m.name == "cluster" for m in sel.matchers.matchers):
                unfiltered.append((uid, title, sel.name))
    assert not unfiltered, unfiltered

    answered = 0
    for uid, title, expr in queries:
        rows = stack.central.query(interpolate(expr, "east"))
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            answered += 1
            clusters = {r["metric"].get("cluster") for r in rows} - {None}
            assert clusters <= {"east"}, (uid, title, clusters)
    assert answered > len(queries) / 2

    def panel_value(title: str, cluster: str) -> float:
        [expr] = [e for u, t, e in queries if u == "servewatch-vllm-serving" and t == title]
        return stack.central.query_value(interpolate(expr, cluster))

    east, west = (incident(n).truth for n in CLUSTERS.values())
    assert panel_value("Fullest KV cache", "east") == pytest.approx(east["kv_cache_usage_perc"])
    assert panel_value("Fullest KV cache", "west") == pytest.approx(east["kv_cache_usage_perc_others"])


# -- vmalert-tool: the generated promtool tests ------------------------------------------------------------


def vmalert_timed(test_file: Path, out: Path, doc: dict | None = None) -> Path:
    """A copy of a generated promtool test file with each expectation of a firing alert, and each
    silent check after one (the alert resolved), one evaluation interval later. vmalert-tool 1.145
    turns an alert firing up to one interval after promtool does (measured on these files: never at
    `for`, always by `for` plus one interval), and resolves it as late: an alert reads the recorded
    series of its own group as the previous evaluation left them (GPUXidErrors still fires at the
    evaluation its window-count record drops to 0). So the copy keeps every label, annotation and silent
    check before an alert fires and gives up only that interval at each edge.
    Expression tests are `metricsql_expr_test` there. `doc`: the file's text, parsed, when at hand."""
    doc = _load(test_file) if doc is None else doc
    doc["rule_files"] = [str(test_file.parent / f) for f in doc["rule_files"]]
    for test in doc["tests"]:
        step = seconds(test.get("interval", "1m"))
        if "promql_expr_test" in test:
            test["metricsql_expr_test"] = test.pop("promql_expr_test")
        checks = test.get("alert_rule_test", [])
        fired = {}  # alertname: the first time promtool expects it firing
        for check in checks:
            if check.get("exp_alerts"):
                at = seconds(check["eval_time"])
                fired[check["alertname"]] = min(at, fired.get(check["alertname"], at))
        for check in checks:
            at = seconds(check["eval_time"])
            if check.get("exp_alerts") or at > fired.get(check["alertname"], at):
                check["eval_time"] = f"{at + step:g}s"
    out.write_text(yaml.dump(doc, Dumper=DUMPER, sort_keys=False))
    return out


# the test files are megabytes of YAML: libyaml reads and writes them 10x faster (yamlio.py)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _load(path: Path) -> dict:
    return yamlio.load(path.read_text())


def sliced(test_file: Path, scratch: Path, doc: dict | None = None) -> list[Path]:
    """`test_file` as the slices `servewatch test` proves (verify.py, rule_slices.py): each slice the
    tests that observe the same rules, beside rule files that keep only those rules, groups and rule
    order as they are; the file itself when it runs whole. `doc`: the file's text, parsed."""
    doc = _load(test_file) if doc is None else doc
    cut = verify.sliced(test_file, doc, scratch)
    return [test_file] if cut is None else [s.test_file for s in cut]


VMALERT_TOOL_TEST = "test_vmalert_tool_passes_the_generated_promtool_tests"
VMALERT_TOOL_PROCS = 2  # two processes, for two cores


def _vmalert_tool_run(repo: Path, tmp: Path, procs: list, stop: threading.Event) -> SimpleNamespace:
    """What test_vmalert_tool_passes_the_generated_promtool_tests checks: the files it gives
    vmalert-tool, made, and vmalert-tool's run of them. Started niced, the live stack's servers go
    first."""
    tests = sorted(
        t
        for t in (repo / "promtool").glob("*.test.yaml")
        if ".boundaries." not in t.name and t.name != "slo.test.yaml"
    )
    docs = {t: _load(t) for t in tests}
    parts = {p: _load(p) for t in tests for p in sliced(t, tmp / "slices", docs[t])}
    out = SimpleNamespace(
        docs=docs,
        parts=len(parts),
        names=[x["name"] for doc in parts.values() for x in doc["tests"]],
        want=[x["name"] for doc in docs.values() for x in doc["tests"]],
    )
    out.timed = [vmalert_timed(p, tmp / f"{i}.{p.name}", doc) for i, (p, doc) in enumerate(parts.items())]
    tool = str(tools.find("vmalert-tool"))
    if stop.is_set():  # the module ended before its test (-x)
        raise RuntimeError("not run: the module ended first")
    for files in (out.timed[i::VMALERT_TOOL_PROCS] for i in range(VMALERT_TOOL_PROCS)):
        procs.append(
            subprocess.Popen(
                [tool, "unittest", "--disableAlertgroupLabel", *(f"--files={t}" for t in files)],
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, procs[-1].pid, 19)
    out.runs = [(p.communicate(timeout=600)[0], p.returncode) for p in procs]
    return out


@pytest.fixture(scope="module", autouse=True)
def vmalert_tool_run(request, tmp_path_factory):
    """The vmalert-tool run, started in the background as the module starts when its test is
    selected: it computes while the live stack's tests wait for their incidents to play out."""
    if not any(
        item.module is request.module and item.originalname == VMALERT_TOOL_TEST
        for item in request.session.items
    ):
        yield None
        return
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_vmalert_tool_run, REPO, tmp_path_factory.mktemp("vmalert-tool"), procs, stop)
        yield future
        stop.set()
        for proc in procs:  # the module ended before its test (-x)
            if proc.poll() is None:
                proc.kill()


@pytest.mark.tools("vmalert-tool")
def test_vmalert_tool_passes_the_generated_promtool_tests(vmalert_tool_run):
    """`vmalert-tool unittest` reads promtool's test format; it needs --disableAlertgroupLabel because
    vmalert adds the group name as a label to every alert, which the expectations do not list.
    The boundary files are Prometheus' arithmetic to the last digit (a rate a hair past its
    threshold with PromQL's extrapolation is a hair below it without), so they are promtool's only;
    so are the SLO tests, which check each burn-rate row at the evaluation it starts and stops firing
    (vmalert's later start moves both edges). docs/scale.md says so.

    Every test of the other files runs, each beside the rules it observes only (the slices
    `servewatch test` gives promtool; rule_slices.py says why a test's verdict cannot depend on the
    rest), as vmalert-tool evaluates every rule it is given at every step of every test."""
    run = vmalert_tool_run.result()
    assert run.docs and all(doc["tests"] for doc in run.docs.values())
    assert run.parts > len(run.docs)  # the slicing took hold, or this runs the whole rule set per test
    assert sorted(run.names) == sorted(run.want)  # every test once
    for out, returncode in run.runs:
        assert returncode == 0, out
    assert sum(out.count("SUCCESS") for out, _ in run.runs) == len(run.timed)
