"""Deployment identity (config.role, config.track): the config fields, the labels they add to the
vLLM identities, the role matcher signals read through, and groups that need them."""

from __future__ import annotations

import pytest

from servewatch import generate, writer
from servewatch.errors import SpecErrors
from servewatch.signals import LabelNames
from servewatch.spec.deployment import ROLES, RoleConfig
from servewatch.spec.schema import Config

ROLE = "  role: null\n"
TRACK = "  track: null\n"
LLM_D = "  role: {label: llm_d_ai_role}\n"
TRACKED = "  track: {label: track, stable: stable}\n"


def test_role_and_track_join_the_engine_and_model_identities_only():
    config = Config(role={"label": "llm_d_ai_role"}, track={"label": "track"}, cluster_label="cluster")
    labels = LabelNames(config)
    for level, configured in (("engine", config.identity.vllm), ("model", config.identity.model)):
        assert labels.identity(level) == ["cluster", "llm_d_ai_role", "track", *configured]
    assert "llm_d_ai_role" not in labels.identity("gpu") and "track" not in labels.identity("gpu")


def test_without_role_and_track_the_identities_are_the_configured_ones():
    config = Config()
    assert LabelNames(config).identity("engine") == list(config.identity.vllm)
    assert LabelNames(config).identity("model") == list(config.identity.model)
    assert LabelNames(config).role_matcher(("decode",)) == ""


def test_role_matcher_keeps_the_values_of_the_roles_read():
    role = RoleConfig(label="worker_type", values={"both": ["aggregated", "prefill.decode"]})
    assert role.values["prefill"] == ("prefill",)  # a role left out keeps its own name
    assert role.matcher(("prefill",)) == 'worker_type="prefill"'
    assert role.matcher(("decode", "both")) == 'worker_type=~"decode|aggregated|prefill\\\\.decode"'
    labels = LabelNames(Config(role={"label": "worker_type"}))
    assert labels.role_matcher(ROLES) == "", "reading every role needs no matcher"


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"role": {"label": "r", "values": {"prefil": ["p"]}}},
            "Input should be 'prefill', 'decode' or 'both'",
        ),
        ({"role": {"label": "r", "values": {"prefill": ["x"], "decode": ["x"]}}}, "named for both"),
        ({"role": {"label": "r", "values": {"decode": []}}}, "at least one label value"),
        ({"role": {"label": "same"}, "track": {"label": "same"}}, "a label each"),
        ({"track": {"label": "pod"}}, "leave it out of identity.vllm"),
        ({"track": {"label": "c"}, "cluster_label": "c"}, "is the cluster_label"),
        ({"track": {"label": "track", "stable": "a b"}}, "not a Kubernetes label value"),
    ],
)
def test_bad_deployment_config_is_refused(config, message):
    with pytest.raises(ValueError, match=message):
        Config(**config)


def test_an_unknown_role_is_an_error_at_its_line(specs_with, line_of):
    specs = specs_with(
        {"config.yaml": [(ROLE, "  role:\n    label: llm_d_ai_role\n    values: {prefil: [p]}\n")]}
    )
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "config.yaml", "    values: {prefil")
    assert f"config.yaml:{line}: config.role.values.prefil" in str(err.value)
    assert "did you mean 'prefill'" in str(err.value)


def test_an_unknown_role_of_a_signal_is_an_error_at_its_line(specs_with, line_of):
    old = "    record: engine:vllm_num_requests_running:max\n"
    specs = specs_with({"signals.yaml": [(old, old + "    roles: [decoder]\n")]})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "signals.yaml", "    roles: [decoder]")
    assert f"signals.yaml:{line}:" in str(err.value) and "did you mean 'decode'" in str(err.value)


def test_role_and_track_left_out_build_the_default_output(default_build, specs_with):
    """The single-deployment default: without role and track every generated file is byte for byte
    what null gives (the committed outputs: `generate --check` holds them)."""
    _, files = generate.build(specs_with({"config.yaml": [(ROLE, ""), (TRACK, "")]}))
    assert files == default_build[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [[(ROLE, LLM_D), (TRACK, TRACKED)], [(ROLE, LLM_D)], [(TRACK, TRACKED)]],
    ids=["role+track", "role", "track"],
)
def test_role_and_track_outputs_lint_clean(specs_with, servewatch, tmp_path, config):
    """Every panel and rule reads labels its series carry: the cost panels count GPUs (which carry
    only the pod they are mapped to) per deployment, with the track taken from the vLLM pods and
    both roles added up, and divide by the tokens of the engines that count requests."""
    specs = specs_with({"config.yaml": config})
    writer.write(tmp_path, generate.build(specs)[1])
    run = servewatch("lint", "--specs", specs, "--fail-on", "error", "rules", "dashboards", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 errors," in run.stderr


def test_a_track_ratio_outside_a_group_that_needs_track_is_refused(specs_with, line_of):
    specs = specs_with({"alerts/vllm.yaml": [("    needs: [track]\n", "")]})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    assert "give the group `needs: [track]`" in str(err.value)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("    of: model_ttft\n", "    of: model_requests_rate\n", "not a rate"),
        ("    of: model_ttft\n", "    of: model_tft\n", "did you mean 'model_ttft'"),
        (
            "    of: model_ttft\n    quantiles: [0.95]\n",
            "    of: model_ttft\n    quantiles: [0.9]\n",
            "one of",
        ),
    ],
)
def test_a_track_ratio_compares_a_signal_it_can(specs_with, old, new, message):
    with pytest.raises(SpecErrors, match=message):
        generate.build(specs_with({"signals.yaml": [(old, new)]}))
