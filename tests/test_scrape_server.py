"""servewatch_testkit.scrape_server and fastforward: the live fleet the distributed tests scrape, and the
rules they evaluate on it."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import yaml

from servewatch import generate
from servewatch.promql.builders import MEMORY_GAP
from servewatch_testkit.fastforward import compressed_specs, duration
from servewatch_testkit.scrape_server import ScrapeServer, exposition, value_at
from servewatch_testkit.synth import Series, Target, incident, up


def test_values_go_on_past_the_scenario_as_it_ended():
    counter = Series("c_total", {}, [0, 10, 30], "counter")
    gauge = Series("g", {}, [5, 7, 9])
    assert [value_at(counter, i) for i in range(5)] == [0, 10, 30, 50, 70]
    assert [value_at(gauge, i) for i in range(5)] == [5, 7, 9, 9, 9]
    assert value_at(Series("gone", {}, [1, None]), 4) is None


def test_exposition_scales_counters_not_gauges_and_leaves_out_the_target_labels():
    t = {"job": "vllm", "instance": "10.0.0.1:8000"}
    series = [
        Series("vllm:prompt_tokens_total", {**t, "engine": "0"}, [0, 300], "counter"),
        Series("vllm:kv_cache_usage_perc", {**t, "engine": "0"}, [0.5, 0.75]),
        Series("x_bucket", {**t, "le": "+Inf"}, [3, 6], "histogram"),
        Series("absent_now", t, [1, None]),
    ]
    assert exposition(series, 1, drop=t, scale=30) == (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.75\n'
        "# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{engine="0"} 10.0\n'
        "# TYPE x histogram\n"
        'x_bucket{le="+Inf"} 0.2\n'
    )


def test_each_series_belongs_to_the_target_whose_labels_it_carries():
    a, b = Target("vllm", "10.0.0.1:8000", "ns", "p-a"), Target("vllm", "10.0.0.2:8000", "ns", "p-b")
    fleet = [up(a, 1, steps=2), up(b, 1, steps=2)]
    fleet += [
        Series("g", {**a.labels(), "engine": "0"}, [1, 1]),
        Series("g", {**b.labels(), "engine": "0"}, [2, 2]),
    ]
    srv = ScrapeServer({"c": fleet})
    assert srv.render("c", 0, 0) == '# TYPE g gauge\ng{engine="0"} 1.0\n'
    assert srv.render("c", 1, 0).endswith('g{engine="0"} 2.0\n')
    with pytest.raises(ValueError, match="1 series belong to no target"):
        ScrapeServer({"c": [*fleet, Series("g", {"job": "other"}, [1, 1])]})


@pytest.mark.integration
def test_targets_answer_over_http_and_a_down_target_fails_its_scrape():
    live, down = Target("dcgm", "10.0.0.3:9400"), Target("dcgm", "10.0.0.4:9400")
    fleet = [up(live, 1, steps=3), up(down, [1, 0, 0], steps=3)]
    fleet += [Series("DCGM_FI_DEV_FB_USED", {**t.labels(), "gpu": "0"}, [1, 2, 3]) for t in (live, down)]
    with ScrapeServer({"x": fleet}, first_step=1, seconds_per_step=3600) as srv:
        [cfg, cfg_down] = srv.scrape_config("x", "1s")["static_configs"]
        assert cfg["labels"] == {
            "job": "dcgm",
            "instance": "10.0.0.3:9400",
            "__metrics_path__": "/x/0/metrics",
        }
        with urllib.request.urlopen(srv.url + cfg["labels"]["__metrics_path__"], timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert r.read().decode() == '# TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{gpu="0"} 2.0\n'
        with pytest.raises(urllib.error.HTTPError, match="503"):
            urllib.request.urlopen(srv.url + cfg_down["labels"]["__metrics_path__"], timeout=5)
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(srv.url + "/x/9/metrics", timeout=5)


def test_incident_fleets_split_into_their_exporters_and_pods():
    srv = ScrapeServer({"east": incident("kv_saturation")})
    jobs = sorted(t.labels["job"] for t in srv.targets["east"])
    assert len(jobs) == 4 and len({t.labels["instance"] for t in srv.targets["east"]}) == 4


def test_durations_divide_into_whole_seconds_or_milliseconds():
    assert [duration(s) for s in (10, 20, 2, 0.5, 1 / 3)] == ["10s", "20s", "2s", "500ms", "334ms"]


def test_compressed_specs_divide_every_time_the_rules_use(repo, tmp_path):
    specs = compressed_specs(repo / "specs", tmp_path / "specs", 30, cluster_label="cluster")
    config = yaml.safe_load((specs / "config.yaml").read_text())["config"]
    assert (config["scrape_interval"], config["rate_window"], config["cluster_label"]) == (
        "1s",
        "10s",
        "cluster",
    )
    _, files = generate.build(specs, tmp_path)
    groups = {
        g["name"]: g
        for f in ("gpu", "vllm")
        for g in yaml.safe_load(files[f"rules/{f}.rules.yaml"])["groups"]
    }
    alerts = {r["alert"]: r for g in groups.values() for r in g["rules"] if "alert" in r}
    assert alerts["VLLMKVCacheUsageHigh"]["for"] == "10s"  # 5m
    assert alerts["VLLMInterTokenLatencyP95High"]["for"] == "20s"  # 10m
    assert alerts["VLLMKVCacheUsageHigh"]["expr"].endswith("> 0.95")  # thresholds stay
    assert groups["servewatch-vllm-request-lengths"]["interval"] == "4s"  # 2m
    # every window is compressed but a memory's read of its own previous value, which covers a stop of
    # rule evaluation (wall-clock time, promql.builders.MEMORY_GAP)
    windows = files["rules/vllm.rules.yaml"].replace(f"[{MEMORY_GAP}]) > time()", "")
    assert "[10s]" in windows and "[5m]" not in windows
