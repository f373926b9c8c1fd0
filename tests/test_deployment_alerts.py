"""Rules where config.role and config.track are set: which role each signal reads, the alerts that
exist only then (deferred KV transfers on decode, canary against stable), and the generated promtool
tests of the whole vLLM family, run by a real promtool on that configuration."""

from __future__ import annotations

import re

import pytest
import yaml

from servewatch import generate, writer, yamlio
from servewatch.model import Model
from servewatch.plan.rule_tests import boundary_tests
from servewatch.plan.scenario_tests import scenario_tests
from servewatch.promql import labels
from servewatch.render import rules, unit_tests
from servewatch.render.churn_tests import churn_tests
from servewatch.spec.loader import load
from servewatch.spec.deployment import COUNTING_ROLES, ROLES
from test_rule_tests import assert_exact_cases_pin_the_comparison

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
CANARY_ALERTS = [alert for alert, needs in NEW_ALERTS.items() if needs == "track"]


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
    """Tokens per model count on the roles the SLOs count on; the finished-requests record keeps every
    role apart (the per-role error ratios read it), so the SLO's valid events narrow it to them."""
    model, files = configured
    for name in ("model_prompt_tokens_rate", "model_generation_tokens_rate"):
        assert set(model.spec.signals[name].roles) == set(COUNTING_ROLES), name
    assert not model.spec.signals["model_requests_rate"].roles
    slo_rules = files["rules/slo.rules.yaml"]
    counting = model.config.role.matcher(COUNTING_ROLES)
    own = {r["record"] for g in yaml.safe_load(slo_rules)["groups"] for r in g["rules"] if "record" in r}
    reads = [
        (name, matchers)
        for g in yaml.safe_load(slo_rules)["groups"]
        for r in g["rules"]
        for name, matchers in re.findall(r"((?:model|engine):vllm_\w+:\w+|vllm:\w+)(\{[^}]*\})?", r["expr"])
        if name not in own
    ]
    assert {name for name, _ in reads} >= {
        "model:vllm_request_success:rate5m",  # the availability SLI's events
        "model:vllm_time_to_first_token_seconds_bucket:rate5m",  # the TTFT SLI's events
        "engine:vllm_generation_tokens:rate5m",  # goodput's tokens
    }
    recorded_roles = {sig.record: set(sig.roles) for sig in model.spec.signals.values() if sig.record}
    for name, matchers in reads:  # every vLLM series or record the SLOs read: its counting roles only
        if recorded_roles.get(name) != set(COUNTING_ROLES):  # not recorded of those roles alone
            assert counting in matchers, name


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


@pytest.mark.tools("promtool")
def test_a_scenario_about_a_role_is_written_only_where_a_role_is_configured(
    specs_with, configured, tmp_path, prove
):
    """A decode canary's scenario names the decode role (`needs: [role]`): written beside a role,
    where it proves the canary guard counts decode traffic; with a track and no role its labels
    would name a dimension the rules lack, so it is not written and the family still passes."""
    needing = {s.name for s in configured[0].spec.scenarios if "role" in s.needs}
    assert needing

    def written(model) -> set[str]:
        return {test["name"] for _, test in scenario_tests(model)[0]}

    assert needing <= written(configured[0])
    track_only = generate.build(specs_with({"config.yaml": CONFIG[1:]}))
    assert track_only[0].config.role is None and not needing & written(track_only[0])
    writer.write(tmp_path, {k: v for k, v in track_only[1].items() if k.startswith(("rules/", "promtool/"))})
    res = prove(tmp_path / "promtool" / "vllm.test.yaml")
    assert res.returncode == 0, res.stdout[-3000:]


def _scaled(rules: str, record: str, factor: float) -> str:
    """The rules with `record`'s value times `factor`: its labels, its count unchanged."""
    doc = yaml.safe_load(rules)
    rule = next(r for g in doc["groups"] for r in g["rules"] if r.get("record") == record)
    rule["expr"] = f"({rule['expr']}) * {factor}"
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.tools("promtool")
def test_the_track_ratio_records_are_checked_by_value(configured, prove, tmp_path):
    """Each canary-over-stable record has its record test: every track's ratio to its own stable twin
    (per model and role, a duplicate scrape once, no stable twin or an idle one: nothing), passed by
    the rules and failed by a record a thousandth off."""
    model, files = configured
    records = [r for r in model.records() if r.signal and model.signal(r.signal).kind == "track_ratio"]
    assert records
    suite = yamlio.load(files["promtool/vllm.records.test.yaml"])
    suite["tests"] = [t for t in suite["tests"] if t["name"] in {f"record: {r.record}" for r in records}]
    assert len(suite["tests"]) == len(records)
    for test in suite["tests"]:
        checks = test["promql_expr_test"]
        assert len([c for c in checks if c["expr"].startswith("group without")]) >= 2, test["name"]
    rules = files["rules/vllm.rules.yaml"]
    for record in [None, *records]:
        out = tmp_path / (record.record.replace(":", "_") if record else "as-generated")
        written = _scaled(rules, record.record, 1.001) if record else rules
        tests = yaml.safe_dump(suite, sort_keys=False)
        writer.write(out, {"rules/vllm.rules.yaml": written, "promtool/vllm.records.test.yaml": tests})
        result = prove(out / "promtool" / "vllm.records.test.yaml")
        if record is None:
            assert result.returncode == 0, result.stdout[-3000:]
        else:
            assert result.returncode == 1 and f"{record.record}{{" in result.stdout, record.record


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


def test_a_canary_guard_has_a_case_exactly_at_min_traffic(configured):
    """A canary's traffic guard includes min_traffic itself (`>=`): a canary observing exactly that
    many a second, as Prometheus computes its rate, fires (plan/traffic_guard.py); `>` fails it."""
    _, files = configured
    bounds = files["promtool/vllm.boundaries.test.yaml"]
    for alert in CANARY_ALERTS:
        assert f"boundary: {alert} traffic of exactly min_traffic is enough" in bounds, alert


# Tunings of the canary comparisons a user may write in overrides.yaml: a threshold close to 1, one past
# the ratio the scenarios once hard-coded (10), and traffic guards far apart (0: none).
CANARY_TUNINGS = [
    {"threshold": 1.1, "min_traffic": 0.01},
    {"threshold": 12, "min_traffic": 2, "for": "5m"},
    {"threshold": 40, "min_traffic": 0.5, "for": "30m"},
    {"threshold": 2, "min_traffic": 0},
]


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("tuning", CANARY_TUNINGS, ids=lambda t: "-".join(map(str, t.values())))
def test_canary_proofs_follow_a_tuning(specs_with, tmp_path, prove, tuning):
    """A tuned canary comparison keeps its generated proofs green under promtool: the scenarios
    compare tracks at ratios and rates written against the resolved threshold and min_traffic, the
    boundary tests put a canary just past and just short of the threshold (firing exactly `for` after
    its first rate) and exactly at it (silent), and both alerts keep a firing and a silent proof."""
    overrides = yaml.safe_dump({"overrides": {"alerts": dict.fromkeys(CANARY_ALERTS, tuning)}})
    model = Model(load(specs_with({"config.yaml": CONFIG, "overrides.yaml": overrides})))
    for alert in CANARY_ALERTS:
        assert model.alert(alert).spec.threshold == tuning["threshold"]
    tests, unadaptable = scenario_tests(model)
    assert not unadaptable, unadaptable
    mine = [
        t
        for family, t in [*tests, *boundary_tests(model)]
        if family == "vllm" and any(c["alertname"] in CANARY_ALERTS for c in t.get("alert_rule_test", []))
    ]
    # and the churn tests, which continue each alert's first firing scenario
    churned = [t for _, t in churn_tests(model) if t["name"].split()[0] in CANARY_ALERTS]
    assert len(churned) == len(CANARY_ALERTS)
    for alert in CANARY_ALERTS:
        checks = [c for t in mine for c in t["alert_rule_test"] if c["alertname"] == alert]
        assert {bool(c["exp_alerts"]) for c in checks} == {True, False}, alert
        sides = {t["name"] for t in mine if t["name"].startswith(f"boundary: {alert} just ")}
        assert sides == {f"boundary: {alert} just {side} its threshold" for side in ("past", "short of")}
        guard = {
            t["name"] for t in mine if t["name"].startswith(f"boundary: {alert}") and "traffic" in t["name"]
        }
        # and the case exactly at the guard, where its rates come out exact
        exact = f"boundary: {alert} traffic of exactly min_traffic is enough"
        assert len(guard - {exact}) == (2 if tuning["min_traffic"] else 0), alert
    path = unit_tests.test_path("vllm")
    files = {
        rules.plain_path("vllm"): rules.render(model)[rules.plain_path("vllm")],
        path: yaml.safe_dump(unit_tests.test_file(model, "vllm", path, mine), sort_keys=False),
    }
    churn = unit_tests.test_path("vllm").replace(".test.yaml", ".churn.test.yaml")
    files[churn] = yaml.safe_dump(unit_tests.test_file(model, "vllm", churn, churned), sort_keys=False)
    writer.write(tmp_path / "out", files)
    res = prove(tmp_path / "out" / path, tmp_path / "out" / churn)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "tuning", [None, *CANARY_TUNINGS], ids=lambda t: "-".join(map(str, (t or {"": "specs"}).values()))
)
def test_a_canary_exactly_at_the_threshold_is_silent_and_fires_once_the_comparison_includes_it(
    configured, specs_with, vllm_boundaries, tmp_path, tuning
):
    """The boundary case with a canary's ratio to its stable twin exactly at the threshold (worked
    out to the bit, the canary past its traffic guard for the whole `for`) pins the comparison, as
    specified and tuned: the rules pass it, the same rules with `>=` fail it."""
    if tuning is None:
        _, files = configured
    else:
        overrides = yaml.safe_dump({"overrides": {"alerts": dict.fromkeys(CANARY_ALERTS, tuning)}})
        _, files = generate.build(specs_with({"config.yaml": CONFIG, "overrides.yaml": overrides}))
    rules = files["rules/vllm.rules.yaml"]
    suite = yaml.safe_load(files["promtool/vllm.boundaries.test.yaml"])
    suite["tests"] = [
        t for t in suite["tests"] if {c["alertname"] for c in t["alert_rule_test"]} & set(CANARY_ALERTS)
    ]
    names = {t["name"] for t in suite["tests"]}
    for alert in CANARY_ALERTS:
        assert f"boundary: {alert} exactly at its threshold" in names, alert
    tests = yaml.safe_dump(suite, sort_keys=False)
    assert_exact_cases_pin_the_comparison(vllm_boundaries, tmp_path, rules, tests, CANARY_ALERTS)


def _counts(values: str) -> bool:
    """Whether a series written in promtool's expanding notation ever changes (a counter that counts)."""
    return any(float(step) != 0 for step in re.findall(r"[+-]([0-9.eE+-]+)x", values))


def _silent_on_traffic(model, alerts) -> dict[str, bool]:
    """Scenario test name -> whether the thing it is silent about counts anything, for each test
    with no firing check on `alerts`: the canary's series (or the model's, without a track)."""
    stable = f'{TRACK_LABEL}="{model.config.track.stable}"'
    out = {}
    for _, test in scenario_tests(model)[0]:
        checks = test["alert_rule_test"]
        if any(c["exp_alerts"] for c in checks) or not {c["alertname"] for c in checks} & set(alerts):
            continue
        series = test["input_series"]
        named = [s for s in series if stable not in s["series"]] or series
        out[test["name"]] = any(_counts(s["values"]) for s in named)
    return out


def test_without_a_traffic_guard_no_scenario_claims_the_guard(specs_with):
    """A "too little traffic" scenario writes its traffic from min_traffic: with min_traffic 0 it is
    silent for want of data, a proof of nothing, and is not written. Found by its inputs: silent,
    counting at the default guard, counting nothing at 0 (an idle model, silent by design, counts
    nothing either way)."""
    configured = Model(load(specs_with({"config.yaml": CONFIG})))
    guarded = [a.alert for a in configured.alerts() if getattr(a.spec, "min_traffic", None)]
    assert set(CANARY_ALERTS) < set(guarded)
    overrides = yaml.safe_dump({"overrides": {"alerts": {a: {"min_traffic": 0} for a in guarded}}})
    unguarded = Model(load(specs_with({"config.yaml": CONFIG, "overrides.yaml": overrides})))
    before, after = _silent_on_traffic(configured, guarded), _silent_on_traffic(unguarded, guarded)
    claims = {name for name, counts in before.items() if counts and name in after and not after[name]}
    on_the_guard = {name for name, counts in before.items() if counts and name not in after}
    assert not claims, claims
    assert on_the_guard  # the default's guard scenarios, dropped; the others still prove silence
    assert any(after.values())
