"""`servewatch calibrate --prometheus` on the synthetic load test's history, backfilled into a real
Prometheus 3.5: the same run as the bench files (servewatch_testkit/loadtest.py), seen by the server
per engine. The sustainable step, the saturation thresholds and the `for` must fall where the
synthetic truth allows; bench-only, Prometheus-only and both must agree; the written overrides
must pass `servewatch check` and `servewatch test`."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import yaml

from conftest import client_ttft
from servewatch import catalog
from servewatch.calibrate.targets import show
from servewatch.cli import main
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import to_openmetrics
from servewatch_testkit.loadtest import (
    BURST_KV,
    BURST_S,
    ENGINE_ERROR,
    FB_USED,
    FRONTEND_MODEL_LABEL,
    GATEWAY,
    KNEE,
    RATES,
    SCRAPE_S,
    STEP_SCRAPES,
    LoadTest,
    at,
)
from servewatch_testkit.synth.disaggregated import ROLE_LABEL

from test_calibrate import (
    ARGS,
    ERR_TARGET,
    ITL_TARGET,
    P99_TARGET,
    TTFT_TARGET,
    calibrate,
    sustainable_line,
    ttft_bounds,
)

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

NEXT = RATES[RATES.index(KNEE) + 1]  # the first rate that breaks a target
ROLE_CONFIG = [("  role: null\n", f"  role: {{label: {ROLE_LABEL}}}\n")]
CLIENT_CONFIG = [("  client_side: null\n", f"  client_side: {{source: {GATEWAY}}}\n")]
# prefill and decode behind the gateway, the TTFT SLO at one of its bounds (conftest.client_ttft)
CLIENT_SPECS = {"config.yaml": ROLE_CONFIG + CLIENT_CONFIG, "slos.yaml": list(client_ttft(GATEWAY))}
# prefill and decode apart behind the gateway; short outputs, so prefill's e2e passes decode's
PD_GATEWAY = dict(role_label=ROLE_LABEL, kv_transfer_s=0.05, output_tokens=16, gateway=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    lt = LoadTest()
    start = backfill_start(lt.samples, 30.0)
    with LocalPrometheus(lt.openmetrics(start)) as prom:
        a, z = lt.run_range(start)
        yield {
            "prom": ["--prometheus", prom.url, "--range", f"{a:.0f}..{z:.0f}", "--step-every", lt.step_every],
            "edges": (a, z),
            "bench": lt.write_bench(tmp_path_factory.mktemp("bench")),
            "url": prom.url,
        }


@pytest.fixture(scope="module")
def pd_run():
    """The same run with prefill and decode apart: each request also finishes its prefill leg."""
    lt = LoadTest(role_label=ROLE_LABEL)
    start = backfill_start(lt.samples, 30.0)
    with LocalPrometheus(lt.openmetrics(start)) as prom:
        a, z = lt.run_range(start)
        yield ["--prometheus", prom.url, "--range", f"{a:.0f}..{z:.0f}", "--step-every", lt.step_every]


@pytest.fixture(scope="module")
def pd_gateway():
    """Prefill and decode apart behind llm-d's endpoint picker: a decode engine's first token is only
    the KV transfer's wait, the client's is queue, prefill and transfer; outputs are short, so past
    the knee the prefill pod's end-to-end time passes the decode engines'."""
    lt = LoadTest(**PD_GATEWAY)
    start = backfill_start(lt.samples, 30.0)
    with LocalPrometheus(lt.openmetrics(start)) as prom:
        a, z = lt.run_range(start)
        yield lt, ["--prometheus", prom.url, "--range", f"{a:.0f}..{z:.0f}", "--step-every", lt.step_every]


def _printing(command, *args, **kw):
    """(what `command` returns, what it printed): module fixtures have no capsys."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        got = command(*args, **kw)
    return got, out.getvalue()


@pytest.fixture(scope="module")
def prom_only(run, specs_with):
    """The default specs calibrated on the history alone: (specs, alerts written, what it printed),
    one run that several tests read."""
    specs = specs_with()
    (code, alerts), out = _printing(calibrate, specs, *run["prom"], *ARGS)
    assert code == 0
    return specs, alerts, out


def test_the_history_finds_the_knee(prom_only):
    assert sustainable_line(prom_only[2]).startswith(f"#{RATES.index(KNEE) + 1} at {KNEE:g} req/s")


def test_saturation_thresholds_part_the_sustainable_step_from_the_broken_one(prom_only):
    _, alerts, _ = prom_only
    knee, broke = at(KNEE), at(NEXT)
    # strictly between, so the alert (`>`) fires at the broken load and not at the sustainable one;
    # the fullest engine (engine 0) is the one compared
    assert knee.kv_usage < alerts["VLLMKVCacheUsageHigh"]["threshold"] < broke.kv_usage
    assert knee.waiting < alerts["VLLMRequestsWaitingHigh"]["threshold"] < broke.waiting
    # preemptions are per engine: the load, and so the preemptions, split over two engines
    assert (
        knee.preemptions_per_s / 2 < alerts["VLLMPreemptionsHigh"]["threshold"] < broke.preemptions_per_s / 2
    )


def test_for_rides_out_the_burst_seen_at_sustainable_load(prom_only, default_model):
    _, alerts, _ = prom_only
    # the KV burst at the knee (above the threshold) lasts BURST_S: `for` must outlast it, by less
    # than one more evaluation (1m) rounded up to a minute
    kv_for = alerts["VLLMKVCacheUsageHigh"]["for"]
    assert BURST_KV > alerts["VLLMKVCacheUsageHigh"]["threshold"]
    assert BURST_S <= _seconds(kv_for) <= BURST_S + 60
    # no burst for the others: their `for` stays as the specs have it (and is not written)
    for name in ("VLLMTimeToFirstTokenP95High", "VLLMRequestsWaitingHigh", "VLLMRequestErrorRateHigh"):
        assert "for" not in alerts[name]


def _seconds(d: str) -> int:
    return int(d[:-1]) * {"s": 1, "m": 60, "h": 3600}[d[-1]]


def test_latency_thresholds_lie_between_the_knee_and_the_target(prom_only):
    _, alerts, _ = prom_only
    knee = at(KNEE)
    # the histogram's p95 interpolates in the bucket that holds the long prompts: (0.5, 0.75]
    assert 0.5 < alerts["VLLMTimeToFirstTokenP95High"]["threshold"] < TTFT_TARGET
    assert knee.itl_s < alerts["VLLMInterTokenLatencyP95High"]["threshold"] < ITL_TARGET
    assert 0 < alerts["VLLMRequestErrorRateHigh"]["threshold"] < ERR_TARGET


def test_a_signal_that_does_not_move_with_load_gives_no_threshold(prom_only):
    # vLLM holds its share of the framebuffer from the start: the FB ratio is FB_USED at every step
    _, alerts, out = prom_only
    assert f"gpu_fb_used_ratio does not tell the steps apart: {FB_USED:g} at sustainable step" in out
    assert "GPUFramebufferUsageHigh" not in alerts


def test_bench_prometheus_and_both_agree(run, prom_only, specs_with, capsys):
    _, prom_alerts, _ = prom_only
    _, bench_alerts = calibrate(specs_with(), "--bench", *run["bench"], *ARGS)
    capsys.readouterr()
    code, both_alerts = calibrate(specs_with(), "--bench", *run["bench"], *run["prom"], *ARGS)
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if "SUSTAINABLE" in line]
    assert len(lines) == 2 and lines[0].startswith(f"{KNEE:g} req/s") and f"at {KNEE:g} req/s" in lines[1]
    # with the server's view, the thresholds are on the alert's own scale (the histogram's quantile)
    assert both_alerts == prom_alerts
    # the client's view lands in the same truth range, a bucket's interpolation away
    for name in ("VLLMTimeToFirstTokenP95High", "VLLMInterTokenLatencyP95High", "VLLMRequestErrorRateHigh"):
        b, p = bench_alerts[name]["threshold"], prom_alerts[name]["threshold"]
        assert abs(b - p) <= 0.05 * max(b, p), name


def test_explicit_step_boundaries_give_the_same_answer(run, prom_only, specs_with):
    a, z = run["edges"]
    every = (z - a) / len(RATES)
    edges = ",".join(f"{a + k * every:.0f}" for k in range(1, len(RATES)))
    args = [x for x in run["prom"] if x not in ("--step-every", LoadTest().step_every)]
    code, alerts = calibrate(specs_with(), *args, "--steps", edges, *ARGS)
    assert code == 0
    assert alerts == prom_only[1]


def test_sources_with_different_steps_are_refused(run, specs_with, capsys):
    code, _ = calibrate(specs_with(), "--bench", *run["bench"][:3], *run["prom"], *ARGS)
    assert code == 2
    assert "different numbers of steps" in capsys.readouterr().err


def test_the_written_overrides_and_slo_pass_check_and_test(run, prom_only, specs_with, servewatch, tmp_path):
    # with a p99 target for the TTFT SLO, its threshold moves too: slos.yaml is written beside the
    # overrides, from the server's view (the histogram the SLI counts)
    specs = specs_with()
    code, alerts = calibrate(specs, *run["prom"], *ARGS, "--target", P99_TARGET)
    assert code == 0
    assert alerts == prom_only[1]  # the p99 target moves no alert: written
    slo = yaml.safe_load((specs / "slos.yaml").read_text())["slos"]["vllm-ttft"]
    bounds = ttft_bounds(specs)
    # the histogram's p99 at the knee lies in the bucket of the long prompts, under 0.75 s: the first
    # bound past halfway to the 1 s target is 1
    knee = at(KNEE)
    assert knee.queue_s + 2.5 * knee.prefill_s <= 0.75 and 0.75 in bounds
    assert slo["sli"]["threshold"] == min(b for b in bounds if b >= (0.75 + 1.0) / 2) == 1.0
    assert "calibrate: " in (specs / "slos.yaml").read_text()
    validate(load(specs))
    assert main(["check", "--specs", str(specs)]) == 0
    out = tmp_path / "out"
    res = servewatch("generate", "--specs", specs, "--out", out)
    assert res.returncode == 0, res.stderr
    res = servewatch("test", "--specs", specs, "--out", out, "--extra", tmp_path / "none", "-j", "2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_for_without_a_new_threshold_is_measured_against_the_current_one(prom_only):
    out = prom_only[2]
    assert "VLLMEndToEndLatencyP95High for: " in out
    assert "longest run above the current 60 none" in out


FAST_PAGE_6M = [
    (
        "      min_events: 100              # a row fires only when its long window saw this many requests\n"
        "  vllm-availability:",
        "      min_events: 100\n"
        "      windows:\n"
        "        - {tier: page, burn_rate: 20, long: 6m, short: 5m}\n"
        "        - {tier: page, burn_rate: 14.4, long: 1h, short: 5m}\n"
        "        - {tier: ticket, burn_rate: 1, long: 3d, short: 6h}\n"
        "  vllm-availability:",
    )
]


def test_a_burst_longer_than_the_fastest_page_row_is_not_ridden_out(run, specs_with, capsys):
    # a page row that spends its budget share in 6 minutes: the 7-minute KV burst at sustainable load
    # cannot be waited out, so the threshold must be higher, not the `for` longer
    specs = specs_with({"slos.yaml": FAST_PAGE_6M})
    code, alerts = calibrate(specs, *run["prom"], *ARGS)
    out = capsys.readouterr().out
    assert code == 0
    assert "for" not in alerts["VLLMKVCacheUsageHigh"]
    assert "longer than the long window of the fastest SLO page row (6m): the threshold is too low" in out


def test_bench_files_of_another_run_are_noted(run, specs_with, tmp_path, capsys):
    other = LoadTest(rates=tuple(r * 2 for r in RATES)).write_bench(tmp_path / "other")
    calibrate(specs_with(), "--bench", *other, *run["prom"], "--target", "ttft_p95=10s", write=False)
    out = capsys.readouterr().out
    assert (
        "note: step 2 req/s (bench) is paired with #1 at 1 req/s (prometheus): are they the same run?" in out
    )


def test_a_range_with_two_models_needs_model(run, prom_only, specs_with, capsys):
    ours, other = LoadTest(), LoadTest(model="acme/other-1b", pod="other-0")
    start = backfill_start(ours.samples, 30.0)
    with LocalPrometheus(to_openmetrics(ours.series() + other.series(), start, 30.0)) as prom:
        a, z = ours.run_range(start)
        args = [
            "--prometheus",
            prom.url,
            "--range",
            f"{a:.0f}..{z:.0f}",
            "--step-every",
            ours.step_every,
            *ARGS,
        ]
        code, _ = calibrate(specs_with(), *args)
        assert code == 2
        err = capsys.readouterr().err
        assert (
            "holds 2 models from" in err and f"({ours.model}, {other.model}): calibrate one at a time" in err
        )
        code, alerts = calibrate(specs_with(), *args, "--model", ours.model)
    assert code == 0
    # --model narrows every vLLM series; the other model's GPUs hold the same FB share, so the GPU
    # alert (not narrowed) reads the same too
    assert alerts == prom_only[1]


def _json_report(specs, *args) -> dict:
    code, out = _printing(
        main, ["calibrate", "--specs", str(specs), *map(str, args), *ARGS, "--gpus", "2", "--format", "json"]
    )
    assert code == 0
    return json.loads(out)


@pytest.fixture(scope="module")
def gateway_report(pd_gateway, specs_with):
    """spec edits -> the JSON report on pd_gateway's history of the default specs so edited, computed
    once: several tests read the same report."""
    reports: dict[str, dict] = {}

    def report(edits: dict) -> dict:
        if repr(edits) not in reports:
            reports[repr(edits)] = _json_report(specs_with(edits), *pd_gateway[1])
        return reports[repr(edits)]

    return report


def _server_steps(report: dict) -> list[dict]:
    return next(sw["steps"] for sw in report["sources"] if sw["source"] == "prometheus")


def test_a_prefill_decode_run_counts_each_request_once(run, pd_run, specs_with):
    # every request finishes twice, its prefill leg with `length` on the prefill pod: with config.role
    # the load, the requests, the error share and the good tokens (the cost) read the decode side
    # only, so they are the aggregated run's, and the client's request rate still pairs with them
    aggregated = _server_steps(_json_report(specs_with(), *run["prom"]))
    report = _json_report(specs_with({"config.yaml": ROLE_CONFIG}), "--bench", *run["bench"], *pd_run)
    pd = _server_steps(report)
    assert not [n for n in report["notes"] if "same run" in n]
    cost = next(k for k in pd[0] if k.startswith("cost_per_1m_good_tokens"))
    for rate, agg, one in zip(RATES, aggregated, pd, strict=True):
        assert one["load"] == pytest.approx(rate, rel=0.01)
        assert (one["load"], one["requests"]) == (agg["load"], agg["requests"])
        assert one["measures"]["errors"] == agg["measures"]["errors"]
        assert one[cost] == (agg[cost] and pytest.approx(agg[cost], rel=1e-9))  # None: no good token
    assert [s["sustainable"] for s in pd] == [s["sustainable"] for s in aggregated]


def _truth(lt: LoadTest, side: str, key: str) -> list[float]:
    """`key` (ttft_p95) of `side`'s histogram at each rate, as a step of the history shows it."""
    metric, p = key.split("_p")
    return [pytest.approx(lt.quantile(rate, side, metric, float(p) / 100), rel=1e-9) for rate in lt.rates]


def _measured(steps: list[dict], key: str) -> list[float]:
    return [s["measures"][key] for s in steps]


def test_without_a_gateway_latency_is_read_on_the_decode_engines(pd_gateway, gateway_report):
    # the TTFT SLO and the counting read the decode engines: so do the steps' TTFT and e2e, not the
    # worse of prefill and decode (a prefill pod's queue and prefill are not a decode engine's)
    lt, _ = pd_gateway
    steps = _server_steps(gateway_report(ENGINES_SPECS))
    for key in ("ttft_p95", "ttft_p99", "e2el_p95"):
        assert _measured(steps, key) == _truth(lt, "decode", key), key
    # the prefill side is worse: always for TTFT, past the knee for e2e
    assert all(
        lt.quantile(r, "prefill", "ttft", 0.95) > lt.quantile(r, "decode", "ttft", 0.95) for r in RATES
    )
    assert lt.quantile(NEXT, "prefill", "e2el", 0.95) > lt.quantile(NEXT, "decode", "e2el", 0.95)


def _proposal(report: dict, subject: str, field: str) -> dict:
    return next(p for p in report["proposals"] if p["subject"] == subject and p["field"] == field)


def test_with_a_gateway_ttft_and_its_alert_are_the_clients(pd_gateway, gateway_report):
    # with config.client_side the TTFT (and ITL) the targets and the client-side alert read is the
    # gateway's: queue, prefill and transfer together, more than either role's own
    lt, _ = pd_gateway
    report = gateway_report(CLIENT_SPECS)
    steps = _server_steps(report)
    for key in ("ttft_p95", "ttft_p99", "itl_p95"):
        assert _measured(steps, key) == _truth(lt, "client", key), key
    assert _measured(steps, "e2el_p95") == _truth(lt, "decode", "e2el_p95")  # no client e2e
    knee = lt.quantile(KNEE, "client", "ttft", 0.95)
    assert knee > max(lt.quantile(KNEE, side, "ttft", 0.95) for side in ("prefill", "decode"))
    assert [s["sustainable"] for s in steps].index(True) == RATES.index(KNEE)
    client = _proposal(report, "VLLMClientTimeToFirstTokenP95High", "threshold")
    assert client["rule"] == "halfway between the sustainable step's value and the target"
    assert knee < client["value"] < TTFT_TARGET
    # the engines' per-role alert keeps its own signal, and its evidence says it is not the step's
    engine = _proposal(report, "VLLMTimeToFirstTokenP95High", "threshold")["evidence"]
    assert f"(its own signal; the step's ttft_p95 {show(knee, 's')})" in engine


def test_a_client_side_slo_is_measured_at_the_gateway(pd_gateway, specs_with):
    # vllm-ttft leaves sli.side out, so with a gateway it counts the gateway's histogram: its
    # evidence is the client's p99 and its threshold a bound that histogram has in the history
    lt, prom = pd_gateway
    specs = specs_with(CLIENT_SPECS)
    report = _json_report(specs, *prom, f"--target={P99_TARGET}")
    p99 = lt.quantile(KNEE, "client", "ttft", 0.99)
    assert p99 != lt.quantile(KNEE, "prefill", "ttft", 0.99)
    objective = _proposal(report, "SLO vllm-ttft", "objective")
    assert f"ttft_p99 {show(p99, 's')} vs" in objective["evidence"]
    threshold = _proposal(report, "SLO vllm-ttft", "threshold")
    cat = catalog.load()
    assert threshold["value"] in cat.test_buckets(cat.clients[GATEWAY].metric("ttft")), threshold
    assert f"ttft_p99 {show(p99, 's')} (p99" in threshold["evidence"]


def test_an_slo_on_the_instance_side_is_measured_on_the_engines(pd_gateway, specs_with):
    # sli.side: instance beside a gateway: the SLO's percentile is the decode engines', under a key
    # that says so, while the targets and alerts read the client
    lt, prom = pd_gateway
    side = [("      threshold: 2.5 ", "      side: instance\n      threshold: 2.5 ")]
    specs = specs_with({"config.yaml": ROLE_CONFIG + CLIENT_CONFIG, "slos.yaml": side})
    report = _json_report(specs, *prom)
    steps = _server_steps(report)
    assert _measured(steps, "ttft_p99@instance") == _truth(lt, "decode", "ttft_p99")
    assert _measured(steps, "ttft_p95") == _truth(lt, "client", "ttft_p95")
    decode = lt.quantile(KNEE, "decode", "ttft", 0.99)
    assert (
        f"ttft_p99@instance {show(decode, 's')}"
        in _proposal(report, "SLO vllm-ttft", "objective")["evidence"]
    )


def test_model_narrows_the_gateways_series_too(specs_with):
    # another model behind the same gateway, at twice the load: --model keeps its first tokens out
    ours = LoadTest(**PD_GATEWAY)
    other = LoadTest(**PD_GATEWAY, rates=tuple(2 * r for r in RATES), model="acme/other-1b", pod="other-0")
    start = backfill_start(ours.samples, 30.0)
    with LocalPrometheus(to_openmetrics(ours.series() + other.series(), start, 30.0)) as prom:
        a, z = ours.run_range(start)
        args = ["--prometheus", prom.url, "--range", f"{a:.0f}..{z:.0f}", "--step-every", ours.step_every]
        specs = specs_with(CLIENT_SPECS)
        steps = _server_steps(_json_report(specs, *args, "--model", ours.model))
    assert _measured(steps, "ttft_p95") == _truth(ours, "client", "ttft_p95")
    assert _truth(ours, "client", "ttft_p95") != _truth(other, "client", "ttft_p95")


def _client_errors(lt: LoadTest) -> list[float]:
    """The gateway's error share at each rate: its failures (its own and the engines' it passes on)
    over its requests."""
    shares = []
    for rate in lt.rates:
        requests, failed = lt.gateway_counts(rate)
        shares.append(pytest.approx(sum(failed.values()) / requests, rel=1e-9))
    return shares


def _engine_errors(lt: LoadTest) -> list[float]:
    """The decode engines' error share at each rate: the engine errors the gateway passes on."""
    return [
        pytest.approx(lt.gateway_counts(rate)[1][ENGINE_ERROR] / (rate * SCRAPE_S), rel=1e-9)
        for rate in lt.rates
    ]


AVAILABILITY_INSTANCE = [("      bad: [error]\n", "      bad: [error]\n      side: instance\n")]
ENGINES_SPECS = {"config.yaml": ROLE_CONFIG}  # prefill and decode apart, the gateway not configured
# behind the gateway, the availability SLO counted on the engines
INSTANCE_AVAILABILITY_SPECS = {**CLIENT_SPECS, "slos.yaml": CLIENT_SPECS["slos.yaml"] + AVAILABILITY_INSTANCE}


def test_with_a_gateway_the_error_share_is_the_gateways(pd_gateway, gateway_report):
    # the availability SLO reads the gateway's counters (config.client_side): so do the steps'
    # error share and its N, which count the requests the gateway fails before any engine sees them
    lt, _ = pd_gateway
    report = gateway_report(CLIENT_SPECS)
    steps = _server_steps(report)
    assert _measured(steps, "errors") == _client_errors(lt)
    assert "errors@instance" not in steps[0]["measures"]
    requests, failed = lt.gateway_counts(KNEE)
    n = round(requests * STEP_SCRAPES)
    assert at(KNEE).error_share == 0 < sum(failed.values())  # no engine fails there
    verdict = _proposal(report, "SLO vllm-availability", "objective")
    assert f"({round(sum(failed.values()) * STEP_SCRAPES)} of {n} requests)" in verdict["evidence"]
    assert verdict["reason"].startswith("NOT MET at sustainable load: errors ")
    # on the engines alone the same run keeps the objective
    engines = gateway_report(ENGINES_SPECS)
    assert _measured(_server_steps(engines), "errors") == _engine_errors(lt)
    assert _proposal(engines, "SLO vllm-availability", "objective")["proposed"] == "0.995"


FRONTEND = "dynamo-frontend"
FRONTEND_CONFIG = [
    ("  client_side: null\n", f"  client_side: {{source: {FRONTEND}, model_label: {FRONTEND_MODEL_LABEL}}}\n")
]


@pytest.fixture(scope="module")
def pd_frontend():
    """pd_gateway behind Dynamo's frontend: one requests counter, the outcome in its labels, and
    requests the clients cancel besides, which are no valid event."""
    lt = LoadTest(**PD_GATEWAY, gateway_source=FRONTEND)
    start = backfill_start(lt.samples, 30.0)
    with LocalPrometheus(lt.openmetrics(start)) as prom:
        a, z = lt.run_range(start)
        yield lt, ["--prometheus", prom.url, "--range", f"{a:.0f}..{z:.0f}", "--step-every", lt.step_every]


def test_behind_dynamos_frontend_the_error_share_leaves_the_clients_own_out(pd_frontend, specs_with):
    # the frontend's failures (status="error") over its requests, neither counting those the clients
    # cancelled: the same share as the endpoint picker's counters give of the same run
    lt, prom = pd_frontend
    report = _json_report(specs_with({"config.yaml": ROLE_CONFIG + FRONTEND_CONFIG}), *prom)
    steps = _server_steps(report)
    assert _measured(steps, "errors") == _client_errors(lt)
    assert any(_measured(steps, "errors"))


def test_an_availability_slo_on_the_instance_side_reads_the_engines(pd_gateway, gateway_report):
    # sli.side: instance beside a gateway: the SLO's error share is the decode engines', under a key
    # that says so, while the targets read the client's
    lt, _ = pd_gateway
    report = gateway_report(INSTANCE_AVAILABILITY_SPECS)
    steps = _server_steps(report)
    assert _measured(steps, "errors@instance") == _engine_errors(lt)
    assert _measured(steps, "errors") == _client_errors(lt)
    verdict = _proposal(report, "SLO vllm-availability", "objective")
    assert "errors@instance 0% (0 of" in verdict["evidence"] and verdict["proposed"] == "0.995"


def test_a_history_without_the_gateways_counters_is_refused(pd_run, specs_with, capsys):
    # the gateway is configured but the history has none of its series: the error share at the
    # client cannot be measured, and the refusal names the counter
    specs = specs_with(CLIENT_SPECS)
    code = main(["calibrate", "--specs", str(specs), *pd_run, *ARGS])
    err = capsys.readouterr().err
    assert code == 2
    counter = catalog.load().clients[GATEWAY].metric("requests")
    assert f"has no {counter} from " in err


def test_goodput_at_the_client_counts_the_gateways_failures(pd_gateway, gateway_report):
    # a good token's request must not have failed at the gateway: at the client the availability
    # share is (requests - errors) / requests, so the cost per good token rises by that share
    lt, _ = pd_gateway
    client = _server_steps(gateway_report(CLIENT_SPECS))
    engines = _server_steps(gateway_report(INSTANCE_AVAILABILITY_SPECS))
    cost = next(k for k in client[0] if k.startswith("cost_per_1m_good_tokens"))
    gateway, decode = _client_errors(lt), _engine_errors(lt)
    for k, (c, e) in enumerate(zip(client, engines, strict=True)):
        if e[cost] is None:  # no token was good (past the knee every first token is late)
            assert c[cost] is None
            continue
        good_client, good_engines = 1 - gateway[k].expected, 1 - decode[k].expected
        assert c[cost] * good_client == pytest.approx(e[cost] * good_engines, rel=1e-6)
    assert client[RATES.index(KNEE)][cost] > engines[RATES.index(KNEE)][cost]


def test_errors_at_the_client_without_a_gateway_that_counts_them_is_refused(run, specs_with, capsys):
    code = main(["calibrate", "--specs", str(specs_with()), *run["prom"], *ARGS, "--target=errors@client=1%"])
    assert code == 2
    assert "errors@client: config.client_side names no source that counts" in capsys.readouterr().err
