"""Issue 22.5: the generated tests follow config.selectors, and `check` refuses a selector they
cannot follow (DESIGN invariant 14: what would fail `servewatch test` for a config reason fails
`servewatch check`)."""

from __future__ import annotations

import pytest

from servewatch.errors import SpecErrors
from servewatch import writer
from servewatch.model import Model
from servewatch.plan import rule_tests
from servewatch.plan.scenario_tests import scenario_tests
from servewatch.plan.conform import Conform, SelectorConflict
from servewatch.spec import matchers
from servewatch.spec.loader import load
from servewatch.validation import validate

DOCUMENTED = 'namespace=~"llm-deepseek|llm-mixtral"'  # specs/config.yaml's kind of selector


def _with_selector(specs_with, selector: str):
    return specs_with({"config.yaml": [("    vllm: ''", f"    vllm: '{selector}'")]})


@pytest.mark.integration
@pytest.mark.tools("promtool")
def test_a_regex_selector_gets_scenarios_it_matches_and_promtool_passes(specs_with, tmp_path, prove):
    from servewatch import generate

    specs = _with_selector(specs_with, DOCUMENTED)
    validate(load(specs))  # check: OK
    _, files = generate.build(specs)
    vllm_tests = {p: t for p, t in files.items() if p.startswith("promtool/vllm.")}
    engine_series = [
        line for text in vllm_tests.values() for line in text.splitlines() if "series: vllm:" in line
    ]
    assert engine_series and all(
        'namespace="llm-deepseek"' in s or 'namespace="llm-mixtral"' in s for s in engine_series
    )
    writer.write(tmp_path, files)
    res = prove(*(tmp_path / p for p in sorted(vllm_tests)))
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]


def test_a_selector_no_test_value_can_match_is_refused_by_check_naming_it(specs_with, line_of):
    specs = _with_selector(specs_with, 'namespace="prod", namespace=~"llm-.*"')
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    [msg] = [str(e) for e in info.value.errors]
    line = line_of(specs / "config.yaml", 'namespace="prod"')
    assert f"config.yaml:{line}: config.selectors.vllm:" in msg and "namespace" in msg, msg


def test_a_selector_with_one_model_name_for_many_test_models_is_refused(specs_with):
    specs = _with_selector(specs_with, 'model_name=~"only-one"')
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    assert any("config.selectors.vllm" in str(e) and "model_name" in str(e) for e in info.value.errors)


def test_target_values_are_picked_with_re2_as_prometheus_reads_them(specs_with):
    """`{,3}` is a repeat to Python's re but the literal text `{,3}` to RE2 (and Prometheus)."""
    specs = specs_with({"config.yaml": [("vllm: 'job=~\".*vllm.*\"'", "vllm: 'job=~\"vllm{,3}\"'")]})
    model = Model(load(specs))
    labels = rule_tests._matching_target(model, "vllm")
    assert labels is not None and matchers.accepts("=~", "vllm{,3}", labels["job"])
    assert labels["job"] != "vllm"


def test_a_selector_whose_values_take_the_targets_out_of_config_targets_is_refused(specs_with):
    """The `up` series of a scenario's exporter takes the job its GPU series were given; a job that
    config.targets.dcgm (job=~".*dcgm.*") does not match would make DCGMExporterDown fire, in the
    generated test as on Prometheus."""
    specs = specs_with({"config.yaml": [("    dcgm: ''", "    dcgm: 'job=~\"gpu|metrics\"'")]})
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    [msg] = [str(e) for e in info.value.errors]
    assert "config.selectors.dcgm:" in msg and "config.targets.dcgm" in msg, msg
    # a selector whose jobs the targets match is accepted
    validate(
        load(specs_with({"config.yaml": [("    dcgm: ''", "    dcgm: 'job=~\"dcgm-exporter|gmp-dcgm\"'")]}))
    )


PINNED_JOB = 'job="nvidia-dcgm-exporter"'  # the GPU operator's job; config.targets.dcgm matches it


def test_an_equality_selector_on_job_keeps_two_scrapes_of_one_gpu_apart_by_instance(specs_with):
    """The most common selector pins one job: the scenario of a GPU scraped by two jobs becomes two
    scrapes by that job, told apart by their instance, and still proves the deduplication."""
    specs = specs_with({"config.yaml": [("    dcgm: ''", f"    dcgm: '{PINNED_JOB}'")]})
    validate(load(specs))  # check: OK
    tests = {t["name"]: t for _, t in scenario_tests(Model(load(specs)))[0]}
    series = [s["series"] for s in tests["same GPU scraped by two jobs"]["input_series"]]
    assert len(set(series)) == 4 and all('job="nvidia-dcgm-exporter"' in s for s in series)
    assert len({s.split("instance=")[1] for s in series}) == 2


def test_a_pinned_job_that_would_make_two_series_one_is_refused(specs_with):
    two_jobs_one_instance = ('instance="nvidia-dcgm-exporter-d4x7q:metrics"', 'instance="10.0.0.4:9400"')
    specs = specs_with(
        {
            "config.yaml": [("    dcgm: ''", f"    dcgm: '{PINNED_JOB}'")],
            "scenarios/gpu.yaml": [two_jobs_one_instance],
        }
    )
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    [msg] = [str(e) for e in info.value.errors]
    assert "config.selectors.dcgm:" in msg and "job value" in msg and "'gmp-dcgm'" in msg, msg


def test_only_a_label_the_rules_aggregate_away_may_take_one_value_for_two(specs_with):
    """A label of the source's identity, or one the alert checked carries (a target's job), keeps
    its values apart; a label the alert aggregates away may share the selector's one value."""
    selectors = f"    dcgm: '{PINNED_JOB}, UUID=\"GPU-x\"'"
    model = Model(load(specs_with({"config.yaml": [("    dcgm: ''", selectors)]})))
    aggregated, carried = model.alert("GPUFramebufferUsageHigh"), model.alert("DCGMExporterDown")
    gpu = {"UUID": "GPU-x"}
    conform = Conform(model, [aggregated])
    assert (
        conform.labels("dcgm", {**gpu, "job": "a"})["job"]
        == conform.labels("dcgm", {**gpu, "job": "b"})["job"]
    )
    conform = Conform(model, [carried])
    conform.labels("dcgm", {**gpu, "job": "a"})
    with pytest.raises(SelectorConflict):
        conform.labels("dcgm", {**gpu, "job": "b"})
    conform = Conform(model, [aggregated])
    conform.labels("dcgm", {"UUID": "GPU-a"})
    with pytest.raises(SelectorConflict):
        conform.labels("dcgm", {"UUID": "GPU-b"})
    conform = Conform(model)  # a test that names no alerts shares nothing
    conform.labels("dcgm", {**gpu, "job": "a"})
    with pytest.raises(SelectorConflict):
        conform.labels("dcgm", {**gpu, "job": "b"})


def test_a_dcgm_series_the_catalog_does_not_know_follows_the_dcgm_selector_not_vllms(specs_with):
    """The renamed field of "an exporter upgrade renames every field" is the exporter's series: a
    vLLM selector leaves it, and the exporter's `up` beside it, as they are."""
    specs = _with_selector(specs_with, 'job=~"vllm|vllm-prod"')
    validate(load(specs))  # check: OK
    model = Model(load(specs))
    assert model.builder.source("DCGM_FI_DEV_GPU_TEMP_RENAMED") == "dcgm"
    tests = {t["name"]: t for _, t in scenario_tests(model)[0]}
    series = [s["series"] for s in tests["an exporter upgrade renames every field"]["input_series"]]
    assert all('job="dcgm-exporter"' in s for s in series), series
