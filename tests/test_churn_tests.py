"""render/churn_tests.py: the generated proof that context labels never restart an alert's `for`."""

import re

import pytest

from servewatch import writer
from servewatch.model import Model
from servewatch.render import churn_tests, rules
from servewatch.spec.loader import load


def test_series_notation_is_read_sample_by_sample():
    assert churn_tests._samples("1x2 _x2 stale 5+1x2 7") == [
        "1.0", "1.0", "1.0", "_", "_", "stale", "5.0", "6.0", "7.0", "7",
    ]  # fmt: skip
    assert churn_tests._compact(["1.0", "1.0", "1.0", "_", "_", "stale", "2.0"]) == "1.0x2 _x2 stale 2.0"


def test_a_series_holds_its_last_state():
    assert churn_tests._continued(["3.0", "5.0"], 4, counter=True) == ["3.0", "5.0", "7.0", "9.0"]
    assert churn_tests._continued(["3.0", "5.0"], 3, counter=False) == ["3.0", "5.0", "5.0"]
    assert churn_tests._continued(["1.0", "stale"], 3, counter=False) == ["1.0", "stale", "_"]


def test_each_label_state_is_one_series_ended_by_a_staleness_marker():
    phases = [(("pod",), "appears"), (("pod",), "changes"), (("pod",), "disappears")]
    got = churn_tests._split("m", {"a": "1"}, ["1"] * 8, fired=1, per_phase=2, phases=phases)
    assert got == [
        ('m{a="1"}', "1x1 stale _x3 1x1"),
        ('m{a="1", pod="pod-1"}', "_x2 1x1 stale _x3"),
        ('m{a="1", pod="pod-2"}', "_x4 1x1 stale _x1"),
    ]


def test_a_gpus_workload_churns_as_one_group_and_identity_never(default_model):
    labels = churn_tests.context_labels(
        default_model,
        [
            (
                "DCGM_FI_DEV_FB_USED",
                {"UUID": "GPU-a", "gpu": "0", "Hostname": "n", "pci_bus_id": "x", "extra": "1"},
            )
        ],
        [{"UUID": "GPU-a", "gpu": "0", "host": "n"}],
    )
    assert labels[0] == ("exported_namespace", "exported_pod", "exported_container")
    assert ("extra",) in labels and ("service",) in labels
    flat = {label for group in labels for label in group}
    assert not flat & {"UUID", "GPU_I_ID", "gpu", "Hostname", "host", "pci_bus_id", "job", "instance"}


def _expected_labels(test: dict) -> list[str]:
    return [s["labels"] for c in test["promql_expr_test"] for s in c["exp_samples"]]


def test_the_alerts_expected_carry_the_values_config_selectors_gave_the_series(specs_with):
    """The series of a churn test follow config.selectors (plan/conform.py); the alerts it expects
    must name the same values, or promtool fails a config `check` accepted (DESIGN invariant 14)."""
    selector = 'namespace=~"llm-deepseek|llm-mixtral"'
    specs = specs_with({"config.yaml": [("    vllm: ''", f"    vllm: '{selector}'")]})
    tests = [t for _, t in churn_tests.churn_tests(Model(load(specs)))]
    vllm = [t for t in tests if any(s["series"].startswith("vllm:") for s in t["input_series"])]
    assert vllm
    for test in vllm:
        given = {n for s in test["input_series"] for n in re.findall(r'namespace="([^"]*)"', s["series"])}
        expected = {n for text in _expected_labels(test) for n in re.findall(r'namespace="([^"]*)"', text)}
        assert expected and expected <= given <= {"llm-deepseek", "llm-mixtral"}, test["name"]


@pytest.mark.integration
@pytest.mark.tools("promtool")
def test_with_role_and_track_the_churn_tests_pass(specs_with, tmp_path, prove):
    """series_with_selectors gives a vLLM series the role and track of a stable aggregated engine;
    the alerts the churn tests expect carry them too, as the scenario tests' do."""
    specs = specs_with(
        {
            "config.yaml": [
                ("  role: null\n", "  role: {label: llm_d_ai_role}\n"),
                ("  track: null\n", "  track: {label: track, stable: stable}\n"),
            ]
        }
    )
    model = Model(load(specs))
    files = {**rules.render(model), **churn_tests.render(model)}
    writer.write(tmp_path, files)
    assert 'llm_d_ai_role="both"' in files["promtool/vllm.churn.test.yaml"]
    res = prove(tmp_path / "promtool/vllm.churn.test.yaml")
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
