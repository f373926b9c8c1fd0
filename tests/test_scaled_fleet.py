"""The benchmark fleet: its shape, its labels, and the streaming OpenMetrics writer."""

from pathlib import Path

import pytest

from servewatch import catalog, generate
from servewatch_testkit.synth import Series, to_openmetrics
from servewatch_testkit.synth.omstream import write_openmetrics
from servewatch_testkit.synth.scaled_fleet import FleetShape, Identity, series_batches, write_fleet

REPO = Path(__file__).resolve().parents[1]

SMALL = FleetShape(hosts=4, mig_hosts=1, models=2, pods_per_model=1, engines_per_pod=2, steps=6)


def _all(shape):
    return [s for batch in series_batches(shape) for s in batch]


def test_sized_derives_the_issue_sizes():
    shape = FleetShape.sized(4096)
    assert shape.summary() == {
        "gpus": 4096,
        "hosts": 512,
        "mig_hosts": 64,
        "mig_instances": 1024,
        "models": 8,
        "pods": 256,
        "engines": 512,
        "engines_per_pod": 2,
        "gpus_per_engine": 4,
        "steps": 120,
        "step_s": 30,
    }
    assert FleetShape.sized(512).engines == 64


def test_impossible_shapes_say_why():
    with pytest.raises(ValueError, match="multiple of 8 models"):
        FleetShape.sized(512, engines=60)
    with pytest.raises(ValueError, match="need one full-GPU host each"):
        FleetShape(hosts=4, mig_hosts=2, models=3, pods_per_model=1)
    with pytest.raises(ValueError, match="do not fit"):
        FleetShape(hosts=4, mig_hosts=0, models=1, pods_per_model=1, engines_per_pod=4, gpus_per_engine=4)


def test_every_gpu_instance_and_engine_is_there_once():
    series = _all(SMALL)
    fb = [s for s in series if s.name == "DCGM_FI_DEV_FB_USED"]
    ids = {(s.label("UUID"), s.label("GPU_I_ID")) for s in fb}
    assert len(fb) == len(ids) == 3 * 8 + 1 * 8 * 2  # 3 full-GPU hosts, 1 host of two MIG instances per GPU
    running = [s for s in series if s.name == "vllm:num_requests_running"]
    engines = {
        (s.label("namespace"), s.label("pod"), s.label("model_name"), s.label("engine")) for s in running
    }
    assert len(running) == len(engines) == SMALL.engines == 4


def test_serving_gpus_carry_their_vllm_pod():
    series = _all(SMALL)
    pods = {s.label("pod") for s in series if s.name == "vllm:num_requests_running"}
    holders = {s.label("exported_pod") for s in series if s.name == "DCGM_FI_DEV_FB_USED"}
    assert pods <= holders
    # each pod's 2 engines x 4 GPUs = the whole host
    for pod in pods:
        gpus = {
            s.label("UUID")
            for s in series
            if s.name == "DCGM_FI_DEV_FB_USED" and s.label("exported_pod") == pod
        }
        assert len(gpus) == 8


def test_engines_export_the_default_histograms_and_differ():
    series = _all(SMALL)
    names = {s.family for s in series if s.kind == "histogram"}
    assert {
        "vllm:request_params_n",
        "vllm:request_prefill_kv_computed_tokens",
        "vllm:time_to_first_token_seconds",
    } <= names
    counts = [s.values for s in series if s.name == "vllm:e2e_request_latency_seconds_count"]
    assert len(set(counts)) == len(counts)  # each engine has its own traffic


def test_stream_writes_the_same_lines_as_to_openmetrics(tmp_path):
    stats = write_fleet(SMALL, tmp_path / "fleet.om", 1.7e9)
    text = (tmp_path / "fleet.om").read_text()
    reference = to_openmetrics(_all(SMALL), 1.7e9, SMALL.step)
    assert sorted(text.splitlines()) == sorted(reference.splitlines())
    assert text.endswith("# EOF\n")
    assert stats.samples == sum(1 for line in text.splitlines() if not line.startswith("#"))
    assert list(tmp_path.iterdir()) == [tmp_path / "fleet.om"]  # spools removed


def test_same_shape_same_bytes(tmp_path):
    write_fleet(SMALL, tmp_path / "a.om", 1.7e9)
    write_fleet(SMALL, tmp_path / "b.om", 1.7e9)
    assert (tmp_path / "a.om").read_bytes() == (tmp_path / "b.om").read_bytes()


def test_stream_rejects_a_duplicate_and_leaves_nothing(tmp_path):
    s = Series("x", {"a": "1"}, [1.0])
    with pytest.raises(ValueError, match="duplicate"):
        write_openmetrics([[s], [s]], tmp_path / "x.om", 0, 30, 1)
    assert list(tmp_path.iterdir()) == []


# -- identity: roles, tracks, a gateway (scaled_identity) -----------------------------------------
PD = Identity(role_label="llm_d_ai_role", track_label="track", client="llm-d-epp")
PAIRED = FleetShape(hosts=8, mig_hosts=0, models=2, pods_per_model=4, engines_per_pod=2, steps=6, identity=PD)


def _pods(series) -> dict[str, dict[str, str]]:
    """Each vLLM pod's role and track, from its liveness gauge."""
    return {
        s.label("pod"): {
            "role": s.label("llm_d_ai_role"),
            "track": s.label("track"),
            "model": s.label("model_name"),
        }
        for s in series
        if s.name == "vllm:num_requests_running"
    }


def test_every_series_of_a_pod_carries_its_role_and_track_and_each_model_has_a_canary_pair():
    series = _all(PAIRED)
    pods = _pods(series)
    for s in series:
        if s.label("pod") in pods:  # up, the engines' and the NIXL connector's series alike
            assert (s.label("llm_d_ai_role"), s.label("track")) == (
                pods[s.label("pod")]["role"],
                pods[s.label("pod")]["track"],
            ), s.name
    for model in {p["model"] for p in pods.values()}:
        mine = [p for p in pods.values() if p["model"] == model]
        pairs = {(p["role"], p["track"]) for p in mine}
        assert pairs == {(r, t) for r in ("prefill", "decode") for t in ("stable", "canary")}
        assert sum(p["track"] == "canary" for p in mine) == 2  # one pair of the model's two


def test_prefill_legs_finish_with_length_and_only_decode_pulls_kv_caches():
    series = _all(PAIRED)
    pods = _pods(series)
    finished = {}
    for s in series:
        if s.name == "vllm:request_success_total" and s.values[-1] > s.values[0]:
            finished.setdefault(pods[s.label("pod")]["role"], set()).add(s.label("finished_reason"))
    assert finished["prefill"] == {"length"}
    assert "stop" in finished["decode"]
    pulled = {
        pods[s.label("pod")]["role"]: s.values[-1] - s.values[0]
        for s in series
        if s.name == "vllm:nixl_xfer_time_seconds_count"
    }
    assert pulled["prefill"] == 0 < pulled["decode"]


def test_the_gateway_counts_each_user_request_once_and_times_streaming_apart():
    series = _all(PAIRED)
    pods = _pods(series)
    decode_finished = sum(
        s.values[-1] - s.values[0]
        for s in series
        if s.name == "vllm:request_success_total" and pods[s.label("pod")]["role"] == "decode"
    )
    epp = catalog.load().clients["llm-d-epp"]
    counted = sum(s.values[-1] - s.values[0] for s in series if s.name == epp.metric("requests"))
    assert counted == decode_finished > 0
    ttft = {s.label("streaming") for s in series if s.name == f"{epp.metric('ttft')}_count"}
    assert ttft == {"true", "false"}
    assert {s.label("name") for s in series if s.name == epp.metric("pool_ready_pods")} == {
        f"{m}-pool" for m in ("deepseek-v3", "qwen3-235b-a22b")
    }


def test_an_identity_fleet_is_the_same_bytes_each_time_and_the_plain_one_unchanged(tmp_path):
    a, b = tmp_path / "a.om", tmp_path / "b.om"
    write_fleet(PAIRED, a, 1_700_000_000)
    write_fleet(PAIRED, b, 1_700_000_000)
    assert a.read_bytes() == b.read_bytes()
    plain = FleetShape(hosts=8, mig_hosts=0, models=2, pods_per_model=4, engines_per_pod=2, steps=6)
    assert not any(s.label("llm_d_ai_role") or s.label("track") for s in _all(plain))
    assert not any(s.name.startswith(("vllm:nixl_", "llm_d_epp_")) for s in _all(plain))


def test_the_identity_comes_from_a_teams_config_and_pairs_need_an_even_pod_count():
    model, _ = generate.build(REPO / "bench" / "mutation" / "specs", out=REPO)
    assert Identity.of(model.config) == PD
    assert Identity.of(generate.build(REPO / "specs", out=REPO)[0].config) == Identity()
    with pytest.raises(ValueError, match="even number of pods per model, not 3"):
        FleetShape(hosts=8, mig_hosts=0, models=2, pods_per_model=3, identity=PD)
    with pytest.raises(ValueError, match="no 'dynamo-frontend' gateway"):
        Identity(client="dynamo-frontend")
