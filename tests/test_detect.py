"""`servewatch detect` against a real Prometheus 3.5 on 127.0.0.1 holding synthetic data.

One Prometheus per scenario, started once per module: the fleet (mixed Hostname/hostname, MIG, one GPU
scraped twice), the dcgm_renamed incident (4.9 byte names from step 80), the healthy incident (the
default layout) and a small hand-built one (honorLabels true, a cluster label, vLLM outside Kubernetes
still exposing a removed metric name).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from servewatch.cli import main
from servewatch.spec.loader import load
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import (
    INCIDENTS,
    Series,
    dcgm_gpu,
    dcgm_target,
    fleet,
    stable_uuid,
    to_openmetrics,
    up,
    with_labels,
)
from servewatch_testkit.synth.histogram import histogram_series
from servewatch_testkit.synth.scrape import Target

REPO_SPECS = Path(__file__).resolve().parents[1] / "specs"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.tools("promtool", "prometheus"),
    pytest.mark.usefixtures("no_prometheus_env"),  # the servers these tests start, not the user's
]

STEPS, STEP = 40, 30


def _serve(sc_or_series, steps: int, step: float, eval_step: int):
    start = backfill_start(steps, step)
    prom = LocalPrometheus(to_openmetrics(list(sc_or_series), start, step)).start()
    return prom, start + eval_step * step, start


@pytest.fixture(scope="module")
def fleet_prom():
    sc = fleet()
    prom, at, _ = _serve(sc, sc.steps, sc.step, sc.eval_step)
    yield prom, at, sc
    prom.close()


@pytest.fixture(scope="module")
def renamed_prom():
    sc = INCIDENTS["dcgm_renamed"]()
    prom, at, start = _serve(sc, sc.steps, sc.step, sc.eval_step)
    yield prom, at, sc, start
    prom.close()


@pytest.fixture(scope="module")
def healthy_prom():
    sc = INCIDENTS["healthy"]()
    prom, at, _ = _serve(sc, sc.steps, sc.step, sc.eval_step)
    yield prom, at
    prom.close()


def _plain_cluster_series() -> list[Series]:
    """One node, honorLabels true (workload pod in `pod`), cluster label, vLLM scraped by static config."""
    tgt = dcgm_target("gpu-node-z", job="dcgm")
    s = [up(tgt, 1, steps=STEPS)]
    s += dcgm_gpu(
        "gpu-node-z",
        0,
        stable_uuid("detect", "z", "0"),
        60000,
        20986,
        steps=STEPS,
        step=STEP,
        pod="llama-7f9c-abcde",
        namespace="serving",
        workload_label_prefix="",
        targets=[tgt],
    )
    s += dcgm_gpu(
        "gpu-node-z",
        1,
        stable_uuid("detect", "z", "1"),
        4,
        80982,
        steps=STEPS,
        step=STEP,
        workload_label_prefix="",
        targets=[tgt],
    )
    vt = Target("llm-serving", "10.9.0.5:8000")
    ids = {**vt.labels(), "model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
    s.append(up(vt, 1, steps=STEPS))
    s.append(Series("vllm:num_requests_running", ids, [3.0] * STEPS))
    s.append(Series("vllm:gpu_cache_usage_perc", ids, [0.4] * STEPS))  # vLLM < 0.12
    return with_labels(s, cluster="eu-1")


@pytest.fixture(scope="module")
def plain_prom():
    prom, at, _ = _serve(_plain_cluster_series(), STEPS, STEP, STEPS - 1)
    yield prom, at
    prom.close()


def detect(capsys, url: str, at: float, fmt: str = "json", *extra: str):
    rc = main(["detect", "--prometheus", url, "--at", f"{at:.3f}", "--format", fmt, *extra])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if fmt == "json" else out.out), out.err


def _topics(result, level=None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in result["findings"]:
        if level is None or f["level"] == level:
            out.setdefault(f["topic"], []).append(f["message"])
    return out


def test_fleet_mixed_hostname_mig_twice_scraped_exported(fleet_prom, capsys):
    prom, at, sc = fleet_prom
    rc, res, err = detect(capsys, prom.url, at)
    assert (rc, err) == (0, "")
    d = res["counts"]["dcgm"]
    assert (d["hostname_label_Hostname"], d["hostname_label_hostname"]) == (
        5,
        4,
    )  # gpu-node-c runs 4.6.0-4.8.3
    assert "mixed spellings" in _topics(res, "warning")["dcgm.hostname_label"][0]
    assert res["config"]["dcgm"] == {
        "fb_units": "mib",
        "hostname_label": "Hostname",
        "workload_labels": "exported",
    }
    assert d["mig_instance_series"] == 2
    a1 = sc.truth["gpus"]["a1"]
    assert d["gpus_scraped_twice"] == 1
    [dup] = _topics(res)["dcgm.duplicates"]
    assert a1["UUID"] in dup and "dcgm-exporter/" in dup and "nvidia-dcgm-exporter/" in dup
    assert d["exported_pod_series"] > 0 and d["workload_pod_series"] == 0
    assert (
        res["counts"]["vllm"]["with_namespace_and_pod"]
        == res["counts"]["vllm"]["num_requests_running_series"]
        > 0
    )
    assert res["matches"] is True and res["differences"] == []


def test_output_is_deterministic_in_every_format(fleet_prom, capsys):
    prom, at, _ = fleet_prom
    for fmt in ("text", "yaml", "json"):
        first = detect(capsys, prom.url, at, fmt)
        assert first == detect(capsys, prom.url, at, fmt)
    rc, text, _ = detect(capsys, prom.url, at, "text")
    assert "config:\n" in text and "The current config matches what was detected." in text


def test_dcgm_renamed_suggests_bytes_and_exits_3(renamed_prom, capsys):
    prom, at, _, _ = renamed_prom
    rc, res, _ = detect(capsys, prom.url, at)
    assert rc == 3
    assert res["config"]["dcgm"]["fb_units"] == "bytes"
    assert {"field": "dcgm.fb_units", "current": "mib", "suggested": "bytes"} in res["differences"]
    assert (
        res["counts"]["dcgm"]["fb_used_mib_series"] == 0
        and res["counts"]["dcgm"]["fb_used_bytes_series"] == 8
    )
    rc, text, _ = detect(capsys, prom.url, at, "text")
    assert rc == 3 and 'fb_units: bytes  # was: "mib"' in text


def test_dcgm_renamed_mid_upgrade_reports_both_names(renamed_prom, capsys):
    prom, _, sc, start = renamed_prom
    rc, res, _ = detect(
        capsys, prom.url, sc.time_at(start, sc.incident_step + 2)
    )  # old names within lookback
    d = res["counts"]["dcgm"]
    assert d["fb_used_mib_series"] == 8 and d["fb_used_bytes_series"] == 8
    assert "mid-upgrade" in _topics(res, "warning")["dcgm.fb_units"][0]
    assert d["gpus_scraped_twice"] == 0  # same job/instance, two names: not a duplicate scrape


def test_default_layout_exits_0(healthy_prom, capsys):
    prom, at = healthy_prom
    rc, text, err = detect(capsys, prom.url, at, "text")
    assert (rc, err) == (0, "")
    assert "The current config matches what was detected." in text and "[differs]" not in text


def test_plain_workload_labels_cluster_and_old_vllm(plain_prom, capsys):
    prom, at = plain_prom
    rc, res, _ = detect(capsys, prom.url, at)
    assert rc == 3
    cfg = res["config"]
    assert cfg["dcgm"]["workload_labels"] == "plain"
    assert cfg["cluster_label"] == "cluster"
    assert cfg["identity"]["vllm"] == ["job", "instance", "model_name", "engine"]
    assert cfg["identity"]["model"] == ["job", "model_name"]
    assert cfg["targets"] == {"dcgm": 'job=~".*dcgm.*"', "vllm": 'job=~"llm-serving"'}
    fields = {d["field"] for d in res["differences"]}
    assert fields == {
        "dcgm.workload_labels",
        "cluster_label",
        "identity.vllm",
        "identity.model",
        "targets.vllm",
    }
    [old] = _topics(res, "warning")["vllm.version"]
    assert "vllm:gpu_cache_usage_perc" in old and "older than 0.12.0" in old


def test_nothing_found_is_never_a_match(capsys):
    """An empty Prometheus (or a time with no exporter data) is exit 4 with its own message: a CI gate
    running detect must not pass on it."""
    with LocalPrometheus(None) as prom:
        rc, text, err = detect(capsys, prom.url, 1_000_000_000, "text")
        assert (rc, err) == (4, "")
        assert "matches" not in text and "Suggested config" not in text
        assert text.rstrip().endswith(
            "Nothing was detected: no dcgm-exporter and no vLLM series matched the selectors at that "
            "time, so the config was not checked (exit 4)."
        )
        rc, res, _ = detect(capsys, prom.url, 1_000_000_000)
    assert rc == 4 and res["matches"] is False and res["not_found"] == ["dcgm", "vllm"]
    with pytest.raises(SystemExit):
        main(["detect", "--help"])
    assert "4 nothing was detected" in " ".join(capsys.readouterr().out.split())


def test_a_source_with_no_series_is_not_checked(capsys):
    """Only dcgm-exporter data, in the default layout: the dcgm settings are confirmed, the vLLM ones
    cannot be (exit 4, not 0)."""
    sc = INCIDENTS["healthy"]()
    dcgm_only = [s for s in sc if s.label("job") == "nvidia-dcgm-exporter"]
    prom, at, _ = _serve(dcgm_only, sc.steps, sc.step, sc.eval_step)
    try:
        rc, text, _ = detect(capsys, prom.url, at, "text")
        rc_json, res, _ = detect(capsys, prom.url, at)
    finally:
        prom.close()
    assert rc == rc_json == 4
    assert text.rstrip().endswith(
        "Nothing was detected for vLLM: its settings were not checked (exit 4); the dcgm-exporter "
        "settings match what was detected."
    )
    assert res["matches"] is False and res["not_found"] == ["vllm"] and res["differences"] == []


def test_unreachable_server_exits_1_with_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens there
    rc = main(["detect", "--prometheus", f"http://127.0.0.1:{port}", "--timeout", "5"])
    out = capsys.readouterr()
    assert rc == 1 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "servewatch: error: cannot reach Prometheus at http://127.0.0.1:"
    )


def test_suggested_config_generates(plain_prom, capsys, repo, specs_with):
    """What detect suggests must be a config servewatch accepts, dashboards included."""
    import yaml

    from servewatch import generate

    prom, at = plain_prom
    _, res, _ = detect(capsys, prom.url, at)
    current = yaml.safe_load((repo / "specs" / "config.yaml").read_text())["config"]
    suggested = yaml.safe_dump({"config": {**current, **res["config"]}})
    model, files = generate.build(specs_with({"config.yaml": suggested}))
    assert model.config.identity.vllm == ("job", "instance", "model_name", "engine")
    assert "dashboards/vllm-serving.json" in files


def _dropped_bucket_series() -> list[Series]:
    """Issue 22.1: one engine whose TTFT histogram lost the bucket the TTFT SLO counts good events
    from (a cardinality relabelling kept every other bucket), beside one that has it."""
    slo = load(REPO_SPECS).slos["vllm-ttft"]
    bounds = (0.5, 1.0, slo.sli.threshold, 5.0)
    out: list[Series] = []
    for pod, model, dropped in (("a-0", "org/dropped", True), ("b-0", "org/kept", False)):
        ids = {"namespace": "llm", "pod": pod, "model_name": model, "engine": "0", "job": "vllm"}
        vt = Target("vllm", f"10.9.1.{len(out)}:8000")
        out.append(up(vt, 1, steps=STEPS))
        out.append(Series("vllm:num_requests_running", ids, [3.0] * STEPS))
        hist = histogram_series(slo.sli.histogram, ids, bounds, [[(0.2, 5), (0.3, 5)]] * STEPS)
        le = repr(float(slo.sli.threshold))
        out += [s for s in hist if not (dropped and s.labelmap.get("le") == le)]
    return out


@pytest.fixture(scope="module")
def dropped_bucket_prom():
    prom, at, _ = _serve(_dropped_bucket_series(), STEPS, STEP, STEPS - 1)
    yield prom, at
    prom.close()


def test_a_latency_slo_bucket_dropped_by_relabeling_is_reported(dropped_bucket_prom, capsys):
    prom, at = dropped_bucket_prom
    rc, res, err = detect(capsys, prom.url, at)
    slo = load(REPO_SPECS).slos["vllm-ttft"]
    [message] = _topics(res, "warning")["slos"]
    hist = slo.sli.histogram
    assert f'{hist}_bucket{{le="{float(slo.sli.threshold)!r}"}}' in message and "vllm-ttft" in message
    assert "llm/org/dropped" in message and "org/kept" not in message, message
