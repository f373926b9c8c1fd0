"""The SLO rules, dashboard and runbook on a real Prometheus 3.5 holding synthetic vLLM traffic.

One model, DeepSeek, is served by two data-parallel engines that fail differently: a busy one (40
requests per 30 s, 1 in 40 with a 3 s first token) and a quiet one (4 per 30 s: 2 slow, 1 error).
Traffic-weighted, 3 of 44 requests miss the 2.5 s TTFT threshold and 1 of 44 fails; the average of
the two engines' ratios would say 26% and 12.5%. The busy engine's pod restarts after 30 minutes
(a new pod whose counters start at 0). Qwen is healthy; Mixtral is idle.

The SLO rules read each other (long windows average the short recordings), which one run of
`promtool tsdb create-blocks-from rules` cannot backfill (each rule sees only raw data), so the rule
file is backfilled in dependency stages, each stage reading the blocks of the ones before.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from servewatch import generate
from servewatch.cli import main
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import RequestProfile, to_openmetrics, vllm_engine

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

STEP = 30.0
STEPS = 4 * 120 + 1  # 4 h
RESTART = 60  # the busy engine's pod restarts at 30 minutes
NS = "llm"
DEEPSEEK, QWEN, IDLE = (
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3-235B-A22B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
)
GPUS_PER_ENGINE = 4
FAST = RequestProfile(1, 800, 200, 0.05, 0.20, 0.035)  # first token after 0.25 s
SLOW = RequestProfile(1, 800, 200, 2.0, 1.0, 0.035)  # 3 s: misses the 2.5 s threshold
FAILED = RequestProfile(1, 800, 1, 0.05, 0.20, 0.035, finished_reason="error")  # fast, but an error
BUSY = [RequestProfile(**{**FAST.__dict__, "weight": 39}), RequestProfile(**{**SLOW.__dict__, "weight": 1})]
QUIET = [
    RequestProfile(**{**SLOW.__dict__, "weight": 2}),
    RequestProfile(**{**FAILED.__dict__, "weight": 1}),
    RequestProfile(**{**FAST.__dict__, "weight": 1}),
]
TTFT_ERROR = 3 / 44  # traffic-weighted share of first tokens slower than 2.5 s
AVAIL_ERROR = 1 / 44  # traffic-weighted share of errors
TOKENS_PER_S = (40 * 200 + 2 * 200 + 1 * 1 + 1 * 200) / STEP  # generated tokens of DeepSeek per second


def traffic() -> list:
    prior = {"prior_steps": 100, "steps": STEPS, "step": STEP}
    out = vllm_engine(
        NS, "deepseek-v3-0", DEEPSEEK, 0, requests=40, profiles=BUSY, active=(0, RESTART), **prior
    )
    out += vllm_engine(
        NS, "deepseek-v3-0-restarted", DEEPSEEK, 0, requests=40, profiles=BUSY, active=(RESTART, STEPS),
        steps=STEPS, step=STEP,
    )  # fmt: skip
    out += vllm_engine(NS, "deepseek-v3-1", DEEPSEEK, 1, requests=4, profiles=QUIET, **prior)
    out += vllm_engine(NS, "qwen-0", QWEN, 0, requests=20, profiles=[FAST], **prior)
    out += vllm_engine(NS, "mixtral-0", IDLE, 0, requests=0, **prior)
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory, specs_with):
    specs = specs_with(
        {"dashboards.yaml": [("gpus_per_engine: null", f"gpus_per_engine: {GPUS_PER_ENGINE}")]}
    )
    model, files = generate.build(specs)
    work = tmp_path_factory.mktemp("slo-rules")
    rules = work / "slo.rules.yaml"
    rules.write_text(files["rules/slo.rules.yaml"])
    start = backfill_start(STEPS, STEP)
    om = to_openmetrics(traffic(), start, STEP)
    # the dashboards read the vLLM recording rules too; LocalPrometheus backfills a record that
    # reads another one after it. Rules start recording 10 minutes in, when every rate window is full
    vllm = work / "vllm.rules.yaml"
    vllm.write_text(files["rules/vllm.rules.yaml"])
    with LocalPrometheus(om, rule_files=[rules, vllm], rules_start=start + 600) as prom:
        yield {
            "prom": prom,
            "t": start + (STEPS - 1) * STEP,
            "model": model,
            "files": files,
            "specs": specs,
            "board": json.loads(files["dashboards/slo.json"]),
        }


def per_model(env, expr: str) -> dict[str, float]:
    return {r["metric"]["model_name"]: float(r["value"][1]) for r in env["prom"].query(expr, env["t"])}


# -- the SLI: traffic-weighted, from the short recordings ---------------------------------------------


@pytest.mark.parametrize("window", ["5m", "30m", "1h", "2h"])
def test_every_window_is_traffic_weighted_not_an_average_of_ratios(env, window):
    ttft = per_model(env, f'slo:sli_error:ratio_rate{window}{{slo="vllm-ttft"}}')
    avail = per_model(env, f'slo:sli_error:ratio_rate{window}{{slo="vllm-availability"}}')
    assert math.isclose(ttft[DEEPSEEK], TTFT_ERROR, rel_tol=1e-6), ttft
    assert math.isclose(avail[DEEPSEEK], AVAIL_ERROR, rel_tol=1e-6), avail
    assert abs(ttft[QWEN]) < 1e-12 and abs(avail[QWEN]) < 1e-12  # 0, give or take float noise
    assert IDLE not in ttft and IDLE not in avail  # 0/0: no ratio, not 0 and not NaN


def test_long_windows_agree_with_raw_counters_over_the_window(env):
    """The 1h SLI averaged from 5m recordings equals the ratio of the raw counters' increase over 1h."""
    raw = (
        '1 - sum by (model_name) (increase(vllm:time_to_first_token_seconds_bucket{le="2.5"}[1h]))'
        " / sum by (model_name) (increase(vllm:time_to_first_token_seconds_count[1h]))"
    )
    recorded = per_model(env, 'slo:sli_error:ratio_rate1h{slo="vllm-ttft"}')
    for model, value in per_model(env, raw).items():
        if model in recorded:
            assert math.isclose(recorded[model], value, rel_tol=1e-6, abs_tol=1e-12), model


def test_a_pod_restart_hardly_moves_the_window_that_holds_it(env):
    """The 6h window holds the busy engine's restart: its new counters start at 0 and rate() cannot
    extrapolate either pod's last or first minutes, so the busy engine weighs a little less for ~5
    minutes. The SLI moves by under 2% of itself (a reset read as a drop would move it by far more)."""
    six = per_model(env, 'slo:sli_error:ratio_rate6h{slo="vllm-ttft"}')[DEEPSEEK]
    assert six != TTFT_ERROR and math.isclose(six, TTFT_ERROR, rel_tol=0.02), six


def test_objective_budget_and_goodput(env):
    assert per_model(env, 'slo:objective:ratio{slo="vllm-ttft"}')[DEEPSEEK] == 0.99
    # The 28d window holds the restart, where this test's stages record good and valid rates at
    # slightly different moments (a live group records them together).
    period = per_model(env, 'slo:sli_error:ratio_rate28d{slo="vllm-ttft"}')
    assert math.isclose(period[DEEPSEEK], TTFT_ERROR, rel_tol=0.05) and period[QWEN] < 0.001
    # each stage records at its own phase: compare the budget with the 28d ratio it read, at its time
    remaining = 'slo:period_error_budget_remaining:ratio{slo="vllm-ttft"}'
    for model, value in per_model(env, remaining).items():
        when = per_model(env, f"timestamp({remaining})")[model]
        read = {
            r["metric"]["model_name"]: float(r["value"][1])
            for r in env["prom"].query('slo:sli_error:ratio_rate28d{slo="vllm-ttft"}', when)
        }[model]
        assert math.isclose(value, 1 - read / (1 - 0.99), rel_tol=1e-9), model
    goodput = per_model(env, "model:vllm_goodput_tokens:rate5m")
    expected = TOKENS_PER_S * (1 - TTFT_ERROR) * (1 - AVAIL_ERROR)
    assert math.isclose(goodput[DEEPSEEK], expected, rel_tol=1e-6), goodput
    assert math.isclose(goodput[QWEN], 20 * 200 / STEP, rel_tol=1e-6)


# -- the alerts -------------------------------------------------------------------------------------


def test_burn_rate_rows_fire_for_the_failing_model_only(env):
    """TTFT burns 3/44 / 1% = 6.8x: the 6x page row and both ticket rows; availability burns
    1/44 / 0.5% = 4.5x: the ticket rows. Healthy and idle models fire nothing."""
    fired = set()
    for alert in env["model"].alerts():
        if alert.family != "slo":
            continue
        for r in env["prom"].query(alert.expr, env["t"]):
            fired.add((alert.alert, r["metric"]["model_name"], alert.labels["tier"], alert.labels["long"]))
    assert fired == {
        ("VLLMTTFTErrorBudgetBurn", DEEPSEEK, "page", "6h"),
        ("VLLMTTFTErrorBudgetBurn", DEEPSEEK, "ticket", "1d"),
        ("VLLMTTFTErrorBudgetBurn", DEEPSEEK, "ticket", "3d"),
        ("VLLMAvailabilityErrorBudgetBurn", DEEPSEEK, "ticket", "1d"),
        ("VLLMAvailabilityErrorBudgetBurn", DEEPSEEK, "ticket", "3d"),
    }


# -- the SLO dashboard ------------------------------------------------------------------------------


def interpolate(expr: str, rng: str = "1h") -> str:
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", rng).replace("$__interval", "1m")
    return expr.replace("$namespace", ".*").replace("$model", ".*")


def panels(env):
    """Every panel, those of collapsed rows included."""
    out = []
    for p in env["board"]["panels"]:
        out += p.get("panels", []) if p["type"] == "row" else [p]
    return out


def ttft_panel(env, title: str) -> dict:
    return next(p for p in panels(env) if p["title"] == title and 'slo="vllm-ttft"' in str(p))


def test_every_slo_panel_answers_with_the_labels_its_legend_names(env):
    for p in panels(env):
        results = [env["prom"].query(interpolate(t["expr"]), env["t"]) for t in p["targets"]]
        if p["title"].startswith("Burn-rate rows firing now"):
            assert any(results), p["title"]  # each alert row's condition: only some rows fire
            continue
        if p["title"].startswith("Models an SLO cannot measure"):  # a problem list: every input scraped
            assert not any(results) and p["fieldConfig"]["defaults"]["noValue"], p["title"]
            continue
        for t, result in zip(p["targets"], results, strict=True):
            assert result, f"{p['title']}: no data"
            named = set(re.findall(r"\{\{(\w+)\}\}", t.get("legendFormat", "")))
            for series in result:
                assert named <= set(series["metric"]), f"{p['title']}: {series['metric']} lacks {named}"


def test_the_alert_rows_table_shows_what_each_row_fires_on(env):
    """The panel an SLO alert's link opens: the 6h page row and the ticket rows of DeepSeek fire."""
    table = ttft_panel(env, "Burn-rate rows firing now, every model")
    fired = [
        {r["metric"]["model_name"]: float(r["value"][1]) for r in env["prom"].query(t["expr"], env["t"])}
        for t in table["targets"]
    ]
    assert [sorted(f) for f in fired] == [[], [DEEPSEEK], [DEEPSEEK], [DEEPSEEK]]  # 1h, 6h, 1d, 3d rows
    assert math.isclose(fired[1][DEEPSEEK], TTFT_ERROR / 0.01, rel_tol=0.02)


def test_burn_rate_panel_and_time_to_exhaustion(env):
    burn = ttft_panel(env, "Burn rate per window")
    one_hour = next(t for t in burn["targets"] if t["legendFormat"].endswith(" 1h"))
    rows = env["prom"].query(interpolate(one_hour["expr"]), env["t"])
    got = {r["metric"]["model_name"]: float(r["value"][1]) for r in rows}
    assert math.isclose(got[DEEPSEEK], TTFT_ERROR / 0.01, rel_tol=1e-6)
    left = next(t for t in ttft_panel(env, "Per model")["targets"] if "clamp_min" in t["expr"])
    rows = env["prom"].query(interpolate(left["expr"]), env["t"])
    got = {r["metric"]["model_name"]: float(r["value"][1]) for r in rows}
    assert got[DEEPSEEK] == 0  # the budget is already overspent
    assert QWEN not in got  # not burning: no value ("not burning"), not +Inf


def test_cost_per_million_good_tokens_over_the_range(env):
    """Over the last hour (after the restart): 2 engines x 4 GPUs x the price, per good token."""
    price = env["model"].spec.dashboards.defaults.cost.price_per_gpu_hour
    cost = next(p for p in panels(env) if p["title"].startswith("Cost per 1M good output tokens"))
    rows = env["prom"].query(interpolate(cost["targets"][0]["expr"], "1h"), env["t"])
    got = {r["metric"]["model_name"]: float(r["value"][1]) for r in rows}
    good = TOKENS_PER_S * (1 - TTFT_ERROR) * (1 - AVAIL_ERROR)
    expected = 2 * GPUS_PER_ENGINE * price / 3600 / good * 1e6
    assert math.isclose(got[DEEPSEEK], expected, rel_tol=1e-6), got
    assert IDLE not in got  # no good token: no value


# -- investigate ------------------------------------------------------------------------------------


def test_investigate_names_the_slow_engine_and_queueing(env, capsys, monkeypatch):
    monkeypatch.delenv("SERVEWATCH_PROMETHEUS_URL", raising=False)
    argv = ["investigate", "VLLMTTFTErrorBudgetBurn", "--specs", str(env["specs"]), "--prometheus"]
    argv += [env["prom"].url, "--at", str(env["t"]), "--format", "json", "-q"]
    argv += ["--label", f"namespace={NS}", "--label", f"model_name={DEEPSEEK}"]
    assert main(argv) == 0
    inv = json.loads(capsys.readouterr().out)["investigations"][0]
    steps = {s["id"]: s for s in inv["steps"]}
    assert steps["burn-6h"]["verdict"] == "unhealthy"  # above the 6h row's 6x
    assert steps["burn-long"]["verdict"] == "suspicious"  # 6.8x: burning, but under the 1h row's 14.4x
    assert steps["budget-left"]["verdict"] == "unhealthy"
    assert steps["per-engine-ttft"]["verdict"] == "unhealthy"
    worst = steps["per-engine-ttft"]["series"][0]["labels"]
    assert worst["pod"] == "deepseek-v3-1"  # the quiet engine is the slow one
    assert steps["queue-time"]["verdict"] == "unhealthy"
    assert inv["verdict"] == "unhealthy"


def test_investigate_slo_inputs_counts_only_requests_the_slo_cannot_judge(env, capsys, monkeypatch):
    """Every model's TTFT bucket is scraped here, so SLOInputsMissing's page finds no request the SLO
    cannot judge: 0 for each served model, healthy. (Counting every valid request, it said unhealthy
    on any model with traffic.)"""
    monkeypatch.delenv("SERVEWATCH_PROMETHEUS_URL", raising=False)
    argv = ["investigate", "SLOInputsMissing", "--specs", str(env["specs"]), "--prometheus"]
    argv += [env["prom"].url, "--at", str(env["t"]), "--format", "json", "-q"]
    assert main(argv) == 0
    inv = json.loads(capsys.readouterr().out)["investigations"][0]
    step = next(s for s in inv["steps"] if s["id"] == "valid-events")
    assert step["verdict"] == "healthy", step["detail"]
    assert {x["labels"]["model_name"] for x in step["series"]} >= {DEEPSEEK, QWEN}
    assert all(x["value"] == 0 for x in step["series"])
    assert inv["verdict"] == "healthy" and inv["causes"] == []
