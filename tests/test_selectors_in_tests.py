"""Issue 22.5: the generated tests follow config.selectors, and `check` refuses a selector they
cannot follow (DESIGN invariant 14: what would fail `servewatch test` for a config reason fails
`servewatch check`)."""

from __future__ import annotations

import pytest

from servewatch import tools
from servewatch.errors import SpecErrors
from servewatch.model import Model
from servewatch.render import rule_tests
from servewatch.spec import matchers
from servewatch.spec.loader import load
from servewatch.validation import validate

DOCUMENTED = 'namespace=~"llm-deepseek|llm-mixtral"'  # specs/config.yaml's kind of selector


def _with_selector(specs_with, selector: str):
    return specs_with({"config.yaml": [("    vllm: ''", f"    vllm: '{selector}'")]})


@pytest.mark.integration
@pytest.mark.tools("promtool")
def test_a_regex_selector_gets_scenarios_it_matches_and_promtool_passes(specs_with, tmp_path):
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
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    res = tools.run("promtool", "test", "rules", *(tmp_path / p for p in sorted(vllm_tests)))
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
