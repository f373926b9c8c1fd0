"""servewatch_testkit.localprom against the real Prometheus 3.5: backfilled synthetic data answers queries
with exactly the values the synth ground truth predicts."""

import os
import textwrap
from types import SimpleNamespace

import pytest

from servewatch.promapi import QueryRejected
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.servers import ServerError
from servewatch_testkit.spans import horizon, starts
from servewatch_testkit.synth import Series, fleet, incident, to_openmetrics, truth, with_labels

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

FB_EXPR = (
    "max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED) / on (UUID, GPU_I_ID) "
    "(max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED) + on (UUID, "
    "GPU_I_ID) max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_FREE))"
)
RULES = textwrap.dedent(f"""\
    groups:
      - name: servewatch-test
        rules:
          - record: servewatch:gpu_fb_used:ratio
            expr: {FB_EXPR}
          - record: servewatch:vllm_prompt_tokens:rate5m
            expr: sum by (namespace, pod, model_name, engine) (rate(vllm:prompt_tokens_total[5m]))
          - record: servewatch:vllm_prompt_tokens:sum_rate5m
            expr: sum by (namespace) (servewatch:vllm_prompt_tokens:rate5m)
""")

# A counter that resets inside one series, to check rate()'s reset handling against the emulation.
RESET = Series(
    "servewatch_test_reset_total", {"job": "t"}, [0, 10, 20, 30, 3, 13, 23, 33, 43, 53, 63, 73], "counter"
)


def fb_ratio_query(uuid: str, gpu_i_id: str | None) -> str:
    sel = f'{{UUID="{uuid}",GPU_I_ID="{gpu_i_id or ""}"}}'
    used, free = (
        f"max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED{sel})",
        f"max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_FREE{sel})",
    )
    return f"{used} / on (UUID, GPU_I_ID) ({used} + on (UUID, GPU_I_ID) {free})"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    fl = fleet()
    kv = incident("kv_saturation")
    start = backfill_start(fl.steps, fl.step)
    rules = tmp_path_factory.mktemp("rules") / "rules.yaml"
    rules.write_text(RULES)
    series = [*fl, *with_labels(kv, scenario="kv_saturation"), RESET]
    with LocalPrometheus(to_openmetrics(series, start, fl.step), rule_files=[rules]) as prom:
        yield SimpleNamespace(prom=prom, fl=fl, kv=kv, start=start, t=lambda i: start + i * fl.step)


def test_server_answers_and_reports_timings(served):
    prom = served.prom
    assert prom.url.startswith("http://127.0.0.1:") and prom.running
    assert set(prom.timings) == {"backfill_openmetrics", "backfill_rules", "start"}
    ups = prom.query('up{job="vllm"}', served.t(served.fl.eval_step))
    assert len(ups) == 3 and {u["value"][1] for u in ups} == {"1"}
    assert (
        prom.query("up", served.t(served.fl.eval_step) + 3600) == []
    )  # no data after the backfill, no scrapes


@pytest.mark.parametrize("key", ["a0", "a1", "c0", "c1", "c2_mig1", "c2_mig2"])
def test_fb_ratio_is_exact(served, key):
    g = served.fl.truth["gpus"][key]
    got = served.prom.query_value(fb_ratio_query(g["UUID"], g["GPU_I_ID"]), served.t(served.fl.eval_step))
    assert got == g["fb_ratio"]  # float64 division on both sides: bit-identical


def test_twice_scraped_gpu_needs_dedup(served):
    """Without max by, the GPU scraped by two jobs makes the matched division fail as a whole."""
    uuid = served.fl.truth["gpus"]["a1"]["UUID"]
    naive = (
        f'DCGM_FI_DEV_FB_USED{{UUID="{uuid}"}} / on (UUID, GPU_I_ID) '
        f'(DCGM_FI_DEV_FB_USED{{UUID="{uuid}"}} + on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE{{UUID="{uuid}"}})'
    )
    with pytest.raises(QueryRejected, match="many-to-many") as e:
        served.prom.query(naive, served.t(served.fl.eval_step))
    assert (e.value.status, e.value.error_type) == (422, "execution")  # from the API's JSON body


def test_p95_equals_expected_histogram_quantile(served):
    fl, prom = served.fl, served.prom
    a0 = fl.truth["engines"]["a0"]
    sel = f'{{pod="{a0["pod"]}",engine="0"}}'
    q = f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{sel}[5m])))"
    for step in (20, 150, fl.eval_step):
        got = prom.query_value(q, served.t(step))
        assert got == pytest.approx(fl.truth["ttft_p95_a0"], rel=1e-12)
        want = truth.histogram_quantile_over(
            0.95, fl.select("vllm:time_to_first_token_seconds_bucket", pod=a0["pod"], engine="0"), step, 300
        )
        assert got == want
    idle = fl.truth["engines"]["a1"]
    nan = prom.query_value(q.replace(sel, f'{{pod="{idle["pod"]}",engine="1"}}'), served.t(fl.eval_step))
    assert nan != nan  # idle engine: all rates 0 -> NaN (generated queries must filter it)


def test_quantile_right_after_restart_matches_emulation(served):
    """Fresh counters (start-up extrapolation limits) are emulated exactly, not only steady state."""
    fl, prom = served.fl, served.prom
    new = fl.truth["restart"]["new_pod"]
    q = (
        f"histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
        f'{{pod="{new}"}}[5m])))'
    )
    for step in (fl.truth["restart"]["metrics_from"] + 2, fl.truth["restart"]["metrics_from"] + 7):
        want = truth.histogram_quantile_over(
            0.9, fl.select("vllm:e2e_request_latency_seconds_bucket", pod=new), step, 300
        )
        assert prom.query_value(q, served.t(step)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("window, steps", [(300, (5, 11)), (120, (2, 4, 11))])
def test_rate_and_increase_match_emulation(served, window, steps):
    for step in steps:
        for fn, emulate in (("rate", truth.rate), ("increase", truth.increase)):
            got = served.prom.query_value(f"{fn}(servewatch_test_reset_total[{window}s])", served.t(step))
            want = emulate(RESET, step, window)
            assert (got is None and want is None) or got == pytest.approx(want, rel=1e-12), (fn, step)


def test_recording_rules_are_backfilled(served):
    """Every grid point got an evaluation, and each recorded sample equals its expression at that time."""
    fl, prom = served.fl, served.prom
    assert [g["name"] for g in prom.rules()] == ["servewatch-test"]
    b0 = fl.truth["gpus"]["b0"]
    sel = f'{{UUID="{b0["UUID"]}"}}'
    recorded = prom.query(f"servewatch:gpu_fb_used:ratio{sel}[2h]", served.t(fl.eval_step) + 30)[0]["values"]
    assert len(recorded) == fl.steps  # one per 30 s grid point, from the first sample to the last
    phase = float(recorded[0][0]) - served.t(0)
    assert 0 <= phase < 30 and all(float(t) - served.t(i) == phase for i, (t, _) in enumerate(recorded))
    for i in (0, 120, 121, 122, fl.eval_step):  # 120-122: pod B's new process is loading weights
        t, v = recorded[i]
        assert float(v) == prom.query_value(
            FB_EXPR.replace("_FB_USED)", f"_FB_USED{sel})").replace("_FB_FREE)", f"_FB_FREE{sel})"), t
        )
    # No staleness markers in backfilled data: for 5 minutes after pod B's restart the old pod's FB series
    # (75034 used) is still selected next to the new one (40960 used, 40026 free), as truth.instant says.
    assert float(recorded[121][1]) == 75034 / (75034 + 40026)
    everything = prom.query_map("servewatch:gpu_fb_used:ratio", served.t(37) + 30, by=("UUID", "GPU_I_ID"))
    assert everything == prom.query_map(FB_EXPR, served.t(37) + phase, by=("UUID", "GPU_I_ID"))
    a0 = fl.truth["engines"]["a0"]
    t = served.t(100) + phase
    rate = prom.query_value(f'servewatch:vllm_prompt_tokens:rate5m{{pod="{a0["pod"]}",engine="0"}}', t)
    assert rate == prom.query_value(
        f'sum(rate(vllm:prompt_tokens_total{{pod="{a0["pod"]}",engine="0"}}[5m]))', t
    )
    # a record that reads a record of its group (backfilled a stage later) sees that record's sample
    # of the same evaluation, as a live server does
    ns = a0["namespace"]
    end = served.t(fl.eval_step) + 30
    chained = prom.query(f'servewatch:vllm_prompt_tokens:sum_rate5m{{namespace="{ns}"}}[2h]', end)[0][
        "values"
    ]
    assert len(chained) == fl.steps - 1  # from the second sample on: a rate needs two
    assert [float(ts) - served.t(i + 1) for i, (ts, _) in enumerate(chained)] == [phase] * len(chained)
    for ts, v in chained[::20]:
        summed = prom.query_value(f'sum(servewatch:vllm_prompt_tokens:rate5m{{namespace="{ns}"}})', ts)
        assert float(v) == summed


def test_incident_answers_on_the_server(served):
    kv, prom = served.kv, served.prom
    t = kv.truth
    bad = t["bad"][0]
    q = (
        "histogram_quantile(0.95, sum by (pod, engine, le) "
        '(rate(vllm:inter_token_latency_seconds_bucket{scenario="kv_saturation"}[5m])))'
    )
    got = prom.query_map(q, served.t(kv.eval_step), by=("pod", "engine"))
    assert len(got) == 4
    for (pod, engine), v in got.items():
        want = t["itl_p95_after"] if (pod, engine) == (bad["pod"], bad["engine"]) else t["itl_p95_before"]
        assert v == pytest.approx(want, rel=1e-12)
    hottest = prom.query(
        'topk(1, max by (pod, engine) (vllm:kv_cache_usage_perc{scenario="kv_saturation"}))',
        served.t(kv.eval_step),
    )
    assert (
        hottest[0]["metric"] == {"pod": bad["pod"], "engine": bad["engine"]}
        and hottest[0]["value"][1] == "0.98"
    )


def test_query_range(served):
    fl = served.fl
    a0 = fl.truth["engines"]["a0"]
    res = served.prom.query_range(
        f'vllm:kv_cache_usage_perc{{pod="{a0["pod"]}",engine="0"}}', served.t(0), served.t(fl.eval_step), 30
    )
    values = [float(v) for _, v in res[0]["values"]]
    assert values == list(fl.one("vllm:kv_cache_usage_perc", pod=a0["pod"], engine="0").values)


def test_lifecycle_server_and_files_are_gone_after_exit(tmp_path):
    s = Series("x", {"a": "1"}, [1, 2, 3])
    # off the hour: backfill_start ends on it, and every other hour is a 2 h block boundary, where the
    # last sample would open a second block
    start = backfill_start(3, 30) - 300
    with LocalPrometheus(to_openmetrics([s], start, 30)) as prom:
        pid, workdir = prom.pid, prom.workdir
        assert prom.query_value("x", start + 60) == 3.0
        assert len(prom.blocks()) == 1 and prom.blocks()[0]["stats"]["numSamples"] == 3
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not workdir.exists()
    with pytest.raises(ServerError, match="not running"):
        prom.query("x")


def test_sources_with_the_same_series_on_their_own_spans_share_one_server():
    """Scenarios laid out by servewatch_testkit.spans: same label set, each span reads only its own."""
    a, b = Series("x", {"a": "1"}, [1, 2, 3]), Series("x", {"a": "1"}, [7, 8, 9])
    first, second = starts([60, 60], horizon(["rate(x[1h])"]))
    with LocalPrometheus([to_openmetrics([a], first, 30), to_openmetrics([b], second, 30)]) as prom:
        assert prom.query_value("max_over_time(x[1h])", first + 60) == 3.0
        assert prom.query_value("min_over_time(x[1h])", second + 60) == 7.0
        assert prom.query_value("count_over_time(x[1h])", second) == 1.0  # nothing of the first span


def test_servers_with_the_same_inputs_share_their_backfill(tmp_path):
    """reuse=: the second server over the same data and rules links the first one's blocks (records
    included) instead of backfilling; other data or other rules are built anew."""
    rules = tmp_path / "r.rules.yaml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - record: r:x\n        expr: x * 2\n")
    start = backfill_start(3, 30) - 300  # off the hour: one block (test_lifecycle_...)
    data = to_openmetrics([Series("x", {"a": "1"}, [1, 2, 3])], start, 30)
    kept = tmp_path / "kept"
    with LocalPrometheus(data, rule_files=[rules], reuse=kept) as first:
        built = {b["ulid"] for b in first.blocks()}
        assert "backfill_rules" in first.timings and "reused" not in first.timings
    with LocalPrometheus(data, rule_files=[rules], reuse=kept) as again:
        assert {b["ulid"] for b in again.blocks()} == built
        assert "reused" in again.timings and "backfill_openmetrics" not in again.timings
        # a record sits its group's phase after a grid point: one interval after the last one
        assert again.query_value("r:x", start + 90) == 6.0
    other = to_openmetrics([Series("x", {"a": "1"}, [1, 2, 4])], start, 30)
    with LocalPrometheus(other, rule_files=[rules], reuse=kept) as changed:
        assert "reused" not in changed.timings and changed.query_value("r:x", start + 90) == 8.0
    rules.write_text(rules.read_text().replace("x * 2", "x * 3"))
    with LocalPrometheus(data, rule_files=[rules], reuse=kept) as changed:
        assert "reused" not in changed.timings and changed.query_value("r:x", start + 90) == 9.0


def test_start_failure_carries_the_log_tail(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(\n")
    lp = LocalPrometheus(None, rule_files=[bad], backfill_rules=False)
    with pytest.raises(ServerError, match="(?s)exited with code.*log tail.*bad.yaml"):
        lp.start()
    assert not lp.running and not lp.workdir.exists()


def test_bad_openmetrics_is_reported():
    with pytest.raises(ServerError, match="create-blocks-from openmetrics failed"):
        LocalPrometheus("this is not openmetrics\n").start()
