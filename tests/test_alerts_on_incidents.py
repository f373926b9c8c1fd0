"""The generated alerts fire on realistic incidents, for exactly the affected things, and stay silent on
healthy data: every alerting rule of rules/gpu.rules.yaml and rules/vllm.rules.yaml, evaluated on a real
Prometheus 3.5 holding each scenario of servewatch_testkit.synth.INCIDENTS.

Backfill evaluates recording rules, not alerts, so each alert's ``expr`` (read from the generated file) is
queried directly: as an instant query at the scenario's evaluation time (the set of firing things), and as
a range query over the whole scenario on the 30 s grid (every evaluation Prometheus would have made). An
alert with ``for: D`` fires at the evaluation time only if its expression held at every evaluation of the
last D, so the range must cover ``[t - D, t]`` without a gap. Recorded series sit at an offset after each
grid point (localprom), so at a grid point the alert reads the previous step's evaluation: harmless here,
because every incident is stationary for far longer than ``for`` before the evaluation time. Backfilled
series have no staleness markers: a vanished metric counts as present for 5 minutes after its last sample,
which the absence alerts' ``for`` window easily absorbs.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

import pytest
import yaml

from servewatch.model import Model
from servewatch.spec.loader import load
from servewatch.spec.schema import seconds
from servewatch_testkit import ahead, rule_reads
from servewatch_testkit.ahead import Ahead
from servewatch_testkit.mutate.runner import RULES_ENV
from servewatch_testkit.synth import INCIDENTS, incident
from servewatch_testkit.synth.scenario import Scenario
from test_dashboards_integration import boards_of, incident_reads, incident_server

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

REPO = Path(__file__).resolve().parents[1]
# `make mutate` (servewatch_testkit/mutate) points this at mutated copies of the rule files.
RULES_DIR = Path(os.environ.get(RULES_ENV) or REPO / "rules")
RULE_FILES = [RULES_DIR / "gpu.rules.yaml", RULES_DIR / "vllm.rules.yaml"]


def _alerts() -> dict[str, dict]:
    """alert name -> {expr, for (seconds), threshold (None for absence alerts)}: the expressions from the
    generated files, the thresholds as the specs resolve them."""
    thresholds = {a.alert: a.spec.threshold for a in Model(load(REPO / "specs")).alerts()}
    out = {}
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    out[rule["alert"]] = {
                        "expr": rule["expr"],
                        "for": seconds(rule.get("for", "0s")),
                        "threshold": thresholds[rule["alert"]],
                    }
    return out


ALERTS = _alerts()


@functools.cache
def _incident(name: str) -> Scenario:
    """Each scenario built once: the ground-truth test and its server read the same one."""
    return incident(name)


# -- which things each alert names, projected on the labels that identify them ---------------------------


def engines(t) -> list[dict]:
    return [{k: b[k] for k in ("namespace", "pod", "model_name", "engine")} for b in t["bad"]]


def model(t) -> list[dict]:
    return [{"namespace": t["namespace"], "model_name": t["model_name"], "quantile": "0.95"}]


def gpus(t) -> list[dict]:
    """A GPU alert names the GPU and its host; never its workload's namespace or pod, which change
    under it and would restart `for` (docs/alert-labels.md)."""
    return [
        {"UUID": b["UUID"], "host": b["host"], "gpu": b["gpu"], "namespace": None, "pod": None}
        for b in t["bad"]
    ]


def exporters(t) -> list[dict]:
    return [{"job": b["job"], "instance": b["instance"]} for b in t["bad"]]


def vllm_targets(t) -> list[dict]:
    return [{"namespace": b["namespace"], "pod": b["pod"]} for b in t["bad"]]


def namespaces(t) -> list[dict]:
    """All targets of a namespace gone: the alert names the namespace, no target."""
    return [{"namespace": b["namespace"], "job": None, "instance": None} for b in t["bad"]]


def gpu_instances(t) -> list[dict]:
    return [
        {"UUID": b["UUID"], "GPU_I_ID": b["GPU_I_ID"], "host": b["host"], "metric": b["metric"]}
        for b in t["bad"]
    ]


def lost_gpus(t) -> list[dict]:
    """A vanished GPU is named with what the parts' memory kept: host, index, model; no namespace."""
    return [{k: b[k] for k in ("UUID", "host", "gpu", "modelName")} | {"namespace": None} for b in t["bad"]]


def missing_inputs(t) -> list[dict]:
    return [{"job": b["job"], "instance": b["instance"], "metric": b["metric"]} for b in t["bad"]]


# -- the table: what each incident fires, and why ----------------------------------------------------------
# FIRES[scenario][alert] = (who, truth key of the value the alert sees or None, reason)
FIRES: dict[str, dict[str, tuple[Callable, str | None, str]]] = {
    "healthy": {},
    "kv_saturation": {
        "VLLMKVCacheUsageHigh": (
            engines,
            "kv_cache_usage_perc",
            "the saturated engine's KV cache is at 0.98; its three siblings stay at 0.45",
        ),
        "VLLMInterTokenLatencyP95High": (
            model,
            "itl_p95_model_after",
            "that engine decodes 3x slower: a quarter of the model's tokens, p95 0.14 s",
        ),
    },
    "ttft_queueing": {
        "VLLMTimeToFirstTokenP95High": (
            model,
            "ttft_p95_after",
            "every request queues 4 s longer: TTFT p95 4.875 s",
        ),
    },
    "ttft_long_prompts": {
        "VLLMTimeToFirstTokenP95High": (
            model,
            "ttft_p95_after",
            "4x longer prompts and prefill: TTFT p95 4.17 s",
        ),
    },
    "ep_rank_gpu_full": {
        "GPUFramebufferUsageHigh": (
            gpus,
            "fb_ratio",
            "one GPU at 0.97; the other seven, its pod's three included, at 0.6",
        ),
    },
    "dcgm_renamed": {
        "GPUFramebufferMetricsMissing": (
            exporters,
            None,
            "both exporters are up but export only the 4.9 byte names, no MiB pair",
        ),
    },
    "vllm_stats_missing": {
        "VLLMMetricsAbsent": (
            vllm_targets,
            None,
            "POD_1's target is up (up = 1) without a single vllm: series",
        ),
    },
    "gpu_pod_label_flap": {
        "GPUFramebufferUsageHigh": (
            gpus,
            "fb_ratio",
            "the full GPU's pod mapping comes and goes every 6 minutes; the alert's labels do not",
        ),
    },
    "vllm_scrape_gone": {
        "VLLMMetricsAbsent": (
            namespaces,
            None,
            "every vLLM target of llm-serving vanished; chat-serving keeps its target",
        ),
    },
    "mig_without_fb": {
        "GPUFramebufferMetricsMissing": (
            gpu_instances,
            None,
            "both MIG instances of the reconfigured GPU export other fields but no FB pair",
        ),
    },
    "wedged_engine": {
        "VLLMEngineStalled": (
            engines,
            "in_flight",
            "POD_1 engine 0 holds its 10 running requests and computes nothing; its siblings keep working",
        ),
    },
    "vanished_rank": {
        "VLLMEngineMissing": (
            engines,
            None,
            "POD_1's engine 1 stops reporting; the target is up and engine 0 keeps serving",
        ),
    },
    "vanished_gpu": {
        "GPUMissing": (
            lost_gpus,
            None,
            "GPU 3 of gpu-node-a falls off the bus; its exporter is up and exports the other three",
        ),
    },
    "idle_rank": {
        "VLLMEngineIdle": (
            engines,
            None,
            "POD_1's engine 1 gets no work while engine 0 of the same pod serves at the baseline",
        ),
    },
    "vllm_kv_renamed": {
        "VLLMSignalMetricsMissing": (
            missing_inputs,
            None,
            "POD_1 exports vllm:gpu_cache_usage_perc, not vllm:kv_cache_usage_perc; "
            "its other vllm: series stay",
        ),
    },
}

# SILENT[scenario][alert] = (truth key, reason): the alerts an incident comes close to, or makes one expect,
# and the ground-truth value that keeps them at or below their threshold.
# Any alert not in FIRES must be silent.
SILENT: dict[str, dict[str, tuple[str, str]]] = {
    "healthy": {
        "VLLMTimeToFirstTokenP95High": ("ttft_p95", "TTFT p95 0.917 s"),
        "VLLMInterTokenLatencyP95High": ("itl_p95", "ITL p95 0.04875 s"),
        "VLLMEndToEndLatencyP95High": ("e2e_p95", "e2e p95 19.17 s"),
        "VLLMKVCacheUsageHigh": ("kv_cache_usage_perc", "KV cache 0.45 on every engine"),
        "VLLMRequestsWaitingHigh": ("waiting", "nothing waits"),
        "VLLMPreemptionsHigh": ("preemptions_per_s", "no preemptions"),
        "VLLMRequestErrorRateHigh": ("error_share", "no aborts or errors (max_tokens ends with length)"),
        "GPUFramebufferUsageHigh": ("fb_ratio", "FB 0.6 on every GPU"),
    },
    "kv_saturation": {
        "VLLMPreemptionsHigh": (
            "preemptions_per_s",
            "3 preemptions a step is 0.1/s, a tenth of the threshold",
        ),
        "VLLMRequestsWaitingHigh": ("waiting", "6 waiting on the saturated engine"),
        "VLLMEndToEndLatencyP95High": (
            "e2e_p95_model_after",
            "the slow engine lifts the model's e2e p95 to 45.6 s",
        ),
        "VLLMTimeToFirstTokenP95High": ("ttft_p95", "TTFT unchanged at 0.917 s: decode slows, not prefill"),
    },
    "ttft_queueing": {
        "VLLMRequestsWaitingHigh": ("waiting", "18 waiting per engine"),
        "VLLMKVCacheUsageHigh": ("kv_cache_usage_perc", "KV cache 0.7 on every engine"),
        "VLLMEndToEndLatencyP95High": ("e2e_p95_after", "4 s more queueing makes the e2e p95 28.3 s"),
    },
    "ttft_long_prompts": {
        "VLLMEndToEndLatencyP95High": ("e2e_p95_after", "e2e p95 19.44 s: longer prefill, same decode"),
    },
    "ep_rank_gpu_full": {},  # the siblings at 0.6 (and any pod average, 0.69): test_full_gpu_is_named_...
    "dcgm_renamed": {
        "GPUFramebufferUsageHigh": (
            "fb_ratio",
            "blind, not firing: the ratio is 0.6 but its MiB inputs are gone",
        ),
    },
    "vllm_stats_missing": {},
    "gpu_pod_label_flap": {},
    "vllm_scrape_gone": {},
    "mig_without_fb": {},
    "wedged_engine": {
        "VLLMTimeToFirstTokenP95High": ("ttft_p95", "the other engines keep the model's TTFT p95 at 0.917 s"),
        "VLLMRequestErrorRateHigh": ("error_share", "a wedged engine finishes nothing, not even errors"),
    },
    "vanished_rank": {},
    "vanished_gpu": {},
    "idle_rank": {
        "VLLMTimeToFirstTokenP95High": ("ttft_p95", "the other ranks keep the model's TTFT p95 at 0.917 s"),
    },
    "vllm_kv_renamed": {
        "VLLMKVCacheUsageHigh": (
            "kv_cache_usage_perc",
            "blind for POD_1, not firing: its KV value (0.45) is only renamed; POD_0 stays at 0.45",
        ),
    },
}

FIRST_RECORDED = 2  # the step from which every backfilled record has a sample (the slowest: 1m)
HEALTHY_MARGIN = 2 / 3  # every healthy value is at most this share of its alert's threshold


def test_the_table_covers_every_incident_and_alert():
    assert set(FIRES) == set(SILENT) == set(INCIDENTS)
    assert len(ALERTS) == 21
    for table in (FIRES, SILENT):
        for alerts in table.values():
            assert set(alerts) <= set(ALERTS)
    for name in INCIDENTS:
        assert not set(FIRES[name]) & set(SILENT[name]), name
    assert all(FIRES[name] for name in INCIDENTS if name != "healthy")


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_the_ground_truth_explains_the_table(name):
    """The reasons hold in the ground truth: firing values beyond the threshold, silent ones not (healthy
    ones with a clear margin)."""
    t = _incident(name).truth
    for alert, (_, key, why) in FIRES[name].items():
        threshold = ALERTS[alert]["threshold"]
        if key is not None:
            assert t[key] > (threshold if threshold is not None else 0), (alert, why)
    for alert, (key, why) in SILENT[name].items():
        threshold = ALERTS[alert]["threshold"]
        assert t[key] <= threshold, (alert, why)
        if name == "healthy":
            assert t[key] <= HEALTHY_MARGIN * threshold, (alert, t[key], threshold)


# -- the real Prometheus ---------------------------------------------------------------------------------


class Served:
    def __init__(self, name: str, read: set[str] | None, rule_files: list[Path], reuse: Path):
        """``read``: the metric names the server holds (at least those the rules select: no query
        here can see the others); ``rule_files``: at least RULE_FILES (no alert here reads another's
        records)."""
        self.scenario = sc = _incident(name)
        _, self.start, prom = incident_server(name, read, rule_files, reuse)
        self.prom = prom.start()
        self.t = sc.time_at(self.start, sc.eval_step)

    def at(self, step: int) -> float:
        return self.scenario.time_at(self.start, step)


# servers prepared at once (servewatch_testkit.ahead): a backfill mostly waits, it computes little
PREPARING = len(os.sched_getaffinity(0)) + 1


def _served_data(default_build) -> tuple[list[Path], set[str] | None]:
    """(rule files, series names) of the incident servers. On the committed rules, those of
    test_dashboards_integration's incident servers (every rule file, the series its panels show too),
    whose blocks a session then builds once for both modules; on a mutant's rules (RULES_ENV, the
    mutation runs) only the rule files the alerts are in and the series they read."""
    if os.environ.get(RULES_ENV):
        return RULE_FILES, rule_reads.selected_names(RULE_FILES)
    model, files = default_build
    rule_files = sorted(RULES_DIR.glob("*.rules.yaml"))
    return rule_files, incident_reads(model, boards_of(files), rule_files)


@pytest.fixture(scope="module")
def served(request, default_build, prometheus_data):
    """name -> Served; one Prometheus per scenario, those the selected tests read prepared in the
    background in the order they ask for them, all stopped when the module ends (or -x stops it)."""
    rule_files, read = _served_data(default_build)
    servers = Ahead(
        lambda name: Served(name, read, rule_files, prometheus_data), ahead.asked(request), PREPARING
    )
    yield servers
    servers.close(lambda s: s.prom.close())


def _project(labels: dict, keys) -> tuple:
    return tuple((k, labels.get(k)) for k in sorted(keys))


CASES = [(name, alert) for name in INCIDENTS for alert in ALERTS]


@pytest.mark.parametrize("name, alert", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_alert_on_incident(served, name, alert):
    s = served(name)
    sc, rule = s.scenario, ALERTS[alert]
    now = s.prom.query(rule["expr"], s.t)
    # every evaluation over the scenario, from the first at which every record is there: backfilled
    # records sit their group's phase after the grid, up to one interval (1m: gpu-inputs) after the
    # first sample, where a live server has evaluated them just before the alert
    history = s.prom.query_range(rule["expr"], s.at(FIRST_RECORDED), s.t, sc.step)
    if alert not in FIRES[name]:
        fired = [(r["metric"], len(r["values"]), r["values"][0][0]) for r in history]
        assert not now and not fired, f"{alert} fires on {name} (labels, evaluations, first at): {fired}"
        return

    who, key, why = FIRES[name][alert]
    want = who(sc.truth)
    keys = set().union(*want)
    wanted = {_project(w, keys) for w in want}

    assert len(now) == len(want), (why, [r["metric"] for r in now])
    assert {_project(r["metric"], keys) for r in now} == wanted, why
    if key is not None:
        for r in now:
            assert float(r["value"][1]) == pytest.approx(sc.truth[key], rel=1e-9), (why, r["metric"])

    # Over the whole scenario, only the affected things ever match, and only from the incident on; at the
    # evaluation time each has matched at every evaluation of the last `for`, so the alert is firing.
    window = [s.t - rule["for"] + i * sc.step for i in range(int(rule["for"] // sc.step) + 1)]
    assert {_project(r["metric"], keys) for r in history} == wanted, why
    for r in history:
        times = [float(ts) for ts, _ in r["values"]]
        assert min(times) >= s.at(sc.incident_step), (r["metric"], "matched before the incident")
        assert set(window) <= set(times), (r["metric"], f"not active for the whole for: {rule['for']}s")


def test_full_gpu_is_named_and_its_siblings_are_not(served):
    s = served("ep_rank_gpu_full")
    bad = s.scenario.truth["bad"][0]
    firing = s.prom.query(ALERTS["GPUFramebufferUsageHigh"]["expr"], s.t)
    siblings = [
        g["UUID"] for g in s.scenario.truth["gpus"] if g["pod"] == bad["pod"] and g["UUID"] != bad["UUID"]
    ]
    assert len(siblings) == 3
    assert [r["metric"]["UUID"] for r in firing] == [bad["UUID"]]
    ratios = s.prom.query_map("gpu:dcgm_fb_used:ratio", s.t, by=("UUID",))
    assert all(ratios[(u,)] == pytest.approx(s.scenario.truth["fb_ratio_siblings"]) for u in siblings)
