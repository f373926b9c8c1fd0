"""Rules where config.role and config.track are set: which role each signal reads, the alerts that
exist only then (deferred KV transfers on decode, canary against stable), and the generated promtool
tests of the whole vLLM family, run by a real promtool on that configuration."""

from __future__ import annotations

import re

import pytest
import yaml

from servewatch import generate, writer
from servewatch.promql import labels
from servewatch.spec.deployment import COUNTING_ROLES, ROLES

ROLE_LABEL, TRACK_LABEL = "llm_d_ai_role", "track"
CONFIG = [
    ("  role: null\n", f"  role: {{label: {ROLE_LABEL}, values: {{both: [both, prefill-decode]}}}}\n"),
    ("  track: null\n", f"  track: {{label: {TRACK_LABEL}, stable: stable}}\n"),
]
NEW_ALERTS = {
    "VLLMDecodeRequestsDeferredHigh": "role",
    "VLLMCanaryTimeToFirstTokenWorse": "track",
    "VLLMCanaryInterTokenLatencyWorse": "track",
}


@pytest.fixture(scope="module")
def configured(specs_with):
    return generate.build(specs_with({"config.yaml": CONFIG}))


def _record(model, signal: str) -> str:
    return next(r.expr for r in model.records() if r.signal == signal)


def test_each_signal_reads_the_roles_it_names(configured):
    model, _ = configured
    role = model.config.role
    for name, signal in model.spec.signals.items():
        if not any(r.signal == name for r in model.records()) or signal.kind == "track_ratio":
            continue
        expr = _record(model, name)
        if "vllm:" not in expr:  # reads a record of the same roles (SignalBuilder._readable_roles)
            continue
        if not signal.roles or set(signal.roles) == set(ROLES):
            assert f"{ROLE_LABEL}=" not in expr and f"{ROLE_LABEL}!" not in expr, name
        else:
            assert role.matcher(signal.roles) in expr, name
            read = {v for m in re.findall(ROLE_LABEL + r'=~?"([^"]*)"', expr) for v in m.split("|")}
            assert read == {v for r in signal.roles for v in role.values[r]}, name


def test_user_requests_count_where_the_slos_count_them(configured):
    """Requests and tokens per model count on the roles the SLOs count on, so the request panels,
    the error ratios' traffic and the SLO's valid events are one and the same count."""
    model, files = configured
    for name in ("model_requests_rate", "model_prompt_tokens_rate", "model_generation_tokens_rate"):
        assert set(model.spec.signals[name].roles) == set(COUNTING_ROLES), name
    slo_rules = files["rules/slo.rules.yaml"]
    assert model.config.role.matcher(COUNTING_ROLES) in slo_rules
    assert 'llm_d_ai_role="prefill"' not in slo_rules


def test_role_and_track_key_every_vllm_alert_on_a_signal(configured):
    """Each engine's and model's alert carries its role and track, so a slow canary or a full decode
    engine is named as such and never merges with the stable track or the prefill pool."""
    model, _ = configured
    records = labels.record_labels(model.records())
    keyed = [a for a in model.alerts() if a.family == "vllm" and a.spec.signal is not None]
    assert len(keyed) >= 9
    for alert in keyed:
        assert {ROLE_LABEL, TRACK_LABEL} <= labels.always(alert.expr, records), alert.alert


def test_the_deployment_alerts_exist_only_where_configured(default_model, configured):
    model, _ = configured
    for alert in NEW_ALERTS:
        assert default_model.alert(alert) is None
        assert model.alert(alert) is not None


def test_ttft_alerts_say_which_side_measured_them(default_model, configured):
    model, _ = configured
    side = model.alert("VLLMTimeToFirstTokenP95High").annotations["description"]
    assert f"$labels.{ROLE_LABEL}" in side and "not at the client" in side
    assert (
        "not at the client"
        not in default_model.alert("VLLMTimeToFirstTokenP95High").annotations["description"]
    )


@pytest.mark.tools("promtool")
def test_the_vllm_family_and_slos_pass_promtool_with_role_and_track(configured, tmp_path, prove):
    """Every generated vLLM and SLO test (scenarios, boundaries, records, burn rates) on the
    configured rules: the old scenarios with the default role and track added, and the new alerts'
    own, both sides of threshold, `for` and traffic guard."""
    _, files = configured
    suite = yaml.safe_load(files["promtool/vllm.test.yaml"])
    proven: dict[str, set] = {}
    for test in suite["tests"]:
        for check in test.get("alert_rule_test", []):
            proven.setdefault(check["alertname"], set()).add("firing" if check["exp_alerts"] else "silent")
    for alert in NEW_ALERTS:
        assert proven.get(alert) == {"firing", "silent"}, alert
    writer.write(tmp_path, {k: v for k, v in files.items() if k.startswith(("rules/", "promtool/"))})
    names = ("vllm.test.yaml", "vllm.boundaries.test.yaml", "vllm.records.test.yaml", "slo.test.yaml")
    res = prove(*(tmp_path / "promtool" / name for name in names))
    assert res.returncode == 0, res.stdout[-3000:]


def test_notifications_group_by_role_and_track(configured):
    """A canary's notification is its own: Alertmanager groups by the model identity with the role
    and track in it."""
    _, files = configured
    conf = yaml.safe_load(files["alertmanager/alertmanager.yaml"])
    assert conf["route"]["routes"][0]["group_by"] == [
        "alertname",
        ROLE_LABEL,
        TRACK_LABEL,
        "namespace",
        "model_name",
    ]
