"""The benchmark fleet: its shape, its labels, and the streaming OpenMetrics writer."""

import pytest

from servewatch_testkit.synth import Series, to_openmetrics
from servewatch_testkit.synth.omstream import write_openmetrics
from servewatch_testkit.synth.scaled_fleet import FleetShape, series_batches, write_fleet

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
