"""servewatch_testkit.synth: exact OpenMetrics output, consistent series, documented ground truth, and
acceptance of the text by the real ``promtool tsdb create-blocks-from openmetrics``."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servewatch import catalog, tools
from servewatch_testkit.synth import (
    INCIDENTS,
    ITER_BUCKETS,
    ITL_BUCKETS,
    REQ_BUCKETS,
    TTFT_BUCKETS,
    Series,
    Target,
    dcgm_gpu,
    expected_histogram_quantile,
    fleet,
    histogram_series,
    incident,
    sample_count,
    to_openmetrics,
    token_buckets,
    truth,
    vllm_engine,
)
from servewatch_testkit.synth import incidents as inc
from servewatch_testkit.synth.histogram import allocate

START = 1_700_000_000  # any fixed start: the synth layer never reads the clock


@pytest.fixture(scope="module")
def fl():
    return fleet()


@pytest.fixture(scope="module")
def scenarios():
    return {name: build() for name, build in INCIDENTS.items()}


# ------------------------------------------------------------------ OpenMetrics text


def test_openmetrics_sample_values_whole_fractional_and_special():
    """Whole numbers without a point below 1e15, Python's shortest text past it and for fractions,
    and OpenMetrics' own words for the special values."""
    values = [3.0, -2.0, 0.25, 1e15, 1e16, math.nan, math.inf, -math.inf]
    text = to_openmetrics([Series("g", {}, values)], 0, 1)
    assert [line.split(" ")[1] for line in text.splitlines()[1:-1]] == [
        *["3", "-2", "0.25", "1000000000000000.0", "1e+16", "NaN", "+Inf", "-Inf"]
    ]


def test_openmetrics_exact_text():
    series = [
        Series("vllm:prompt_tokens_total", {"model_name": "m", "engine": "0"}, [1, 2], "counter"),
        Series("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", {"gpu": "0"}, [5, None, 7], "counter"),
        Series("g", {"a": 'x"y\\z\n'}, [0.5]),
        *histogram_series("h", {"engine": "0"}, (0.5, 1.0), [[(0.2, 1)], [(0.7, 2)]]),
    ]
    assert to_openmetrics(series, 1000, 30) == (
        # a counter without _total: OpenMetrics says unknown
        "# TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL unknown\n"
        'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu="0"} 5 1000\n'
        'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu="0"} 7 1060\n'
        "# TYPE g gauge\n"
        'g{a="x\\"y\\\\z\\n"} 0.5 1000\n'
        "# TYPE h histogram\n"
        'h_bucket{engine="0",le="0.5"} 0 1000\n'
        'h_bucket{engine="0",le="1.0"} 0 1000\n'
        'h_bucket{engine="0",le="+Inf"} 0 1000\n'
        'h_count{engine="0"} 0 1000\n'
        'h_sum{engine="0"} 0 1000\n'
        'h_bucket{engine="0",le="0.5"} 0 1030\n'
        'h_bucket{engine="0",le="1.0"} 2 1030\n'
        'h_bucket{engine="0",le="+Inf"} 2 1030\n'
        'h_count{engine="0"} 2 1030\n'
        'h_sum{engine="0"} 1.4 1030\n'
        "# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 1 1000\n'
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 2 1030\n'
        "# EOF\n"
    )


def test_openmetrics_rejects_duplicates():
    s = Series("x", {"a": "1"}, [1])
    with pytest.raises(ValueError, match="duplicate"):
        to_openmetrics([s, s], 0, 30)


def test_same_bytes_across_processes():
    """Hash-seed independent: two interpreters with different PYTHONHASHSEED write identical text."""
    code = (
        "import hashlib; from servewatch_testkit.synth import fleet, incident; "
        "print(hashlib.sha256((fleet().openmetrics(1.7e9) + incident('kv_saturation').openmetrics(1.7e9))"
        ".encode()).hexdigest())"
    )
    digests = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def _block_samples(outdir: Path) -> int:
    return sum(json.loads(m.read_text())["stats"]["numSamples"] for m in outdir.glob("*/meta.json"))


@pytest.mark.tools("promtool")
def test_promtool_accepts_fleet_and_every_incident(tmp_path, fl, scenarios):
    """Real promtool ingests each scenario's text, and the blocks hold exactly the samples written."""
    jobs = []
    for name, series in [("fleet", fl), *sorted(scenarios.items())]:
        src, out = tmp_path / f"{name}.om", tmp_path / name
        src.write_text(to_openmetrics(series, START, 30))
        cmd = [tools.find("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet", src, out]
        # concurrent: the backfills are independent and promtool is mostly single-threaded
        jobs.append((name, series, out, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)))
    for name, series, out, proc in jobs:
        assert proc.wait(timeout=120) == 0, (name, proc.stderr.read())
        proc.stderr.close()
        assert _block_samples(out) == sample_count(series) > 0, name


@pytest.mark.tools("promtool")
def test_le_labels_are_stored_as_written(tmp_path):
    """Prometheus 3 normalises le on ingestion; we already write the normal form."""
    src, out = tmp_path / "h.om", tmp_path / "blocks"
    src.write_text(to_openmetrics(histogram_series("h", {}, (1, 1e6, 100000), [[(3, 1)]]), START, 30))
    assert (
        tools.run("promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", src, out).returncode
        == 0
    )
    (out / "wal").mkdir()  # dump wants a full data dir
    dump = tools.run("promtool", "tsdb", "dump", out).stdout
    les = sorted(line.split('le="')[1].split('"')[0] for line in dump.splitlines() if "h_bucket" in line)
    assert les == ["+Inf", "1.0", "100000.0", "1e+06"]


# ------------------------------------------------------------------ histograms


def test_bucket_bounds_match_reference_and_catalog():
    assert (len(TTFT_BUCKETS), len(ITL_BUCKETS), len(REQ_BUCKETS), len(ITER_BUCKETS)) == (22, 19, 21, 13)
    assert token_buckets(8192) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
    assert token_buckets(131072)[-2:] == (50000, 100000)
    # spot checks against reference/vllm-metrics.md section 3 (smallest and largest bounds)
    assert (TTFT_BUCKETS[0], TTFT_BUCKETS[-1], ITL_BUCKETS[0], ITL_BUCKETS[-1]) == (0.001, 2560.0, 0.01, 80.0)
    assert (REQ_BUCKETS[0], REQ_BUCKETS[-1], ITER_BUCKETS[0], ITER_BUCKETS[-1]) == (0.3, 7680.0, 1, 16384)


@pytest.mark.parametrize(
    "q, counts, want",
    [
        (0.5, [0, 10, 10, 10], 1.5),  # all in (1, 2]: linear inside the bucket
        (0.95, [10, 10, 10, 10], 0.95),  # first bucket starts at 0
        (0.9, [0, 0, 0, 5], 4.0),  # rank in +Inf: the highest finite bound
        (0.5, [5, 3, 10, 10], 1.0),  # a decreasing bucket is flattened first
        (0.625, [2, 4, 6, 8], 3.0),  # rank 5 -> (2, 4] holds 2, rank 1 inside it -> 2 + 2 * 1/2
        (-0.1, [1, 1, 1, 1], -math.inf),
        (1.1, [1, 1, 1, 1], math.inf),
    ],
)
def test_expected_histogram_quantile(q, counts, want):
    assert expected_histogram_quantile(q, (1, 2, 4), counts) == want


def test_expected_histogram_quantile_edges():
    assert math.isnan(expected_histogram_quantile(0.5, (1, 2), [0, 0, 0]))  # idle: NaN
    assert expected_histogram_quantile(0.5, (1, 2, math.inf), [0, 4, 4]) == 1.5  # +Inf may be given
    with pytest.raises(ValueError):
        expected_histogram_quantile(0.5, (1, 2), [1, 2])


def test_allocate_is_exact_and_deterministic():
    assert allocate(20, [0.5, 0.3, 0.15, 0.05]) == [10, 6, 3, 1]
    assert allocate(12, [0.5, 0.3, 0.15, 0.05]) == [6, 4, 2, 0]
    assert sum(allocate(7, [1, 1, 1])) == 7 and allocate(0, [1]) == [0]


def _hist_groups(series):
    groups = {}
    for s in series:
        if s.kind == "histogram":
            ident = (s.family, tuple((k, v) for k, v in s.labels if k != "le"))
            groups.setdefault(ident, []).append(s)
    return groups


def test_histograms_are_consistent_and_monotonic(fl, scenarios):
    for series in (fl, scenarios["ttft_queueing"]):
        for (family, _), parts in _hist_groups(series).items():
            buckets = sorted(
                (s for s in parts if s.name.endswith("_bucket")), key=lambda s: float(s.label("le"))
            )
            count = next(s for s in parts if s.name.endswith("_count"))
            total = next(s for s in parts if s.name.endswith("_sum"))
            assert buckets[-1].label("le") == "+Inf"
            for i in range(len(count.values)):
                col = [b.values[i] for b in buckets]
                if count.values[i] is None:
                    assert set(col) == {None} and total.values[i] is None
                    continue
                assert col == sorted(col), (family, i)  # cumulative over le
                assert col[-1] == count.values[i]  # +Inf == _count
            for s in parts:  # never decreases within a process
                v = [x for x in s.values if x is not None]
                assert v == sorted(v), s


def test_counters_never_decrease_within_a_series(fl):
    for s in fl:
        if s.kind == "counter":
            v = [x for x in s.values if x is not None]
            assert v == sorted(v), s


# ------------------------------------------------------------------ vLLM builder


def test_vllm_engine_labels_and_cross_metric_consistency(fl):
    a0 = fl.truth["engines"]["a0"]
    ident = {k: a0[k] for k in ("namespace", "pod", "model_name", "engine")}
    ttft = fl.one("vllm:time_to_first_token_seconds_count", **ident)
    assert set(ttft.labelmap) == {"model_name", "engine", "job", "instance", "namespace", "pod", "container"}
    info = fl.select("vllm:cache_config_info", pod=a0["pod"], engine="0")
    assert len(info) == 1 and "model_name" not in info[0].labelmap  # as in vLLM: engine only
    at = fl.eval_step
    prompt = fl.one("vllm:prompt_tokens_total", **ident).values[at]
    by_source = sum(s.values[at] for s in fl.select("vllm:prompt_tokens_by_source_total", **ident))
    assert by_source == prompt == fl.one("vllm:request_prompt_tokens_sum", **ident).values[at]
    finished = sum(s.values[at] for s in fl.select("vllm:request_success_total", **ident))
    assert len(fl.select("vllm:request_success_total", **ident)) == 5
    assert finished == ttft.values[at] == fl.one("vllm:e2e_request_latency_seconds_count", **ident).values[at]
    waiting = fl.one("vllm:num_requests_waiting", **ident).values[at]
    assert (
        waiting == 4 == sum(s.values[at] for s in fl.select("vllm:num_requests_waiting_by_reason", **ident))
    )
    itl = fl.one("vllm:inter_token_latency_seconds_count", **ident)
    gen = fl.one("vllm:generation_tokens_total", **ident)
    # one ITL observation per output token after the first, one request per TTFT observation
    assert itl.values[at] - itl.values[at - 1] == (gen.values[at] - gen.values[at - 1]) - (
        ttft.values[at] - ttft.values[at - 1]
    )
    assert all(s.name.endswith("_total") for s in fl if s.kind == "counter" and s.name.startswith("vllm:"))


def test_pod_restart_resets_counters(fl):
    r = fl.truth["restart"]
    old = fl.one("vllm:prompt_tokens_total", pod=r["old_pod"], engine="0")
    new = fl.one("vllm:prompt_tokens_total", pod=r["new_pod"], engine="0")
    assert old.values[r["step"] - 1] is not None and old.values[r["step"]] is None
    assert new.values[r["metrics_from"] - 1] is None and new.values[r["metrics_from"]] == 0
    assert new.values[-1] < old.values[r["step"] - 1]
    up_new = fl.one("up", pod=r["new_pod"])
    assert up_new.values[r["step"] : r["metrics_from"] + 1] == (0, 0, 0, 0, 1)


def test_vllm_drop_and_spec_decode():
    common = dict(steps=3, requests=20)
    s = vllm_engine(
        "ns", "p", "m", 0, drop=["vllm:request_decode_time_seconds", "vllm:num_requests_running"], **common
    )
    names = {x.name for x in s}
    assert "vllm:num_requests_running" not in names
    assert not any(n.startswith("vllm:request_decode_time_seconds") for n in names)
    assert "vllm:spec_decode_num_drafts_total" not in names
    from servewatch_testkit.synth import SpecDecode

    s = vllm_engine("ns", "p", "m", 0, spec_decode=SpecDecode(3, 0.6), **common)
    drafts = truth.one(s, "vllm:spec_decode_num_drafts_total").values
    accepted = truth.one(s, "vllm:spec_decode_num_accepted_tokens_total").values
    assert drafts[0] == 0 and drafts[2] > drafts[1] > 0 and accepted[2] > 0


# ------------------------------------------------------------------ DCGM builder


def test_dcgm_label_layout_full_mig_idle(fl):
    g = fl.truth["gpus"]
    a0 = fl.one("DCGM_FI_DEV_FB_USED", UUID=g["a0"]["UUID"])
    lm = a0.labelmap
    assert {
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
        "exported_pod",
        "exported_namespace",
        "exported_container",
        "job",
        "instance",
        "namespace",
        "pod",
        "container",
    } == set(lm)
    assert lm["exported_pod"] == g["a0"]["pod"] and lm["pod"].startswith("nvidia-dcgm-exporter-")
    assert fl.one("DCGM_FI_DEV_FB_RESERVED", UUID=g["a0"]["UUID"]).values[0] == 573
    mig = fl.select("DCGM_FI_DEV_FB_USED", UUID=g["c2_mig1"]["UUID"])
    assert sorted(s.label("GPU_I_ID") for s in mig) == ["1", "2"]
    assert all(s.label("GPU_I_PROFILE") == "3g.40gb" and "hostname" in s.labelmap for s in mig)
    assert not fl.select("DCGM_FI_DEV_GPU_UTIL", UUID=g["c2_mig1"]["UUID"])
    assert not fl.select("DCGM_FI_DEV_FB_RESERVED", UUID=g["c2_mig1"]["UUID"])
    idle = fl.one("DCGM_FI_DEV_FB_USED", UUID=g["c1"]["UUID"])
    assert "exported_pod" not in idle.labelmap
    assert len(fl.select("DCGM_FI_DEV_FB_USED", UUID=g["a1"]["UUID"])) == 2  # scraped by two jobs
    power = {
        s.label("GPU_I_ID"): s.values for s in fl.select("DCGM_FI_DEV_POWER_USAGE", UUID=g["c2_mig1"]["UUID"])
    }
    assert power["1"] == power["2"]  # GPU-scoped fields repeat on every instance


def test_dcgm_honor_labels_bytes_and_xid():
    tgt = Target(
        "dcgm", "10.0.0.1:9400", "gpu-operator", "nvidia-dcgm-exporter-abcde", "nvidia-dcgm-exporter"
    )
    busy = dcgm_gpu(
        "h",
        0,
        "GPU-1",
        1000,
        3000,
        steps=4,
        pod="vllm-0",
        namespace="ns",
        workload_label_prefix="",
        targets=[tgt],
        profile="bytes",
        xid=lambda i: 0 if i < 2 else 79,
    )
    idle = dcgm_gpu("h", 1, "GPU-2", 0, 4000, steps=4, workload_label_prefix="", targets=[tgt])
    used = truth.one(busy, "DCGM_FI_DEV_FB_USED_BYTES")
    assert used.values[0] == 1000 * 1048576 and used.label("pod") == "vllm-0"
    assert truth.select(busy, "DCGM_FI_DEV_FB_RESERVED_BYTES") and not truth.select(
        busy, "DCGM_FI_DEV_FB_USED"
    )
    assert truth.one(idle, "DCGM_FI_DEV_FB_USED").label("pod") == "nvidia-dcgm-exporter-abcde"
    xids = {
        s.label("err_code"): (s.label("err_msg"), s.values)
        for s in truth.select(busy, "DCGM_FI_DEV_XID_ERROR")  # exporter 4.9's name
    }
    assert xids == {
        "0": ("No Error", (0, 0, None, None)),
        "79": ("GPU has fallen off the bus", (None, None, 79, 79)),
    }


def kept_names(a: str, b: str) -> set[str]:
    """The metric names exporter profiles `a` and `b` both give a field (catalog/dcgm.yaml)."""
    dcgm = catalog.load().dcgm
    pa, pb = dcgm.profile(a), dcgm.profile(b)
    return {n.name for f, n in pa.metrics.items() if pb.has(f) and pb.metric(f) == n.name}


def test_dcgm_exporter_4_10_profile_renames_only_what_4_10_renamed():
    """A profile="bytes-4.10" GPU is the 4.9 GPU with the PCIe series under 4.10's names, same values."""
    kw = dict(steps=2, step=30, util=0.5, targets=[Target("dcgm", "10.0.0.1:9400")])
    v49 = {s.name: s for s in dcgm_gpu("h", 0, "GPU-1", 1000, 3000, profile="bytes", **kw)}
    v410 = {s.name: s for s in dcgm_gpu("h", 0, "GPU-1", 1000, 3000, profile="bytes-4.10", **kw)}
    p49, p410 = catalog.load().dcgm.profile("bytes"), catalog.load().dcgm.profile("bytes-4.10")
    assert set(v49) - set(v410) == {p49.metric("pcie_tx"), p49.metric("pcie_rx")}
    assert set(v410) - set(v49) == {p410.metric("pcie_tx"), p410.metric("pcie_rx")}
    assert set(v49) & set(v410) <= kept_names("bytes", "bytes-4.10")
    for field in ("pcie_tx", "pcie_rx"):
        s49, s410 = v49[p49.metric(field)], v410[p410.metric(field)]
        assert (s410.labels, s410.values) == (s49.labels, s49.values)


def test_a_gpu_with_its_nvlink_fields_on_exports_them_under_each_profiles_names():
    """NVLink TX and RX are opt-in (``nvlink_links``): under 4.10 they carry its ..._BYTES_PER_SECOND
    names, under 4.9 its ..._BYTES ones, the same bytes per second each way, adding up to the NVLink
    throughput the same GPU reports; off, neither is exported."""
    kw = dict(steps=2, step=30, util=0.5, targets=[Target("dcgm", "10.0.0.1:9400")])
    ways = ("nvlink_tx", "nvlink_rx")
    values = {}
    for profile in ("bytes", "bytes-4.10"):
        on = {
            s.name: s for s in dcgm_gpu("h", 0, "GPU-1", 1000, 3000, profile=profile, nvlink_links=True, **kw)
        }
        off = {s.name for s in dcgm_gpu("h", 0, "GPU-1", 1000, 3000, profile=profile, **kw)}
        p = catalog.load().dcgm.profile(profile)
        names = {p.metric(w) for w in ways}
        assert set(on) - off == names and not names & off, profile
        total = on[p.metric("nvlink_throughput")].values
        assert [sum(on[p.metric(w)].values[i] for w in ways) for i in range(2)] == list(total), profile
        values[profile] = [on[p.metric(w)].values for w in ways]
    assert values["bytes"] == values["bytes-4.10"]
    assert catalog.load().dcgm.profile("bytes-4.10").metric("nvlink_tx").endswith("_BYTES_PER_SECOND")


def test_dcgm_exporter_4_9_profile_renames_every_field_and_converts_units():
    """A profile="bytes" GPU is what exporter 4.9 exposes: DCGM 4.7 names, bytes, ratios, hertz, joules."""
    kw = dict(steps=2, step=30, util=0.5, targets=[Target("dcgm", "10.0.0.1:9400")])
    old = dcgm_gpu("h", 0, "GPU-1", 1000, 3000, **kw)
    new = dcgm_gpu("h", 0, "GPU-1", 1000, 3000, profile="bytes", **kw)
    # only names the catalog gives a field in both (4.9 keeps the PCIe names; 4.10 renames them)
    assert {s.name for s in old} & {s.name for s in new} <= kept_names("mib", "bytes")
    assert truth.one(old, "DCGM_FI_DEV_GPU_UTIL").values == (50, 50)  # percent
    assert truth.one(new, "DCGM_FI_DEV_GPU_UTIL_RATIO").values == (0.5, 0.5)
    assert truth.one(new, "DCGM_FI_DEV_BOARD_POWER_WATTS").values == (385, 385)  # 70 + 630 x 0.5 W
    assert truth.one(new, "DCGM_FI_DEV_SM_CLOCK_HERTZ").values == (1.98e9, 1.98e9)  # 1980 MHz
    # NVLink throughput is a rate already (75 000 MB/s at half load), not a counter that accumulates
    assert truth.one(old, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL").values == (75000, 75000)
    assert truth.one(new, "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL").values == (7.5e10, 7.5e10)
    # energy accumulates: 385 W x 30 s = 11 550 J a step on top of the 1.2e12 mJ start
    energy = truth.one(new, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL").values
    assert energy == (1.2e9 + 11550, 1.2e9 + 2 * 11550)
    used = truth.one(new, "DCGM_FI_DEV_FB_USED_BYTES")
    assert used.values == (1000 * 2**20,) * 2
    assert used.label("DCGM_FI_SYSTEM_DRIVER_VERSION") and "DCGM_FI_DRIVER_VERSION" not in used.labelmap


# ------------------------------------------------------------------ PromQL emulation


def test_truth_rate_extrapolation():
    c = Series("c_total", {}, [10 * i for i in range(30)], "counter")
    assert truth.increase(c, 20, 300) == pytest.approx(100.0)  # 90 over 270 s extrapolated to 300 s
    assert truth.rate(c, 20, 300) == pytest.approx(1 / 3)
    assert truth.increase(c, 5, 300) == 50.0  # starts at 0: no extrapolation below zero
    reset = Series("r_total", {}, [0, 10, 20, 5, 15], "counter")
    assert truth.increase(reset, 4, 150) == pytest.approx(35.0)  # 20 + 15 across the reset
    assert truth.increase(c, 0, 300) is None  # one sample: no rate
    g = Series("g", {}, [1, None, None, None, None, None, None, None, None, None, None, None])
    assert truth.instant(g, 9) == 1 and truth.instant(g, 10) is None  # 5m lookback, left-open


# Hand-derived quantiles of CHAT_MIX (10/6/3/1 of 20 requests, 20/12/6/2 of 40): TTFT 0.17/0.45/0.9/0.3 s,
# e2e 7.135/16.41/14.355/13.05 s, prefill 0.12/0.35/0.7/0.2 s, queue 0.05/0.1/0.2/0.1 s, ITL 35-50 ms.
TTFT_P95 = 0.75 + 0.25 * 2 / 3  # 17 of 20 at or below 0.5 s, 3 x 0.9 s in (0.75, 1.0]
ITL_P95 = 0.025 + 0.025 * 0.95  # every ITL in (0.025, 0.05]
E2E_P95 = 15 + 5 * 5 / 6  # 14 of 20 at or below 15 s, 6 x 16.41 s in (15, 20]
QUEUE_P95 = 0.3 * 0.95  # every queue time in (0, 0.3]
PREFILL_P95 = 0.5 + 0.3 * 2 / 3  # 17 of 20 at or below 0.5 s, 3 x 0.7 s in (0.5, 0.8]


def test_fleet_documented_truth(fl):
    t = fl.truth
    assert (
        t["ttft_p95_a0"] == pytest.approx(0.75 + 0.25 * 4 / 6) and t["ttft_p50_a0"] == 0.25
    )  # 34 of 40 <= 0.5 s
    a0 = {k: t["engines"]["a0"][k] for k in ("pod", "engine")}
    got = truth.histogram_quantile_over(
        0.95, fl.select("vllm:time_to_first_token_seconds_bucket", **a0), fl.eval_step, 300
    )
    assert got == pytest.approx(TTFT_P95, rel=1e-12)
    idle = {k: t["engines"]["a1"][k] for k in ("pod", "engine")}
    assert (
        truth.histogram_quantile_over(
            0.95, fl.select("vllm:time_to_first_token_seconds_bucket", **idle), fl.eval_step, 300
        )
        is None
    )  # idle engine: no quantile
    for key, want in (("a0", 0.926506), ("a1", 0.916701), ("c0", 0.885091), ("c2_mig1", 0.889435)):
        g = t["gpus"][key]
        used = fl.select("DCGM_FI_DEV_FB_USED", UUID=g["UUID"], GPU_I_ID=g["GPU_I_ID"])
        free = fl.select("DCGM_FI_DEV_FB_FREE", UUID=g["UUID"], GPU_I_ID=g["GPU_I_ID"])
        u = max(truth.instant(s, fl.eval_step) for s in used)
        f = max(truth.instant(s, fl.eval_step) for s in free)
        assert truth.fb_ratio(u, f) == g["fb_ratio"] == pytest.approx(want, abs=1e-6)
    kv = fl.one("vllm:kv_cache_usage_perc", **a0).values
    assert kv[fl.truth["kv_hot"]["from_step"] :] == (0.97,) * (fl.steps - fl.truth["kv_hot"]["from_step"])


# ------------------------------------------------------------------ incident ground truth


def _q(sc, family, q, at, **labels):
    return truth.histogram_quantile_over(q, sc.select(family + "_bucket", **labels), at, 300)


def _engines(sc):
    return [{"pod": e["pod"], "engine": e["engine"]} for e in sc.truth["engines"]]


BEFORE = inc.INCIDENT_STEP - 1


def test_incident_layout(scenarios):
    assert set(scenarios) >= {
        "kv_saturation",
        "ttft_queueing",
        "ttft_long_prompts",
        "ep_rank_gpu_full",
        "dcgm_renamed",
        "healthy",
    }
    for name, sc in scenarios.items():
        assert (sc.steps, sc.step, sc.eval_step) == (120, 30, 119)
        assert (sc.incident_step is None) == (name == "healthy")
        assert len(sc.truth["engines"]) == 4 and len(sc.truth["gpus"]) == 8
    assert incident("healthy").truth == scenarios["healthy"].truth
    with pytest.raises(KeyError, match="unknown incident"):
        incident("nope")


def test_healthy_truth(scenarios):
    sc = scenarios["healthy"]
    t = sc.truth
    assert t["bad"] == [] and t["ttft_p50"] == 0.25
    want = {
        "vllm:time_to_first_token_seconds": TTFT_P95,
        "vllm:inter_token_latency_seconds": ITL_P95,
        "vllm:e2e_request_latency_seconds": E2E_P95,
        "vllm:request_queue_time_seconds": QUEUE_P95,
        "vllm:request_prefill_time_seconds": PREFILL_P95,
    }
    assert [t[k] for k in ("ttft_p95", "itl_p95", "e2e_p95", "queue_p95", "prefill_p95")] == pytest.approx(
        list(want.values()), rel=1e-12
    )
    for e in _engines(sc):
        for at in (BEFORE, sc.eval_step):
            for family, p95 in want.items():
                assert _q(sc, family, 0.95, at, **e) == pytest.approx(p95, rel=1e-12), family
        assert truth.instant(sc.one("vllm:kv_cache_usage_perc", **e), sc.eval_step) == 0.45
        assert truth.rate(sc.one("vllm:num_preemptions_total", **e), sc.eval_step, 300) == 0
    for family, p95 in want.items():  # the model level (all four engines) is the same distribution
        assert _q(sc, family, 0.95, sc.eval_step) == pytest.approx(p95, rel=1e-12), family


@pytest.mark.parametrize(
    "family",
    [
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
    ],
)
def test_healthy_p95_is_no_knife_edge(scenarios, family):
    """The p95 rank lies inside a bucket, not on a bound with empty buckets above it: a hair more rank
    (the float noise of rate()) moves the quantile a hair, never up to the next non-empty bucket. The old
    mix (one 75 s request in 20) sat on the 20 s bound with nothing up to 60 s and Prometheus said
    60.0000000000002."""
    sc = scenarios["healthy"]
    at = sc.eval_step
    assert _q(sc, family, 0.95 * (1 + 1e-9), at) == pytest.approx(_q(sc, family, 0.95, at), rel=1e-6)
    assert _q(sc, family, 0.95 * (1 - 1e-9), at) == pytest.approx(_q(sc, family, 0.95, at), rel=1e-6)


def test_kv_saturation_truth(scenarios):
    sc = scenarios["kv_saturation"]
    t = sc.truth
    bad = {"pod": t["bad"][0]["pod"], "engine": t["bad"][0]["engine"]}
    assert bad == {"pod": inc.POD_0, "engine": "1"}
    assert (t["itl_p95_before"], t["itl_p95_after"], t["preemptions_per_s"]) == (0.04875, 0.1475, 0.1)
    # per model: 4 x 5536 ITLs per step (10 x 199 + 6 x 399 + 3 x 299 + 1 x 255 per engine), a quarter of them
    # in (0.1, 0.15]: rank 0.95 lies (0.95 - 0.75) / 0.25 = 0.8 into that bucket
    assert t["itl_p95_model_after"] == pytest.approx(0.1 + 0.05 * 0.8, rel=1e-12)
    assert _q(sc, "vllm:inter_token_latency_seconds", 0.95, sc.eval_step) == pytest.approx(0.14, rel=1e-12)
    # e2e: 70 of 80 at or below 30 s, the bad engine's 38.55 s in (30, 40],
    # its 9 requests of 48.33/41.265 s in (40, 50]: rank 76 -> 40 + 10 * 5/9
    assert t["e2e_p95_model_after"] == pytest.approx(40 + 10 * 5 / 9, rel=1e-12)
    assert _q(sc, "vllm:e2e_request_latency_seconds", 0.95, sc.eval_step) == pytest.approx(
        40 + 10 * 5 / 9, rel=1e-12
    )
    for e in _engines(sc):
        is_bad = e == bad
        itl = _q(sc, "vllm:inter_token_latency_seconds", 0.95, sc.eval_step, **e)
        assert itl == pytest.approx(0.1475 if is_bad else 0.04875, rel=1e-12)
        assert _q(sc, "vllm:inter_token_latency_seconds", 0.95, BEFORE, **e) == pytest.approx(
            0.04875, rel=1e-12
        )
        assert truth.instant(sc.one("vllm:kv_cache_usage_perc", **e), sc.eval_step) == (
            0.98 if is_bad else 0.45
        )
        pre = truth.rate(sc.one("vllm:num_preemptions_total", **e), sc.eval_step, 300)
        assert pre == pytest.approx(0.1 if is_bad else 0.0, rel=1e-12)
        assert _q(sc, "vllm:time_to_first_token_seconds", 0.95, sc.eval_step, **e) == pytest.approx(
            TTFT_P95, rel=1e-12
        )


def test_ttft_queueing_truth(scenarios):
    sc = scenarios["ttft_queueing"]
    t = sc.truth
    assert len(t["bad"]) == 4
    # every queued TTFT (4.17/4.45/4.9/4.3 s) and queue time (4.05-4.2 s) in (2.5, 5.0]
    assert (t["ttft_p95_after"], t["queue_p95_after"]) == (pytest.approx(2.5 + 2.5 * 0.95), 4.875)
    assert (t["prefill_p95"], t["ttft_p95_before"]) == (pytest.approx(PREFILL_P95), pytest.approx(TTFT_P95))
    for e in _engines(sc):
        at = sc.eval_step
        assert _q(sc, "vllm:time_to_first_token_seconds", 0.95, at, **e) == pytest.approx(
            t["ttft_p95_after"], rel=1e-12
        )
        assert _q(sc, "vllm:time_to_first_token_seconds", 0.95, BEFORE, **e) == pytest.approx(
            TTFT_P95, rel=1e-12
        )
        assert _q(sc, "vllm:request_queue_time_seconds", 0.95, at, **e) == pytest.approx(4.875, rel=1e-12)
        for fam, key in (
            ("vllm:request_prefill_time_seconds", "prefill_p95"),
            ("vllm:request_prompt_tokens", "prompt_tokens_p95"),
        ):
            assert _q(sc, fam, 0.95, at, **e) == pytest.approx(t[key], rel=1e-12)
            assert _q(sc, fam, 0.95, BEFORE, **e) == pytest.approx(t[key], rel=1e-12)
        assert truth.instant(sc.one("vllm:num_requests_waiting", **e), at) == 18
        assert truth.rate(sc.one("vllm:request_success_total", finished_reason="stop", **e), at, 300) > 0


def test_ttft_long_prompts_truth(scenarios):
    sc = scenarios["ttft_long_prompts"]
    t = sc.truth
    # TTFT 0.53/1.5/3.0/0.9 s and prefill 0.48/1.4/2.8/0.8 s: 17 of 20 at or below 2.5 s, 3 in (2.5, 5.0]
    assert t["prompt_tokens_p95_after"] == 40000 and t["ttft_p95_after"] == pytest.approx(2.5 + 2.5 * 2 / 3)
    assert t["prefill_p95_before"] == pytest.approx(PREFILL_P95)
    assert t["prefill_p95_after"] == pytest.approx(2.5 + 2.5 * 2 / 3)
    for e in _engines(sc):
        at = sc.eval_step
        assert _q(sc, "vllm:time_to_first_token_seconds", 0.95, at, **e) == pytest.approx(
            t["ttft_p95_after"], rel=1e-12
        )
        assert _q(sc, "vllm:request_prefill_time_seconds", 0.95, at, **e) == pytest.approx(
            t["prefill_p95_after"], rel=1e-12
        )
        assert _q(sc, "vllm:request_prompt_tokens", 0.95, at, **e) == pytest.approx(40000, rel=1e-12)
        assert _q(sc, "vllm:request_prompt_tokens", 0.95, BEFORE, **e) == pytest.approx(
            t["prompt_tokens_p95_before"], rel=1e-12
        )
        assert _q(sc, "vllm:request_queue_time_seconds", 0.95, at, **e) == pytest.approx(0.285, rel=1e-12)
        assert truth.instant(sc.one("vllm:num_requests_waiting", **e), at) == 0


def test_ep_rank_gpu_full_truth(scenarios):
    sc = scenarios["ep_rank_gpu_full"]
    t = sc.truth
    assert t["fb_ratio"] == pytest.approx(0.969995, abs=1e-6) and t["fb_ratio_siblings"] == pytest.approx(
        0.600005, abs=1e-6
    )
    for g in sc.truth["gpus"]:
        u = truth.instant(sc.one("DCGM_FI_DEV_FB_USED", UUID=g["UUID"]), sc.eval_step)
        f = truth.instant(sc.one("DCGM_FI_DEV_FB_FREE", UUID=g["UUID"]), sc.eval_step)
        want = t["fb_ratio"] if g["UUID"] == t["bad"][0]["UUID"] else t["fb_ratio_siblings"]
        assert truth.fb_ratio(u, f) == want
        assert (
            truth.fb_ratio(
                truth.instant(sc.one("DCGM_FI_DEV_FB_USED", UUID=g["UUID"]), BEFORE - 10),
                truth.instant(sc.one("DCGM_FI_DEV_FB_FREE", UUID=g["UUID"]), BEFORE - 10),
            )
            == t["fb_ratio_siblings"]
        )


def test_dcgm_renamed_truth(scenarios):
    sc = scenarios["dcgm_renamed"]
    at = sc.eval_step
    assert all(truth.instant(s, at) is None for s in sc.select("DCGM_FI_DEV_FB_USED"))
    assert all(truth.instant(s, BEFORE) is not None for s in sc.select("DCGM_FI_DEV_FB_USED"))
    used = sc.select("DCGM_FI_DEV_FB_USED_BYTES")
    assert len(used) == 8 and all(s.values[at] == sc.truth["fb_used_bytes"] for s in used)
    assert all("hostname" in s.labelmap and "DCGM_FI_SYSTEM_DRIVER_VERSION" in s.labelmap for s in used)
    for host in inc.HOSTS:  # the exporter job is up at every step (old pod, then new pod)
        ups = [
            s
            for s in sc.select("up", job="nvidia-dcgm-exporter")
            if s.label("instance")
            == sc.select("DCGM_FI_DEV_FB_USED_BYTES", Hostname=None, hostname=host)[0].label("instance")
        ]
        assert len(ups) == 2
        assert all(sum(1 for s in ups if s.values[i] == 1) == 1 for i in range(sc.steps))


def test_vllm_stats_missing_truth(scenarios):
    sc = scenarios["vllm_stats_missing"]
    at = sc.eval_step
    gone = [s for s in sc if s.name.startswith("vllm:") and s.label("pod") == inc.POD_1]
    assert gone and all(truth.instant(s, at) is None for s in gone)
    assert sc.one("up", pod=inc.POD_1).values[at] == 1
    assert any(
        truth.instant(s, at) is not None
        for s in sc
        if s.name.startswith("vllm:") and s.label("pod") == inc.POD_0
    )


def test_incident_docstrings_state_ground_truth():
    for name, build in INCIDENTS.items():
        doc = build.__doc__ or ""
        assert len(doc.split()) > 25, f"{name}: document the ground truth in the docstring"
