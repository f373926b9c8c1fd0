"""`servewatch investigate` against a real Prometheus 3.5 on 127.0.0.1 holding backfilled incident data.

Each incident of servewatch_testkit.synth.incidents gets its own Prometheus, started at most once per module.
Auth, TLS, timeouts and failing queries go through a small stdlib HTTP proxy in front of the real server.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from servewatch.cli import main
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch.model import Model
from servewatch.runbooks import book
from servewatch.runbooks.queries import Queries
from servewatch.spec.loader import load
from servewatch_testkit.synth import RequestProfile, Series, fleet, incidents, to_openmetrics, up
from servewatch_testkit.synth import vllm_engine, vllm_target
from servewatch_testkit.synth.fleet import MIXTRAL
from servewatch_testkit.synth.fleet import NS as FLEET_NS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.tools("promtool", "prometheus"),
    pytest.mark.usefixtures("no_prometheus_env"),  # the servers these tests start, not the user's
]

REPO = Path(__file__).resolve().parents[1]
SPECS = str(REPO / "specs")
TOKEN = "s3cret-token-value"
MODEL = Model(load(Path(SPECS)))
PAGES = {p.name: p for p in book.pages(MODEL)}  # the runbook pages investigate runs, step by step


def implied(alert: str, step_id: str, value: float) -> str:
    """The verdict a step's thresholds (from the spec, as on the page) give a value."""
    lim = PAGES[alert].step(step_id).limits

    def beyond(t):
        return t is not None and (value > t if lim.op == ">" else value < t)

    return "unhealthy" if beyond(lim.unhealthy) else "suspicious" if beyond(lim.suspicious) else "healthy"


@dataclass
class Served:
    prom: LocalPrometheus
    scenario: object
    at: float

    @property
    def url(self) -> str:
        return self.prom.url


def _firing_alerts(sc) -> list[Series]:
    """ALERTS series as Prometheus writes them while rules fire: the KV alert on the saturated engine
    (firing for the last 20 minutes) and one alert servewatch has no runbook for."""
    bad = sc.truth["bad"][0]
    firing = [None] * (incidents.INCIDENT_STEP + 10) + [1] * (sc.steps - incidents.INCIDENT_STEP - 10)
    return [
        Series(
            "ALERTS",
            {"alertname": "VLLMKVCacheUsageHigh", "alertstate": "firing", "severity": "warning", **bad},
            firing,
        ),
        Series(
            "ALERTS",
            {"alertname": "KubePodCrashLooping", "alertstate": "firing", "namespace": "kube-system"},
            firing,
        ),
        Series("ALERTS", {"alertname": "VLLMRequestsWaitingHigh", "alertstate": "pending", **bad}, firing),
    ]


@pytest.fixture(scope="module")
def served():
    """name -> Served; each incident's Prometheus starts on first use and stops when the module ends."""
    cache: dict[str, Served] = {}

    def get(name: str) -> Served:
        if name not in cache:
            sc = incidents.incident(name)
            start = backfill_start(sc.steps, sc.step)
            series = list(sc) + (_firing_alerts(sc) if name == "kv_saturation" else [])
            prom = LocalPrometheus(to_openmetrics(series, start, sc.step)).start()
            cache[name] = Served(prom, sc, sc.time_at(start, sc.eval_step))
        return cache[name]

    yield get
    for s in cache.values():
        s.prom.close()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["investigate", "--specs", SPECS, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def investigate_json(capsys, served_one: Served, alert: str, *extra: str) -> dict:
    code, out, err = run(
        capsys, alert, "--prometheus", served_one.url, "--at", str(served_one.at), "--format", "json", *extra
    )
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["investigations"]) == 1
    return doc["investigations"][0]


def steps(inv: dict) -> dict[str, dict]:
    return {s["id"]: s for s in inv["steps"]}


def cause_steps(inv: dict, verdict: str = "unhealthy") -> list[str]:
    return [c["step"] for c in inv["causes"] if c["verdict"] == verdict]


# -- incidents: the right cause ---------------------------------------------------------------------


def test_kv_saturation_names_saturation_with_preemptions(served, capsys):
    s = served("kv_saturation")
    inv = investigate_json(capsys, s, "VLLMKVCacheUsageHigh")
    st = steps(inv)
    t = s.scenario.truth
    bad = t["bad"][0]
    assert inv["verdict"] == "unhealthy"
    assert st["kv-usage"]["verdict"] == "unhealthy"
    top = st["kv-usage"]["series"][0]
    assert {k: top["labels"][k] for k in bad} == bad and top["value"] == pytest.approx(
        t["kv_cache_usage_perc"]
    )
    # asked for by name, the alert is scoped to the one engine holding its condition; the siblings
    # (at kv_cache_usage_perc_others, below the threshold) hold it nowhere
    assert inv["scope_from"] == "worst subject" and inv["others_holding"] == 0
    assert inv["alert_labels"] == bad and len(st["kv-usage"]["series"]) == 1
    assert "preemptions-per-request" in cause_steps(inv)
    # 0.1/s is above the step's 0.01/s and below VLLMPreemptionsHigh's 1/s: suspicious, not unhealthy
    assert implied("VLLMKVCacheUsageHigh", "preemptions", t["preemptions_per_s"]) == "suspicious"
    assert st["preemptions"]["verdict"] == "suspicious"
    assert st["preemptions"]["series"][0]["value"] == pytest.approx(t["preemptions_per_s"])
    assert "preemption" in inv["summary"] and "KV-cache saturation" in inv["summary"]
    assert st["errors"]["verdict"] == "healthy"  # a full cache is not refusals
    assert st["itl"]["verdict"] == "unhealthy"  # the latency effect of recomputation


def test_ttft_regression_from_queueing(served, capsys):
    s = served("ttft_queueing")
    t = s.scenario.truth
    inv = investigate_json(capsys, s, "VLLMTimeToFirstTokenP95High")
    st = steps(inv)
    assert st["ttft"]["verdict"] == "unhealthy"
    assert st["queue-time"]["verdict"] == "unhealthy"
    assert st["queue-time"]["series"][0]["value"] == pytest.approx(t["queue_p95_after"])
    assert st["prefill-time"]["verdict"] == "healthy"
    assert st["prompt-length-change"]["verdict"] == "healthy"
    assert cause_steps(inv)[0] == "queue-time"
    assert "queueing" in inv["summary"]
    assert st["arrivals-change"]["verdict"] == "unhealthy"  # 20 -> 40 requests per step
    assert st["arrivals-change"]["series"][0]["value"] == pytest.approx(t["arrivals_change"])


def test_ttft_regression_from_long_prompts(served, capsys):
    s = served("ttft_long_prompts")
    inv = investigate_json(capsys, s, "VLLMTimeToFirstTokenP95High")
    st = steps(inv)
    assert st["ttft"]["verdict"] == "unhealthy"
    assert st["queue-time"]["verdict"] == "healthy"
    assert st["prefill-time"]["verdict"] == "unhealthy"
    assert st["prompt-length-change"]["verdict"] == "unhealthy"
    assert st["prompt-length-change"]["series"][0]["value"] == pytest.approx(
        s.scenario.truth["prompt_length_change"]
    )
    assert st["arrivals-change"]["verdict"] == "healthy"
    assert set(cause_steps(inv)) == {"prefill-time", "prompt-length-change"}
    assert "queue-time" not in [c["step"] for c in inv["causes"]]


def test_one_ep_rank_gpu_full(served, capsys):
    s = served("ep_rank_gpu_full")
    inv = investigate_json(capsys, s, "GPUFramebufferUsageHigh")
    st = steps(inv)
    bad = s.scenario.truth["bad"][0]
    top = st["fullest-gpus"]["series"][0]["labels"]
    assert st["fullest-gpus"]["verdict"] == "unhealthy"
    assert (top["UUID"], top["Hostname"], top["gpu"], top["exported_pod"]) == (
        bad["UUID"],
        bad["host"],
        bad["gpu"],
        bad["pod"],
    )
    assert st["fullest-gpus"]["series"][0]["value"] == pytest.approx(s.scenario.truth["fb_ratio"], abs=1e-6)
    assert st["rank-imbalance"]["verdict"] == "unhealthy"
    assert st["deployment-average"]["verdict"] == "healthy"  # the average hides the full rank
    assert cause_steps(inv) == ["rank-imbalance"]
    assert "one EP/TP rank" in inv["summary"]
    # dashboards link to the full GPU
    gpu_fleet = next(d["url"] for d in inv["dashboards"] if "gpu-fleet" in d["url"])
    assert f"var-uuid={bad['UUID']}" in gpu_fleet and "var-host=gpu-node-b" in gpu_fleet


def test_renamed_dcgm_metric_is_told_from_a_dead_target(served, capsys):
    s = served("dcgm_renamed")
    inv = investigate_json(capsys, s, "GPUFramebufferMetricsMissing")
    st = steps(inv)
    assert st["exporter-up"]["verdict"] == "healthy"
    assert st["fb-metric-names"]["verdict"] == "unhealthy"
    assert (
        "present instead: DCGM_FI_DEV_FB_FREE_BYTES, DCGM_FI_DEV_FB_USED_BYTES (renamed)"
        in st["fb-metric-names"]["detail"]
    )
    assert st["partner-missing"]["verdict"] == "unhealthy"
    assert (
        st["label-layout"]["verdict"] == "unhealthy"
        and "found hostname instead" in st["label-layout"]["detail"]
    )
    assert "renamed" in inv["summary"]

    down = investigate_json(capsys, s, "DCGMExporterDown")
    st = steps(down)
    assert st["targets-down"]["verdict"] == "healthy" and st["exporter-up"]["verdict"] == "healthy"
    assert cause_steps(down)[0] == "fb-metric-names"
    assert "dead target" not in " ".join(c["cause"] for c in down["causes"])


def test_renamed_vllm_kv_metric_is_named(served, capsys):
    """A pod on a vLLM older than 0.12 exports vllm:gpu_cache_usage_perc, not vllm:kv_cache_usage_perc:
    the target is alive, so this is a rename, and investigate names the missing metric and its old name."""
    s = served("vllm_kv_renamed")
    t = s.scenario.truth
    bad = t["bad"][0]
    inv = investigate_json(
        capsys,
        s,
        "VLLMSignalMetricsMissing",
        "--label",
        f"job={bad['job']}",
        "--label",
        f"instance={bad['instance']}",
    )
    st = steps(inv)
    assert inv["verdict"] == "unhealthy"
    missing = st["missing-inputs"]
    assert missing["verdict"] == "unhealthy"
    assert [r["labels"].get("metric") for r in missing["series"]] == [t["missing_metric"]]
    assert {k: missing["series"][0]["labels"][k] for k in ("job", "instance")} == {
        k: bad[k] for k in ("job", "instance")
    }
    names = st["vllm-names"]
    assert names["verdict"] == "unhealthy"
    assert t["missing_metric"] in names["detail"]
    assert f"present instead: {t['present_instead']} (renamed)" in names["detail"], names["detail"]
    assert "renamed" in inv["summary"]

    # the same target is neither dead nor without vllm: metrics: VLLMMetricsAbsent stays healthy
    absent = investigate_json(capsys, s, "VLLMMetricsAbsent")
    assert steps(absent)["target-up"]["verdict"] == "healthy"
    assert steps(absent)["absent-condition"]["verdict"] == "healthy"


# The pages whose inputs the healthy incident does not hold: investigate must say it has no data, not
# call them healthy. Its DeepSeek deployment serves aggregated (no --kv-transfer-config), so it exports
# no NIXL series (the KV-transfer pages are judged healthy on the fleet, which has a NIXL decode engine);
# its Prometheus holds raw series only, not the SLO records SLOInputsMissing's page reads.
NO_INPUTS_ON_HEALTHY = {
    "VLLMKVTransferFailures": "aggregated serving: no NIXL series",
    "VLLMKVNotificationFailures": "aggregated serving: no NIXL series",
    "VLLMKVTransferTimeP95High": "aggregated serving: no NIXL series",
    "SLOInputsMissing": "no SLO records: the rules are not evaluated here",
}
# every other alert the specs generate, none left out
ALERTS_ON_HEALTHY = [a.alert for a in MODEL.alerts() if a.alert not in NO_INPUTS_ON_HEALTHY]
NIXL_ALERTS = [a for a, why in NO_INPUTS_ON_HEALTHY.items() if "NIXL" in why]


def test_healthy_check_covers_every_alert():
    assert ALERTS_ON_HEALTHY and set(ALERTS_ON_HEALTHY) | set(NO_INPUTS_ON_HEALTHY) == set(PAGES)
    assert set(NO_INPUTS_ON_HEALTHY) <= set(PAGES)
    assert "VLLMSignalMetricsMissing" in ALERTS_ON_HEALTHY


@pytest.mark.parametrize("alert", ALERTS_ON_HEALTHY)
def test_healthy_data_says_healthy(served, capsys, alert):
    inv = investigate_json(capsys, served("healthy"), alert)
    assert inv["verdict"] == "healthy", [(x["id"], x["verdict"], x["detail"]) for x in inv["steps"]]
    assert inv["causes"] == []
    assert inv["summary"].startswith("healthy")


@pytest.mark.parametrize("alert", sorted(NO_INPUTS_ON_HEALTHY))
def test_healthy_data_without_a_pages_inputs_says_no_data(served, capsys, alert):
    """No step of these pages finds a series in the healthy incident: the verdict is no-data, said as
    such, never healthy (which would claim the KV transfers or the SLO inputs were checked)."""
    inv = investigate_json(capsys, served("healthy"), alert)
    found = [(x["id"], x["verdict"], x["detail"]) for x in inv["steps"]]
    assert inv["verdict"] == "no-data", (NO_INPUTS_ON_HEALTHY[alert], found)
    assert all(verdict == "no-data" and detail == "no series" for _, verdict, detail in found), found
    assert inv["causes"] == [] and inv["summary"].startswith("no data")


def test_text_and_markdown_reports(served, capsys):
    s = served("ttft_queueing")
    code, out, err = run(capsys, "VLLMTimeToFirstTokenP95High", "--prometheus", s.url, "--at", str(s.at))
    assert code == 0
    assert out.startswith("== VLLMTimeToFirstTokenP95High: UNHEALTHY")
    assert "Likely causes:" in out and "[UNHEALTHY] queueing" in out
    assert "var-namespace=llm-serving&var-model=deepseek-ai%2FDeepSeek-V3" in out
    n = len(PAGES["VLLMTimeToFirstTokenP95High"].steps)  # one query per step of the page
    assert (
        err.strip() == f"servewatch: investigating VLLMTimeToFirstTokenP95High ({n} queries)"
    )  # terse: not a TTY
    code, out, _ = run(
        capsys,
        "VLLMTimeToFirstTokenP95High",
        "--prometheus",
        s.url,
        "--at",
        str(s.at),
        "--format",
        "markdown",
        "--quiet",
    )
    assert code == 0
    assert "## VLLMTimeToFirstTokenP95High: UNHEALTHY" in out and "| 2 | Queue time, p95" in out
    assert "```promql" in out


# -- the synthetic fleet: idle devices, two models, no firing labels ------------------------------------


@pytest.fixture(scope="module")
def fleet_served():
    """servewatch_testkit.synth.fleet (two models, idle GPUs without a workload, an idle MIG instance)."""
    sc = fleet()
    start = backfill_start(sc.steps, sc.step)
    prom = LocalPrometheus(to_openmetrics(list(sc), start, sc.step)).start()
    yield Served(prom, sc, sc.time_at(start, sc.eval_step))
    prom.close()


def _deployments(sc) -> dict[str, list[float]]:
    """The framebuffer ratio of every GPU a workload is mapped to, per workload namespace."""
    out: dict[str, list[float]] = {}
    for g in sc.truth["gpus"].values():
        if g["namespace"]:
            out.setdefault(g["namespace"], []).append(g["fb_ratio"])
    return out


def test_idle_devices_without_a_workload_make_no_verdict(fleet_served, capsys):
    """GPUFramebufferUsageHigh on the fleet: no GPU above the threshold, and the two idle devices with
    no workload (an empty GPU, an idle MIG instance) are no deployment: no 1.73x 'imbalance' of theirs."""
    s = fleet_served
    inv = investigate_json(capsys, s, "GPUFramebufferUsageHigh")
    st = steps(inv)
    threshold = PAGES["GPUFramebufferUsageHigh"].alert.spec.threshold
    assert max(g["fb_ratio"] for g in s.scenario.truth["gpus"].values()) <= threshold
    imbalance = {x["labels"].get("exported_namespace"): x["value"] for x in st["rank-imbalance"]["series"]}
    expected = {ns: max(r) / (sum(r) / len(r)) for ns, r in _deployments(s.scenario).items()}
    assert imbalance == pytest.approx(expected, rel=1e-6)  # every group a real deployment
    assert st["rank-imbalance"]["verdict"] == implied(
        "GPUFramebufferUsageHigh", "rank-imbalance", max(expected.values())
    )
    assert inv["verdict"] != "unhealthy" and inv["causes"] == [] and inv["alert_labels"] == {}
    assert "condition does not hold now" in inv["summary"] and "no evidence of a cause" in inv["summary"]
    # the number each verdict was judged by, and where it comes from
    lim = PAGES["GPUFramebufferUsageHigh"].step("fullest-gpus").limits
    assert st["fullest-gpus"]["thresholds"]["unhealthy_from"] == lim.note
    assert lim.note == f"GPUFramebufferUsageHigh's threshold {threshold:g}"
    assert lim.suspicious_note in st["fullest-gpus"]["detail"]


@pytest.mark.parametrize("alert", NIXL_ALERTS)
def test_healthy_nixl_transfers_say_healthy(fleet_served, capsys, alert):
    """The fleet's DeepSeek engine 0 pulls its KV cache over NIXL without a failure, every pull within
    0.05 s: the KV-transfer pages the healthy incident cannot judge (no NIXL there) judge it healthy."""
    inv = investigate_json(capsys, fleet_served, alert)
    found = [(x["id"], x["verdict"], x["detail"]) for x in inv["steps"]]
    assert inv["verdict"] == "healthy", found
    assert all(verdict == "healthy" for _, verdict, _ in found), found
    assert inv["causes"] == [] and inv["summary"].startswith("healthy")


def test_a_kv_alert_is_judged_on_its_own_engine_not_another_model(fleet_served, capsys):
    """VLLMKVCacheUsageHigh on the fleet: one engine above the threshold. Asked for by name, every step
    is scoped to that engine's labels: Mixtral's TTFT (above its threshold) is no cause of it."""
    s = fleet_served
    hot = s.scenario.truth["engines"][s.scenario.truth["kv_hot"]["engine"]]
    inv = investigate_json(capsys, s, "VLLMKVCacheUsageHigh")
    own = {k: hot[k] for k in ("namespace", "pod", "model_name", "engine")}
    assert inv["alert_labels"] == own and inv["scope_from"] == "worst subject"
    for step in inv["steps"]:
        for x in step["series"]:
            assert x["labels"].get("model_name", own["model_name"]) == own["model_name"], step["id"]
            assert x["labels"].get("pod", own["pod"]) == own["pod"], step["id"]
    assert steps(inv)["ttft"]["verdict"] == "healthy"
    assert "ttft" not in [c["step"] for c in inv["causes"]]
    assert "preempt" in inv["summary"]
    # unscoped, the TTFT step would have judged Mixtral's (what the old report called "most likely")
    ttft = PAGES["VLLMKVCacheUsageHigh"].step("ttft")
    rows = s.prom.query(ttft.expr, time=s.at)
    worst = max(rows, key=lambda r: float(r["value"][1]))
    assert worst["metric"]["model_name"] == MIXTRAL
    assert implied("VLLMKVCacheUsageHigh", "ttft", float(worst["value"][1])) == "unhealthy"


def test_a_tuned_threshold_picks_the_subject_and_is_named(fleet_served, capsys, specs_with):
    """Tuned below the fleet's fullest GPUs, GPUFramebufferUsageHigh holds on three of them: the worst is
    the subject, its deployment the scope of the rank steps, and the tuned number is the one stated."""
    s = fleet_served
    specs = specs_with(
        {"overrides.yaml": "overrides:\n  alerts:\n    GPUFramebufferUsageHigh: {threshold: 0.92}\n"}
    )
    code, out, err = run_specs(capsys, specs, "GPUFramebufferUsageHigh", s)
    assert code == 0, err
    inv = json.loads(out)["investigations"][0]
    st = steps(inv)
    gpus = s.scenario.truth["gpus"]
    holding = sorted((g for g in gpus.values() if g["fb_ratio"] > 0.92), key=lambda g: -g["fb_ratio"])
    assert inv["scope_from"] == "worst subject" and inv["others_holding"] == len(holding) - 1
    assert inv["alert_labels"]["UUID"] in {g["UUID"] for g in holding}
    assert inv["alert_labels"]["namespace"] == FLEET_NS
    assert {x["labels"]["exported_namespace"] for x in st["rank-imbalance"]["series"]} == {FLEET_NS}
    assert "GPUFramebufferUsageHigh's threshold 0.92, tuned in overrides" in st["fullest-gpus"]["detail"]
    assert st["fullest-gpus"]["verdict"] == "unhealthy" and len(st["fullest-gpus"]["series"]) == 1


TINY = {"namespace": "llm-lab", "pod": "tiny-0", "model_name": "lab/tiny-model"}


@pytest.fixture(scope="module")
def tiny_served():
    """The healthy deployment, plus a lab model finishing one request a step (1/30 per second, under
    VLLMRequestErrorRateHigh's min_traffic of 0.1/s), every one of them an engine error."""
    base = incidents.healthy()
    failing = (RequestProfile(1.0, 200, 20, 0.01, 0.05, 0.02, finished_reason="error"),)
    tiny = vllm_engine(
        TINY["namespace"], TINY["pod"], TINY["model_name"], 0, steps=base.steps, step=base.step,
        requests=1, profiles=failing, prior_steps=100,
    )  # fmt: skip
    tiny.append(up(vllm_target(TINY["namespace"], TINY["pod"]), 1, steps=base.steps))
    start = backfill_start(base.steps, base.step)
    prom = LocalPrometheus(to_openmetrics(list(base) + tiny, start, base.step)).start()
    yield Served(prom, base, base.time_at(start, base.eval_step))
    prom.close()


def test_a_model_below_the_traffic_guard_is_no_subject(tiny_served, capsys):
    """One failed request of one is 100% errors, but the alert does not page below its min_traffic:
    investigate does not judge it either, and names no cause."""
    s = tiny_served
    alert = PAGES["VLLMRequestErrorRateHigh"].alert.spec
    assert 1 / s.scenario.step < alert.min_traffic  # the lab model is under the guard
    inv = investigate_json(capsys, s, "VLLMRequestErrorRateHigh")
    share = steps(inv)["error-share"]
    assert TINY["model_name"] not in {x["labels"].get("model_name") for x in share["series"]}
    assert share["verdict"] == "healthy" and inv["alert_labels"] == {} and inv["causes"] == []
    assert "condition does not hold now" in inv["summary"]
    # the unguarded share is what the page would have judged: the lab model at 100%
    unguarded = Queries(MODEL).build(PAGES["VLLMRequestErrorRateHigh"].step("error-share").step.query, None)
    raw = s.prom.query(unguarded, time=s.at)
    assert {r["metric"]["model_name"]: float(r["value"][1]) for r in raw}[TINY["model_name"]] == 1.0


def run_specs(capsys, specs, alert: str, served_one: Served) -> tuple[int, str, str]:
    code = main(
        [
            "investigate",
            "--specs",
            str(specs),
            alert,
            "--prometheus",
            served_one.url,
            "--at",
            str(served_one.at),
        ]
        + ["--format", "json", "-q"]
    )
    out, err = capsys.readouterr()
    return code, out, err


# -- firing alerts from the Prometheus itself -----------------------------------------------------------


def test_triage_of_firing_alerts_at_a_time(served, capsys):
    s = served("kv_saturation")
    code, out, err = run(capsys, "--prometheus", s.url, "--at", str(s.at), "--format", "json", "-q")
    assert code == 0, err
    doc = json.loads(out)
    assert [i["alert"] for i in doc["investigations"]] == [
        "VLLMKVCacheUsageHigh"
    ]  # pending ones are not triaged
    inv = doc["investigations"][0]
    bad = s.scenario.truth["bad"][0]
    assert {k: inv["alert_labels"][k] for k in bad} == bad
    st = steps(inv)
    # scoped to the firing engine: one series, the bad one
    assert [x["labels"]["engine"] for x in st["kv-usage"]["series"]] == ["1"]
    assert st["kv-usage"]["verdict"] == "unhealthy"
    assert any("KubePodCrashLooping" in n for n in doc["notes"])


def test_no_firing_alerts_now(served, capsys):
    s = served("kv_saturation")  # backfilled data lies in the past; nothing fires now
    code, out, _ = run(capsys, "--prometheus", s.url)
    assert code == 0
    assert "No alerts are firing now (from /api/v1/alerts)." in out


# -- filters and empty results ------------------------------------------------------------------------


def test_label_filter_narrows_every_query(served, capsys):
    s = served("kv_saturation")
    other = incidents.POD_1
    inv = investigate_json(capsys, s, "VLLMKVCacheUsageHigh", "--label", f"pod={other}")
    st = steps(inv)
    assert st["kv-usage"]["verdict"] == "healthy"
    assert {x["labels"]["pod"] for x in st["kv-usage"]["series"]} == {other}
    assert f'pod="{other}"' in st["kv-usage"]["query"]


def test_empty_result_says_no_data(served, capsys):
    inv = investigate_json(
        capsys, served("healthy"), "VLLMTimeToFirstTokenP95High", "--label", "namespace=nowhere"
    )
    assert inv["verdict"] == "no-data"
    assert inv["summary"].startswith("no data")
    assert all(x["series_count"] == 0 for x in inv["steps"])


def test_empty_tsdb(capsys):
    with LocalPrometheus(None) as prom:
        code, out, _ = run(capsys, "DCGMExporterDown", "--prometheus", prom.url, "--format", "json", "-q")
    assert code == 0
    inv = json.loads(out)["investigations"][0]
    st = steps(inv)
    assert st["exporter-up"]["verdict"] == "unhealthy"  # no target matches at all
    assert st["targets-down"]["verdict"] == "unhealthy"  # absent(up{...}) fires
    assert inv["verdict"] == "unhealthy"


# -- transport: unreachable, auth, TLS, timeouts, failing queries -------------------------------------


def test_unreachable_server(capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    t0 = time.monotonic()
    code, out, err = run(capsys, "VLLMKVCacheUsageHigh", "--prometheus", f"http://127.0.0.1:{port}", "-q")
    assert code == 1 and out == ""
    assert (
        err.strip()
        == f"servewatch: error: cannot reach Prometheus at http://127.0.0.1:{port}: connection refused"
    )
    assert time.monotonic() - t0 < 5


class Proxy:
    """A reverse proxy in front of the real Prometheus that demands credentials and can misbehave."""

    def __init__(
        self,
        upstream: str,
        *,
        token: str | None = TOKEN,
        basic: tuple[str, str] | None = None,
        fail_when: str | None = None,
        delay: float = 0.0,
        tls: tuple[str, str] | None = None,
    ):
        self.upstream, self.token, self.basic = upstream, token, basic
        self.fail_when, self.delay = fail_when, delay
        self.seen_auth: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, body: bytes, ctype: str = "application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                auth = self.headers.get("Authorization", "")
                proxy.seen_auth.append(auth)
                ok = (proxy.token and auth == f"Bearer {proxy.token}") or (
                    proxy.basic
                    and auth == "Basic " + base64.b64encode(":".join(proxy.basic).encode()).decode()
                )
                if not ok:
                    return self._reply(401, b"Unauthorized\n", "text/plain")
                time.sleep(proxy.delay)
                text = urllib.parse.unquote_plus((self.path + "&" + (body or b"").decode()))
                if proxy.fail_when and proxy.fail_when in text:
                    err = {
                        "status": "error",
                        "errorType": "execution",
                        "error": "found duplicate series for the match group on the right hand-side",
                    }
                    return self._reply(422, json.dumps(err).encode())
                req = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=body,
                    method=self.command,
                    headers={"Content-Type": self.headers.get("Content-Type", "")},
                )
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        return self._reply(resp.status, resp.read())
                except urllib.error.HTTPError as exc:
                    return self._reply(exc.code, exc.read())

            do_GET = do_POST = _handle

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # a client that gave up (the --timeout test) is expected; anything else is a test bug
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        # close() waits for the loop's next poll: half a second by default, for every test with a proxy
        loop = {"poll_interval": 0.05}
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs=loop, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(served):
    made = []

    def make(name="kv_saturation", **kw):
        p = Proxy(served(name).prom.url, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def test_bearer_token_from_the_environment(proxy, served, capsys, monkeypatch):
    p = proxy()
    s = served("kv_saturation")
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_TOKEN", TOKEN)
    code, out, err = run(
        capsys, "VLLMKVCacheUsageHigh", "--prometheus", p.url, "--at", str(s.at), "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["investigations"][0]["verdict"] == "unhealthy"
    assert set(p.seen_auth) == {f"Bearer {TOKEN}"}
    assert TOKEN not in out and TOKEN not in err


def test_bad_token_is_a_clear_error(proxy, capsys, monkeypatch):
    p = proxy()
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_TOKEN", "wrong-" + TOKEN)
    code, out, err = run(capsys, "VLLMKVCacheUsageHigh", "--prometheus", p.url, "-q")
    assert code == 1 and out == ""
    assert err.strip() == (
        f"servewatch: error: {p.url} refused the request (HTTP 401 unauthorized): "
        "the bearer token in SERVEWATCH_PROMETHEUS_TOKEN was not accepted"
    )
    assert TOKEN not in err and "Traceback" not in err


def test_missing_credentials_say_how_to_set_them(proxy, capsys):
    p = proxy()
    code, _, err = run(capsys, "--prometheus", p.url, "-q")  # the firing-alerts path hits /api/v1/alerts
    assert code == 1
    assert "HTTP 401 unauthorized): it needs credentials: set SERVEWATCH_PROMETHEUS_TOKEN" in err


def test_basic_auth_from_the_environment(proxy, served, capsys, monkeypatch):
    p = proxy(token=None, basic=("oncall", "pa55word"))
    s = served("kv_saturation")
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_USER", "oncall")
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_PASSWORD", "pa55word")
    code, out, err = run(capsys, "VLLMPreemptionsHigh", "--prometheus", p.url, "--at", str(s.at), "-q")
    assert code == 0, err
    assert "pa55word" not in out + err
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_PASSWORD", "nope")
    code, _, err = run(capsys, "VLLMPreemptionsHigh", "--prometheus", p.url, "-q")
    assert (
        code == 1
        and "basic-auth credentials in SERVEWATCH_PROMETHEUS_USER/SERVEWATCH_PROMETHEUS_PASSWORD" in err
    )
    assert "nope" not in err


def test_failing_query_is_reported_and_exits_1(proxy, served, capsys, monkeypatch):
    p = proxy("ttft_queueing", fail_when="vllm:request_queue_time_seconds")
    s = served("ttft_queueing")
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_TOKEN", TOKEN)
    code, out, err = run(
        capsys,
        "VLLMTimeToFirstTokenP95High",
        "--prometheus",
        p.url,
        "--at",
        str(s.at),
        "--format",
        "json",
        "-q",
    )
    assert code == 1
    inv = json.loads(out)["investigations"][0]  # the report still comes out
    st = steps(inv)
    assert st["queue-time"]["verdict"] == "error"
    assert st["prefill-time"]["verdict"] == "healthy"
    assert err.strip() == (
        "servewatch: error: 1 query failed; first: VLLMTimeToFirstTokenP95High step queue-time: "
        "Prometheus rejected the query (HTTP 422): execution: found duplicate series for the match "
        "group on the right hand-side"
    )


def test_timeout(proxy, capsys, monkeypatch):
    p = proxy(delay=1.5)
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_TOKEN", TOKEN)
    t0 = time.monotonic()
    code, _, err = run(capsys, "VLLMKVCacheUsageHigh", "--prometheus", p.url, "--timeout", "0.3", "-q")
    assert code == 1
    assert err.strip() == f"servewatch: error: {p.url} did not answer within 0.3 s (--timeout)"
    assert time.monotonic() - t0 < 5


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return str(d / "cert.pem"), str(d / "key.pem")


def test_tls_is_verified_by_default(proxy, served, cert, capsys, monkeypatch):
    p = proxy(tls=cert)
    s = served("kv_saturation")
    monkeypatch.setenv("SERVEWATCH_PROMETHEUS_TOKEN", TOKEN)
    code, _, err = run(capsys, "VLLMKVCacheUsageHigh", "--prometheus", p.url, "-q")
    assert code == 1
    assert "TLS verification failed" in err and "--ca-file" in err
    code, out, err = run(
        capsys, "VLLMKVCacheUsageHigh", "--prometheus", p.url, "--at", str(s.at), "--ca-file", cert[0], "-q"
    )
    assert code == 0, err
    code, out, err = run(
        capsys,
        "VLLMKVCacheUsageHigh",
        "--prometheus",
        p.url,
        "--at",
        str(s.at),
        "--insecure-skip-verify",
        "-q",
    )
    assert code == 0 and err == "", err


def test_fractional_timeout_is_accepted_by_prometheus(served, capsys):
    """--timeout 2.5 goes to Prometheus as a query timeout it understands (it rejects "2.5s")."""
    s = served("kv_saturation")
    code, _, err = run(
        capsys, "VLLMKVCacheUsageHigh", "--prometheus", s.url, "--at", str(s.at), "--timeout", "2.5", "-q"
    )
    assert code == 0, err
