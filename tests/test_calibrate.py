"""`servewatch calibrate` on bench result files from the testkit's synthetic load test
(servewatch_testkit/loadtest.py), whose latency breaks past a known load: the sustainable step and
the thresholds must fall where that truth allows; what cannot support a number must say so, exit 2
and write nothing."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import client_ttft
from servewatch import catalog
from servewatch.cli import main
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch_testkit import loadtest
from servewatch_testkit.loadtest import KNEE, TARGETS, LoadTest, at

ARGS = [f"--target={t}" for t in TARGETS]
TTFT_TARGET, ITL_TARGET, ERR_TARGET = 1.5, 0.080, 0.01  # TARGETS, read as numbers


def test_the_targets_are_read_as_the_truth_states_them():
    from servewatch.calibrate.targets import parse

    assert [parse(t).limit for t in TARGETS] == [TTFT_TARGET, ITL_TARGET, ERR_TARGET]


@pytest.fixture(scope="module")
def bench_files(tmp_path_factory):
    return LoadTest().write_bench(tmp_path_factory.mktemp("bench"))


def calibrate(specs, *args, write=True):
    """Run the command in-process; return its exit code and the overrides it wrote (alert -> fields)."""
    code = main(["calibrate", "--specs", str(specs), *map(str, args), *(["--write"] if write else [])])
    data = yaml.safe_load((specs / "overrides.yaml").read_text())
    return code, (data.get("overrides") or {}).get("alerts") or {}


def sustainable_line(out: str) -> str:
    return next(line for line in out.splitlines() if "SUSTAINABLE" in line)


def test_bench_only_finds_the_knee_and_thresholds_between_the_knee_and_the_target(
    bench_files, specs_with, capsys
):
    specs = specs_with()
    code, alerts = calibrate(specs, "--bench", *bench_files, *ARGS)
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith(f"{KNEE:g} req/s")
    knee = at(KNEE)
    slow_ttft = knee.queue_s + 2.5 * knee.prefill_s  # the long prompts: the p95 of TTFT at the knee
    assert slow_ttft < alerts["VLLMTimeToFirstTokenP95High"]["threshold"] < TTFT_TARGET
    assert knee.itl_s * 1.1 < alerts["VLLMInterTokenLatencyP95High"]["threshold"] < ITL_TARGET
    assert 0 < alerts["VLLMRequestErrorRateHigh"]["threshold"] < ERR_TARGET
    # a saturation signal or a `for` needs the server's time series: said, not invented
    assert "VLLMKVCacheUsageHigh" not in alerts
    assert "bench results do not measure engine_kv_cache_usage" in out
    assert "bench results have no time series" in out
    assert all("for" not in fields for fields in alerts.values())
    # e2e has no target: no number
    assert "no target for e2el_p95" in out and "VLLMEndToEndLatencyP95High" not in alerts


def test_percentile_keys_alone_give_the_same_answer_as_per_request_data(bench_files, specs_with, tmp_path):
    aggregate = LoadTest().write_bench(tmp_path / "aggregate", detailed=False)
    assert "ttfts" not in json.loads(aggregate[0].read_text())
    _, detailed_alerts = calibrate(specs_with(), "--bench", *bench_files, *ARGS)
    _, aggregate_alerts = calibrate(specs_with(), "--bench", *aggregate, *ARGS)
    assert aggregate_alerts == detailed_alerts


def test_a_ramped_run_is_split_by_its_rps_change_events(bench_files, specs_with, tmp_path, capsys):
    ramp = tmp_path / "ramp.json"
    ramp.write_text(json.dumps(LoadTest().ramp_result()))
    _, split_alerts = calibrate(specs_with(), "--bench", *bench_files, *ARGS)
    capsys.readouterr()
    code, ramp_alerts = calibrate(specs_with(), "--bench", ramp, *ARGS)
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith(f"{KNEE:g} req/s (ramp)")
    assert ramp_alerts == split_alerts


def test_a_ramp_without_start_times_is_refused(specs_with, tmp_path, capsys):
    data = LoadTest().ramp_result()
    del data["start_times"]
    ramp = tmp_path / "ramp.json"
    ramp.write_text(json.dumps(data))
    specs = specs_with()
    before = (specs / "overrides.yaml").read_text()
    code, _ = calibrate(specs, "--bench", ramp, *ARGS)
    assert code == 2
    assert "--save-detailed" in capsys.readouterr().err
    assert (specs / "overrides.yaml").read_text() == before


def test_the_slos_are_the_targets_when_none_is_given(specs_with, tmp_path, capsys):
    # default SLOs: 99% of first tokens within 2.5 s (ttft_p99 <= 2.5s) and 0.5% errors; a p99 needs
    # 500 requests per step, so ten-minute runs
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    specs = specs_with()
    code, alerts = calibrate(specs, "--bench", *files)
    out = capsys.readouterr().out
    assert code == 0
    assert f"ttft_p99 <= 2.5s ({specs}/slos.yaml: vllm-ttft)" in out
    # rate 5 keeps its long prompts under 2.5 s (p99 2.37 s); rate 6 fails 3% of its requests
    five = at(5.0)
    assert five.queue_s + 2.5 * five.prefill_s < 2.5
    assert sustainable_line(out).startswith("5 req/s")


def test_cost_per_million_good_tokens_at_each_step(bench_files, specs_with, capsys):
    specs = specs_with()
    price, gpus = 3.0, 2
    code, _ = calibrate(
        specs, "--bench", *bench_files, *ARGS, "--gpus", gpus, "--price-per-gpu-hour", price, write=False
    )
    out = capsys.readouterr().out
    assert code == 0
    # a good token is an output token of a request that met every goodput SLO (here: first token
    # within the TTFT SLO's threshold), read from the specs
    slo = validate(load(specs)).model.slos.slos["vllm-ttft"]
    lt = LoadTest()
    rows = {line.split("  ")[0]: line for line in out.splitlines() if " req/s  " in line}
    for rate in lt.rates:
        result = lt.bench_result(rate)
        good = sum(
            n
            for n, t, e in zip(result["output_lens"], result["ttfts"], result["errors"], strict=True)
            if not e and t <= slo.sli.threshold
        )
        row = rows[f"{rate:g} req/s"]
        if good:
            assert row.endswith(f"{price * gpus * lt.bench_s / 3600 / good * 1e6:.3g}"), row
        else:
            assert row.endswith("undefined (no good token)"), row


def refused(specs, capsys, *args) -> str:
    """Exit 2, overrides untouched even with --write; the message on stderr."""
    before = (specs / "overrides.yaml").read_text()
    code, _ = calibrate(specs, *args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert (specs / "overrides.yaml").read_text() == before
    return err


def test_no_step_meeting_the_targets_is_refused(bench_files, specs_with, capsys):
    err = refused(specs_with(), capsys, "--bench", *bench_files, "--target", "ttft_p95=100ms")
    assert "no step met every target, not even the lowest load (1 req/s" in err
    assert "ttft_p95 570ms > 100ms" in err


def test_a_step_of_three_requests_is_refused(bench_files, specs_with, tmp_path, capsys):
    tiny = LoadTest(rates=(7.0,), bench_s=3 / 7).write_bench(tmp_path / "tiny")
    assert json.loads(tiny[0].read_text())["num_prompts"] == 3
    err = refused(specs_with(), capsys, "--bench", *bench_files, *tiny, *ARGS)
    assert f"{tiny[0]}: step 7 req/s has 3 finished request(s)" in err
    assert "at least 100" in err


def test_malformed_json_is_refused_with_its_line(specs_with, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"completed": 10,\n  "duration": oops}\n')
    err = refused(specs_with(), capsys, "--bench", bad, *ARGS)
    assert f"{bad}:2:15: not JSON" in err


def test_foreign_json_is_refused(repo, specs_with, capsys):
    dashboard = repo / "dashboards" / "slo.json"
    err = refused(specs_with(), capsys, "--bench", dashboard, *ARGS)
    assert f"{dashboard}: not a `vllm bench serve --save-result` file" in err


def test_a_field_of_the_wrong_type_is_named(bench_files, specs_with, tmp_path, capsys):
    data = json.loads(bench_files[0].read_text())
    for key in ("ttfts", "itls", "output_lens"):
        del data[key]
    data["completed"] = "many"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data))
    err = refused(specs_with(), capsys, "--bench", odd, *ARGS)
    assert f"{odd}: field 'completed': want a number" in err


def test_a_target_the_files_do_not_measure_is_refused(specs_with, tmp_path, capsys):
    files = LoadTest().write_bench(tmp_path / "aggregate", detailed=False)
    err = refused(specs_with(), capsys, "--bench", *files, "--target", "ttft_p90=1s")
    assert "does not measure ttft_p90" in err and "--metric-percentiles 90" in err


def test_a_target_that_is_no_measure_is_refused(bench_files, specs_with, capsys):
    err = refused(specs_with(), capsys, "--bench", *bench_files, "--target", "kv_p95=1s")
    assert "'kv_p95' is not a measure" in err


USER_OVERRIDES = """\
# Our tuning; reviewed by the serving team.
overrides:
  alerts:
    # the H100s run hot by design
    GPUFramebufferUsageHigh: {threshold: 0.98, severity: critical}
    VLLMTimeToFirstTokenP95High:
      threshold: 3  # before the load test
      # the on-call team asked for a 15m for
      for: 15m
"""


def test_write_keeps_the_users_comments_and_passes_check(bench_files, specs_with, capsys):
    specs = specs_with({"overrides.yaml": USER_OVERRIDES})
    code, alerts = calibrate(specs, "--bench", *bench_files, *ARGS)
    assert code == 0, capsys.readouterr().err
    text = (specs / "overrides.yaml").read_text()
    for kept in (
        "# Our tuning; reviewed by the serving team.",
        "# the H100s run hot by design",
        "GPUFramebufferUsageHigh: {threshold: 0.98, severity: critical}",
        "      # the on-call team asked for a 15m for\n      for: 15m",
    ):
        assert kept in text
    ttft = alerts["VLLMTimeToFirstTokenP95High"]
    assert ttft["for"] == "15m" and ttft["threshold"] < TTFT_TARGET
    line = next(
        line for line in text.splitlines() if line.strip().startswith("threshold: " + str(ttft["threshold"]))
    )
    # the user's comment on the changed value stays, the evidence follows it
    assert "# before the load test; calibrate: halfway between" in line and "openai-4qps-chat-8b.json" in line
    validate(load(specs))  # what `servewatch check` runs
    capsys.readouterr()
    assert main(["check", "--specs", str(specs)]) == 0
    # a second run proposes the same and changes nothing
    again = (specs / "overrides.yaml").read_text()
    assert calibrate(specs, "--bench", *bench_files, *ARGS)[0] == 0
    assert (specs / "overrides.yaml").read_text() == again
    assert "no change to the overrides" in capsys.readouterr().out


def test_the_testkit_knee_is_where_the_targets_break():
    """The synthetic truth itself: met up to KNEE, broken after (the tests above rely on it)."""
    for rate in loadtest.RATES:
        s = at(rate)
        ttft_p95 = s.queue_s + 2.5 * s.prefill_s
        assert (ttft_p95 <= TTFT_TARGET and s.error_share <= ERR_TARGET) == (rate <= KNEE), rate


def test_cost_without_per_request_data_says_so(specs_with, tmp_path, capsys):
    files = LoadTest().write_bench(tmp_path / "aggregate", detailed=False)
    code, _ = calibrate(specs_with(), "--bench", *files, *ARGS, "--gpus", 1, write=False)
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("undefined (no per-request data)") == len(files)


def test_an_unreachable_prometheus_is_one_clear_line_and_exit_1(specs_with, capsys):
    specs = specs_with()
    before = (specs / "overrides.yaml").read_text()
    code, _ = calibrate(
        specs,
        "--prometheus",
        "http://127.0.0.1:9",
        "--range",
        "1764590400..1764595800",
        "--step-every",
        "15m",
        *ARGS,
    )
    err = capsys.readouterr().err
    assert code == 1  # as for detect: the server could not be asked, the data was never judged
    assert err.count("\n") == 1 and "127.0.0.1:9" in err and "nothing was written" in err
    assert (specs / "overrides.yaml").read_text() == before


@pytest.mark.parametrize(
    "args, says",
    [
        (["--range", "yesterday..today", "--step-every", "15m"], "want times as RFC 3339"),
        (["--range", "1764595800..1764590400", "--step-every", "15m"], "the end is not after the start"),
        (["--step-every", "15m"], "--prometheus needs --range START..END"),
        (["--range", "1764590400..1764595800"], "either --step-every DURATION or --steps"),
        (["--range", "1764590400..1764595800", "--steps", "1764500000"], "must lie inside --range"),
    ],
)
def test_a_bad_range_is_refused(specs_with, capsys, args, says):
    err = refused(specs_with(), capsys, "--prometheus", "http://127.0.0.1:9", *args, *ARGS)
    assert says in err


def test_every_measured_latency_is_a_histogram_of_the_catalog():
    from servewatch import catalog
    from servewatch.calibrate.measures import HISTOGRAMS

    cat = catalog.load()
    assert all(cat.lookup(name).type == "histogram" for name in HISTOGRAMS.values())


def test_an_alert_that_fires_below_its_threshold_gets_no_number(default_model, bench_files):
    """Thresholds follow a signal that rises with load; an alert on `<` is left as it is, with why."""
    from dataclasses import replace

    from servewatch.calibrate import bench
    from servewatch.calibrate.propose import CalibrateResult, Proposer, check_steps, sweep
    from servewatch.calibrate.targets import parse

    class Below:
        def __init__(self, model, name):
            self.model, self.name = model, name

        def alerts(self):
            return [
                replace(a, spec=a.spec.model_copy(update={"op": "<"})) if a.alert == self.name else a
                for a in self.model.alerts()
            ]

        def __getattr__(self, attr):
            return getattr(self.model, attr)

    targets = [parse(t) for t in TARGETS]
    steps = [s for f in bench_files for s in bench.read(f, [t.measure for t in targets], None)]
    check_steps("bench", steps, targets, 100)
    sw = sweep("bench", steps, targets)
    proposals = Proposer(
        Below(default_model, "VLLMTimeToFirstTokenP95High"), CalibrateResult(targets, [sw], sw.sustainable)
    ).run()
    mine = [p for p in proposals if p.subject == "VLLMTimeToFirstTokenP95High"]
    assert [p.proposed for p in mine] == [None, None]
    assert all("fires below its threshold" in p.reason for p in mine)
    itl = next(p for p in proposals if p.subject == "VLLMInterTokenLatencyP95High" and p.field == "threshold")
    assert itl.proposed is not None


def test_a_concurrency_sweep_is_ordered_and_named_by_its_concurrency(specs_with, tmp_path, capsys):
    # `--max-concurrency N` with the default `--request-rate inf`: vLLM writes Infinity for the rate
    files = []
    for rate in loadtest.RATES:
        data = LoadTest().bench_result(rate, detailed=False) | {
            "request_rate": float("inf"),
            "max_concurrency": 8 * rate,
        }
        path = tmp_path / f"c{rate:g}.json"
        path.write_text(json.dumps(data))
        files.append(path)
    code, _ = calibrate(specs_with(), "--bench", *reversed(files), *ARGS, write=False)
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith(f"concurrency {8 * KNEE:g} ")
    labels = [line.split("  ")[0] for line in out.splitlines() if line.startswith("concurrency ")]
    assert labels == [f"concurrency {8 * r:g}" for r in loadtest.RATES]


def test_a_step_above_a_broken_one_is_not_sustainable(bench_files, specs_with, tmp_path, capsys):
    # a noisy sweep: a step at 2.5 req/s broke (it saw the knee's latency); 3 and 4 req/s met the
    # targets again, but the sustainable load is the last of the unbroken run from the lowest
    noisy = tmp_path / "noisy.json"
    noisy.write_text(json.dumps(LoadTest().bench_result(NEXT_RATE, detailed=False) | {"request_rate": 2.5}))
    code, _ = calibrate(specs_with(), "--bench", *bench_files, noisy, *ARGS, write=False)
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith("2 req/s")
    assert next(line for line in out.splitlines() if line.startswith("2.5 req/s")).count("broke: ttft_p95")


NEXT_RATE = loadtest.RATES[loadtest.RATES.index(KNEE) + 1]


def test_json_says_what_the_text_says(bench_files, specs_with, capsys):
    specs = specs_with()
    code, _ = calibrate(specs, "--bench", *bench_files, *ARGS, "--format", "json", "--gpus", 1, write=False)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    (source,) = doc["sources"]
    assert [s["label"] for s in source["steps"] if s["sustainable"]] == [f"{KNEE:g} req/s"]
    assert source["steps"][-1]["cost_per_1m_good_tokens_USD"] is None  # no good token at 6 req/s
    ttft = next(
        p
        for p in doc["proposals"]
        if p["subject"] == "VLLMTimeToFirstTokenP95High" and p["field"] == "threshold"
    )
    assert ttft["value"] < TTFT_TARGET and "halfway" in ttft["rule"]
    assert f"threshold: {ttft['value']:g}" in doc["overrides_diff"]


def test_cost_needs_a_price_when_the_specs_price_gpus_by_kind(bench_files, specs_with, capsys):
    by_kind = {
        "dashboards.yaml": [
            ("    cost:\n", '    cost:\n      gpu_model_prices: {"NVIDIA H100 80GB HBM3": 4.0}\n')
        ]
    }
    err = refused(specs_with(by_kind), capsys, "--bench", *bench_files, *ARGS, "--gpus", 2)
    assert "give --price-per-gpu-hour" in err


# -- SLOs: a threshold where the data supports one, a verdict on each objective --------------------

P99_TARGET = "ttft_p99=1s"  # the team's word on the TTFT SLO's percentile, stricter than the SLO's 2.5 s


def slos_yaml(specs) -> dict:
    return yaml.safe_load((specs / "slos.yaml").read_text())["slos"]


def proposal(out: str, subject: str, field: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(subject) and f" {field} " in line)


def ttft_bounds(specs) -> list[float]:
    from servewatch import catalog

    histogram = slos_yaml(specs)["vllm-ttft"]["sli"]["histogram"]
    return sorted(catalog.load().lookup(histogram).buckets)


def p99_threshold(specs) -> float:
    """The TTFT SLO threshold the synthetic truth calls for under P99_TARGET: the SLI counts requests
    under a bucket bound, so the first bound past halfway from the knee's p99 to the target."""
    knee = at(KNEE)
    p99 = knee.queue_s + 2.5 * knee.prefill_s  # the long prompts: the slowest fifth
    halfway = (p99 + 1.0) / 2
    expected = min(b for b in ttft_bounds(specs) if b >= halfway)
    assert p99 < halfway <= expected <= 1.0 and expected != min(b for b in ttft_bounds(specs) if b > p99)
    return expected


def test_a_latency_slo_threshold_is_the_bucket_bound_past_halfway_to_the_target(specs_with, tmp_path, capsys):
    # ten-minute steps: 2400 requests at the knee, enough for a p99 and for a 0.5% error budget
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    specs = specs_with()
    before = (specs / "slos.yaml").read_text()
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET)
    out = capsys.readouterr().out
    assert code == 0, out
    expected = p99_threshold(specs)
    slo = slos_yaml(specs)["vllm-ttft"]
    assert slo["sli"]["threshold"] == expected
    assert slo["description"] == f"first token within {expected:g} s"  # what on-call reads as good
    text = (specs / "slos.yaml").read_text()
    line = next(x for x in text.splitlines() if x.strip().startswith("threshold:"))
    # the user's comment stays, the evidence follows it: the source, the step, the percentile, why
    assert "# must be a bucket bound of the histogram (catalog/vllm.yaml); calibrate: " in line
    assert "openai-4qps-chat-8b.json, sustainable step 4 req/s (2400 requests): ttft_p99 720ms" in line
    assert "(p99: 99% of requests within the threshold holds where the 99th percentile" in line
    assert f"target 1s (--target {P99_TARGET})" in line
    # everything else in the file is as it was: its comments, the other SLO, the objectives
    changed = [(a, b) for a, b in zip(before.splitlines(), text.splitlines(), strict=True) if a != b]
    assert [a.strip().split(":")[0] for a, _ in changed] == ["description", "threshold"]
    assert slos_yaml(specs)["vllm-availability"]["objective"] == 0.995
    # the availability objective holds at the knee, with 2400 requests to show it
    assert "0.995  0.995" in proposal(out, "SLO vllm-availability", "objective")
    assert (
        "errors 0% (0 of 2400 requests), at most 0.125% at 95% confidence; budget 0.5%; broken from 6" in out
    )
    assert "ttft_p99 720ms vs ttft_p99 <= 2.5s; broken from 6 req/s" in out
    assert "--- " + str(specs / "slos.yaml") in out  # in the diff
    capsys.readouterr()
    assert main(["check", "--specs", str(specs)]) == 0
    again = text
    assert calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET)[0] == 0
    assert (specs / "slos.yaml").read_text() == again  # a second run proposes the same: no change


def test_too_few_requests_give_no_slo_number(specs_with, tmp_path, capsys):
    # 50-second steps: 200 requests at 4 req/s, enough for the p95 targets (100) and nothing more
    # (a p99 target would refuse the whole run; the SLO's own p99 is only a proposal without a number)
    files = LoadTest(rates=(3.0, KNEE, NEXT_RATE), bench_s=50).write_bench(tmp_path / "short")
    specs = specs_with()
    before = (specs / "slos.yaml").read_text()
    code, _ = calibrate(specs, "--bench", *files, *ARGS)
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith(f"{KNEE:g} req/s  200 ")
    assert "too few requests: the sustainable step 4 req/s has 200; ttft_p99 needs at least 500" in out
    availability = proposal(out, "SLO vllm-availability", "objective")
    assert "0.995  -" in availability
    assert "cannot be established from 200 requests: 0 failed" in availability
    # the number stated is the real minimum: 598 clean requests bound the ratio within 0.5%, 597 do not
    from servewatch.calibrate.slo_proposals import error_upper_bound

    assert "99.5% needs at least 598 requests with no failure" in availability
    assert error_upper_bound(0, 598) <= 0.005 < error_upper_bound(0, 597)
    assert (specs / "slos.yaml").read_text() == before


def test_an_slo_not_met_at_the_sustainable_step_says_so(bench_files, specs_with, capsys):
    # lax targets: every step is sustainable, up to 6 req/s where 3% fail and long prompts wait 4 s
    specs = specs_with()
    before = (specs / "slos.yaml").read_text()
    code, _ = calibrate(specs, "--bench", *bench_files, "--target", "ttft_p95=10s", "--target", "errors=5%")
    out = capsys.readouterr().out
    assert code == 0
    assert sustainable_line(out).startswith(f"{loadtest.RATES[-1]:g} req/s")
    top = at(loadtest.RATES[-1])
    assert top.queue_s + 2.5 * top.prefill_s > 2.5 and top.error_share > 0.005
    assert "NOT MET at sustainable load: ttft_p99 4.02s > 2.5s" in proposal(out, "SLO vllm-ttft", "objective")
    assert "NOT MET at sustainable load: errors 2.92% > the 0.5% budget" in out
    # no looser threshold is made up to fit the run; the bound that would hold is named
    ttft = proposal(out, "SLO vllm-ttft", "threshold")
    assert "2.5    -" in ttft and "the smallest bucket bound above it is 5" in ttft
    assert (specs / "slos.yaml").read_text() == before


def test_a_client_side_slo_gets_a_threshold_from_the_catalogued_bounds_of_its_source(
    specs_with, tmp_path, capsys
):
    # llm-d's endpoint picker fixes its TTFT bounds in code (catalog/gateway.yaml): with bench files
    # alone, no history to show them, the threshold proposed at the client is one of those
    specs = specs_with(
        {
            "config.yaml": [("  client_side: null\n", "  client_side: {source: llm-d-epp}\n")],
            "slos.yaml": list(client_ttft("llm-d-epp")),
        }
    )
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)  # enough for a p99
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET, write=False)
    row = proposal(capsys.readouterr().out, "SLO vllm-ttft", "threshold")
    assert code == 0 and "not documented" not in row, row
    cat = catalog.load()
    epp = cat.lookup(cat.clients["llm-d-epp"].metric("ttft")).buckets
    assert float(row.split()[4]) in epp, row


def test_a_client_side_slo_gets_no_threshold_from_bench_files_alone(specs_with, tmp_path, capsys):
    # with a gateway configured the TTFT SLO counts the gateway's histogram, whose bucket bounds
    # Dynamo's frontend does not fix: a bench file (the client's view) still checks the objective,
    # but only the history can show which bound a threshold may be; the engines' side is not a
    # bench file's
    frontend = "  client_side: {source: dynamo-frontend, model_label: model}\n"
    specs = specs_with({"config.yaml": [("  client_side: null\n", frontend)]})
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)  # enough for a p99
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET, write=False)
    out = capsys.readouterr().out
    assert code == 0
    assert "(at the client) are not documented" in proposal(out, "SLO vllm-ttft", "threshold")
    assert "kept: it holds at sustainable load" in proposal(out, "SLO vllm-ttft", "objective")
    code = main(
        [
            "calibrate",
            "--specs",
            str(specs),
            "--bench",
            *map(str, files),
            "--target=ttft_p95@instance=1s",
        ]
    )
    assert code == 2
    assert "does not measure ttft_p95@instance" in capsys.readouterr().err


def test_slos_defined_in_the_overrides_file_get_both_edits(specs_with, tmp_path, capsys):
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    specs = specs_with()
    slos = specs / "slos.yaml"
    (specs / "overrides.yaml").write_text((specs / "overrides.yaml").read_text() + slos.read_text())
    slos.unlink()
    code, alerts = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET)
    assert code == 0, capsys.readouterr().err
    data = yaml.safe_load((specs / "overrides.yaml").read_text())
    assert "VLLMTimeToFirstTokenP95High" in alerts and data["slos"]["vllm-ttft"]["sli"]["threshold"] == 1


def test_a_description_that_does_not_name_the_threshold_is_noted(specs_with, tmp_path, capsys):
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    specs = specs_with(
        {"slos.yaml": [("description: first token within 2.5 s", "description: a snappy start")]}
    )
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET)
    out = capsys.readouterr().out
    assert code == 0
    assert slos_yaml(specs)["vllm-ttft"]["description"] == "a snappy start"
    assert "note: SLO vllm-ttft: its description ('a snappy start') does not name the threshold" in out


def test_a_load_test_of_one_model_writes_that_models_own_entry(specs_with, tmp_path, capsys):
    # --model: the run speaks for that model alone; the SLO's own threshold stays for the others
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    specs = specs_with()
    before = slos_yaml(specs)["vllm-ttft"]
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET, "--model", loadtest.MODEL)
    out = capsys.readouterr().out
    assert code == 0, out
    slo = slos_yaml(specs)["vllm-ttft"]
    assert slo["per_model"] == {loadtest.MODEL: {"threshold": p99_threshold(specs)}}
    assert slo["sli"] == before["sli"] and slo["description"] == before["description"]
    row = proposal(out, f"SLO vllm-ttft [{loadtest.MODEL}]", "threshold").split()
    assert row[3:6] == ["threshold", "2.5", f"{p99_threshold(specs):g}"]  # now, proposed
    line = next(x for x in (specs / "slos.yaml").read_text().splitlines() if "calibrate:" in x)
    assert line.startswith("        threshold: 1  # calibrate: the smallest bucket bound")
    assert main(["check", "--specs", str(specs)]) == 0


def test_a_models_per_model_entry_is_the_slo_it_is_held_to(specs_with, tmp_path, capsys):
    # its own objective (95%: the p95 is its evidence) and threshold are what the run is judged by
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    own = f'per_model:\n      "{loadtest.MODEL}": {{objective: 0.95, threshold: 5}}  # our own\n    alerting:'
    specs = specs_with({"slos.yaml": [("alerting:", own)]})
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--model", loadtest.MODEL)
    out = capsys.readouterr().out
    assert code == 0, out
    knee = at(KNEE)
    p95 = knee.queue_s + 2.5 * knee.prefill_s
    halfway = (p95 + TTFT_TARGET) / 2  # --target ttft_p95=1.5s is the team's newer word than the 5 s
    room = [b for b in ttft_bounds(specs) if p95 < b <= TTFT_TARGET]
    expected = min([b for b in room if b >= halfway] or [max(room)])
    entry = slos_yaml(specs)["vllm-ttft"]["per_model"][loadtest.MODEL]
    assert entry == {"objective": 0.95, "threshold": expected}
    assert slos_yaml(specs)["vllm-ttft"]["sli"]["threshold"] == 2.5
    row = proposal(out, f"SLO vllm-ttft [{loadtest.MODEL}]", "objective").split()
    assert row[3:6] == ["objective", "0.95", "0.95"]  # its own objective, kept
    assert "ttft_p95 720ms vs ttft_p95 <= 5s" in out
    assert "# our own" in (specs / "slos.yaml").read_text()
    assert main(["check", "--specs", str(specs)]) == 0


def test_an_slo_scoped_away_from_the_model_is_left_alone(specs_with, tmp_path, capsys):
    files = LoadTest(bench_s=600).write_bench(tmp_path / "long", detailed=False)
    scope = 'scope: {models: ["acme/other"]}\n    alerting:'
    specs = specs_with({"slos.yaml": [("alerting:", scope)]})
    before = (specs / "slos.yaml").read_text()
    code, _ = calibrate(specs, "--bench", *files, *ARGS, "--target", P99_TARGET, "--model", loadtest.MODEL)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "SLO vllm-ttft" in out and f"leaves out the load test's model '{loadtest.MODEL}'" in out
    assert (specs / "slos.yaml").read_text() == before


def test_the_error_bound_is_the_exact_binomial_one():
    from servewatch.calibrate.slo_proposals import error_upper_bound, requests_needed

    # textbook one-sided 95% limits: 1 failure in 100 -> 4.66%; none in n -> about 3/n
    assert abs(error_upper_bound(1, 100) - 0.0466) < 0.0005
    assert abs(error_upper_bound(0, 3000) - 3 / 3000) < 0.00002
    # at the observed ratio, the stated number of requests is just enough
    n = requests_needed(0.001, 0.005)
    assert (
        error_upper_bound(math.ceil(0.001 * n), n)
        <= 0.005
        < error_upper_bound(math.ceil(0.001 * (n - 1)), n - 1)
    )
    assert requests_needed(0.005, 0.005) is None


def test_a_bench_file_judges_availability_at_the_client_only(bench_files, specs_with, capsys):
    # a bench file counts what the client saw fail: with a gateway that counts errors the default
    # availability SLO reads the client too, and the file judges it; one on the engines' side
    # (sli.side: instance) it cannot judge, and it says what can
    client = {"config.yaml": [("  client_side: null\n", "  client_side: {source: llm-d-epp}\n")]}
    client["slos.yaml"] = list(client_ttft("llm-d-epp"))
    code, _ = calibrate(specs_with(client), "--bench", *bench_files, *ARGS, write=False)
    out = capsys.readouterr().out
    assert code == 0
    requests = int(KNEE * LoadTest().bench_s)
    assert f"cannot be established from {requests} requests" in proposal(
        out, "SLO vllm-availability", "objective"
    )
    instance = [("      bad: [error]\n", "      bad: [error]\n      side: instance\n")]
    specs = specs_with({**client, "slos.yaml": client["slos.yaml"] + instance})
    code, _ = calibrate(specs, "--bench", *bench_files, *ARGS, write=False)
    why = proposal(capsys.readouterr().out, "SLO vllm-availability", "objective")
    assert code == 0
    assert "cannot judge it:" in why and "the client's view, not the engines': add --prometheus" in why
    code = main(
        ["calibrate", "--specs", str(specs), "--bench", *map(str, bench_files), "--target=errors@instance=1%"]
    )
    assert code == 2
    assert "does not measure errors@instance" in capsys.readouterr().err
