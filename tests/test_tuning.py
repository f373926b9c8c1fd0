"""Tuning must not break the build (DESIGN.md invariant 12): the default scenarios are written against
each alert's resolved threshold and `for` (servewatch/scenarios.py), so they prove the rules for any
tuning in overrides.yaml; where a scenario cannot follow, `servewatch test` names it, its file:line,
the override and what to do, in one paragraph."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from servewatch import scenarios, verify, writer
from servewatch.errors import SpecErrors
from servewatch.model import Model
from servewatch.plan.rule_tests import boundary_tests
from servewatch.plan.scenario_tests import scenario_tests
from servewatch.render import rules, unit_tests, yamlout
from servewatch.spec.loader import load
from servewatch.validation import validate

REPO = Path(__file__).resolve().parents[1]
MODEL = Model(load(REPO / "specs"))


def _tunings(alert) -> list[dict]:
    """A lower threshold with a short `for`, and a higher one with a long `for`: for a ratio the new
    threshold stays inside (0, 1), for anything else it is halved or quadrupled."""
    t = alert.spec.threshold
    if t is None:
        return [{"for": "2m"}, {"for": "20m"}]
    ratio = scenarios.bounds_of(MODEL, alert).ratio
    low, high = (round(t * 0.6, 6), round(t + (1 - t) * 0.8, 6)) if ratio else (t / 2, t * 4)
    return [{"threshold": low, "for": "2m"}, {"threshold": high, "for": "20m"}]


# SLO burn-rate alerts are tuned under slos: (test_slo_spec.py); overriding one is a spec error
CASES = [(a.alert, tuning) for a in MODEL.alerts() if a.family != "slo" for tuning in _tunings(a)]


@pytest.fixture
def specs_copy(specs_with) -> Path:
    """A private copy of the default specs, to edit."""
    return specs_with()


def _write_overrides(specs: Path, alerts: dict) -> None:
    (specs / "overrides.yaml").write_text(yaml.safe_dump({"overrides": {"alerts": alerts}}))


@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "alert, tuning", CASES, ids=[f"{a}-{'-'.join(map(str, t.values()))}" for a, t in CASES]
)
def test_every_alert_tuned_keeps_the_default_scenarios_green(specs_copy, tmp_path, alert, tuning, prove):
    _write_overrides(specs_copy, {alert: tuning})
    model = Model(load(specs_copy))
    tests, unadaptable = scenario_tests(model)
    assert not unadaptable, unadaptable
    tuned = model.alert(alert)
    assert tuned.for_ == tuning["for"] and tuned.spec.threshold == tuning.get(
        "threshold", tuned.spec.threshold
    )
    # the scenarios of that alert really moved with it: some check runs at a time that depends on `for`
    ats = [c["eval_time"] for f, t in tests for c in t["alert_rule_test"] if c["alertname"] == alert]
    default_ats = [
        c["eval_time"]
        for f, t in scenario_tests(MODEL)[0]
        for c in t["alert_rule_test"]
        if c["alertname"] == alert
    ]
    assert ats != default_ats
    # promtool runs the scenarios and the generated boundary tests that check the tuned alert (in
    # their family's test file as written); the others cannot have changed, so none is written
    family = tuned.family
    path = unit_tests.test_path(family)
    mine = [
        t
        for f, t in [*tests, *boundary_tests(model)]
        if f == family and any(c["alertname"] == alert for c in t.get("alert_rule_test", []))
    ]
    assert mine
    suite = unit_tests.test_file(model, family, path, mine)
    files = {rules.plain_path(family): rules.render(model)[rules.plain_path(family)]}
    files[path] = yamlout.dump(suite)  # as the renderer writes it (libyaml, not PyYAML's own Python)
    writer.write(tmp_path / "out", files)
    res = prove(tmp_path / "out" / path)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.tools("promtool")
def test_the_readme_example_tuning_stays_green(specs_copy, tmp_path, servewatch):
    """The first thing a team does, as a new user does it, through the command line."""
    _write_overrides(specs_copy, {"VLLMKVCacheUsageHigh": {"threshold": 0.9, "for": "2m"}})
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs_copy, "--out", out).returncode == 0
    res = servewatch("test", "--specs", specs_copy, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FAILED" not in res.stdout


LITERAL = """
  - name: a literal full GPU
    alert: GPUFramebufferUsageHigh
    series:
      - {series: '[[fb_used]]{UUID="GPU-lit", gpu="0"}', values: '79000x20'}
      - {series: '[[fb_free]]{UUID="GPU-lit", gpu="0"}', values: '1000x20'}
    expect:
      - at: 10m
        firing:
          - labels: {UUID: GPU-lit, gpu: "0"}
            value: 0.9875
"""


def _line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory, specs_with):
    """One `servewatch test` on specs with all three kinds of failure: a literal scenario an override
    invalidated, a scenario that cannot adapt to a tuning, and a wrong scenario no override explains."""
    from conftest import run_servewatch

    base = tmp_path_factory.mktemp("failing")
    specs = specs_with()
    gpu = specs / "scenarios" / "gpu.yaml"
    wrong = LITERAL.replace("a literal full GPU", "a wrong expectation").replace("GPU-lit", "GPU-wrong")
    wrong = wrong.replace("alert: GPUFramebufferUsageHigh", "alert: GPUFramebufferMetricsMissing")
    gpu.write_text(gpu.read_text() + LITERAL + wrong.replace("value: 0.9875\n", ""))
    _write_overrides(
        specs,
        {
            "GPUFramebufferUsageHigh": {"threshold": 0.99, "for": "15m"},
            "VLLMKVCacheUsageHigh": {"threshold": 1.0},
        },
    )
    out = base / "out"
    assert run_servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    res = run_servewatch("test", "--specs", specs, "--out", out, "--extra", base / "none")
    return specs, out, res


def _paragraph(res, name: str) -> str:
    found = [line for line in res.stdout.splitlines() if line.startswith(f"servewatch: scenario {name!r}")]
    assert len(found) == 1, res.stdout
    return found[0]


@pytest.mark.tools("promtool")
def test_a_literal_scenario_invalidated_by_an_override_is_named_in_one_paragraph(failing_run):
    specs, _, res = failing_run
    assert res.returncode == 1
    paragraph = _paragraph(res, "a literal full GPU")
    scenarios_file = specs / "scenarios" / "gpu.yaml"
    line = _line_of(scenarios_file, "  - name: a literal full GPU")
    assert (
        f"scenario 'a literal full GPU' ({scenarios_file}:{line}) no longer holds after tuning" in paragraph
    )
    assert (
        f"{specs / 'overrides.yaml'}:3: GPUFramebufferUsageHigh "
        "threshold 0.99 (specs: 0.95), for 15m (specs: 5m)" in paragraph
    )
    assert "literal numbers" in paragraph
    assert '{scenarios: {"a literal full GPU": {enabled: false}}}' in paragraph
    assert "'for + 2m'" in paragraph  # how to write it instead
    # instead of promtool's dump of that test: no expected/got listing of it is left
    assert "GPU-lit" not in res.stdout.replace(paragraph, "")
    # while the default scenarios of the same alert followed the tuning
    assert "full GPU next to an empty one" not in res.stdout


@pytest.mark.tools("promtool")
def test_a_failure_no_override_explains_keeps_promtools_output(failing_run):
    _, _, res = failing_run
    assert "name: a wrong expectation," in res.stdout and "got:" in res.stdout
    assert "servewatch: scenario 'a wrong expectation'" not in res.stdout


@pytest.mark.tools("promtool")
def test_a_scenario_that_cannot_adapt_is_reported_not_run(failing_run):
    specs, out, res = failing_run
    name = "one data-parallel engine full while its sibling is idle"
    line = _line_of(specs / "scenarios" / "vllm.yaml", f"  - name: {name}")
    override = _line_of(specs / "overrides.yaml", "    VLLMKVCacheUsageHigh:")
    assert _paragraph(res, name) == (
        f"servewatch: scenario {name!r} ({specs / 'scenarios' / 'vllm.yaml'}:{line}) cannot adapt to the "
        "alerts as tuned: series[0].values: no value lies above the threshold (a ratio is at most 1); the "
        f"tuning: {specs / 'overrides.yaml'}:{override}: VLLMKVCacheUsageHigh threshold 1 (specs: 0.95). "
        f'Change the tuning, or disable it (overrides: {{scenarios: {{"{name}": {{enabled: false}}}}}}) '
        "and prove your tuning with a scenario of your own."
    )
    assert name not in (out / "promtool" / "vllm.test.yaml").read_text()  # skipped, not run


@pytest.mark.parametrize(
    "old, new, field, message",
    [
        (
            "values: '${used}x${span}'}",
            "values: '${usd}x${span}'}",
            "scenarios[0].series[0].values",
            "unknown name 'usd' in 'usd'; known here:",
        ),
        ("at: 'for - eval_interval'", "at: 'for -'", "scenarios[0].expect[0].at", "'for -' ends too early"),
        (
            "at: 'for - eval_interval'",
            "at: 'eval_interval - for'",
            "scenarios[0].expect[0].at",
            "before the scenario starts",
        ),
        (
            "let: {used: '80000 * above'",
            "let: {above: '80000 * above'",
            "scenarios[0].let.above",
            "would hide the built-in",
        ),
        (
            "at: 'for - eval_interval'",
            "at: 'for + 2m!'",
            "scenarios[0].expect[0].at",
            "is neither a duration",
        ),
    ],
    ids=["unknown-name", "syntax", "negative-at", "shadowed-name", "bad-alphabet"],
)
def test_expression_mistakes_name_file_line_and_field(specs_copy, old, new, field, message):
    path = specs_copy / "scenarios" / "gpu.yaml"
    text = path.read_text()
    assert text.count(old) >= 1, old
    line = text[: text.index(old)].count("\n") + 1
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecErrors) as err:
        validate(load(specs_copy))
    got = [str(e) for e in err.value.errors]
    assert any(g.startswith(f"{path.as_posix()}:{line}: {field}: ") and message in g for g in got), got


# -- the expression language ---------------------------------------------------------------------
NAMES = {"for": 300.0, "threshold": 0.95, "above": 0.975, "interval": 60.0, "span": 20.0, "none": None}


@pytest.mark.parametrize(
    "text, value",
    [
        ("for + 2m", 420),
        ("1m30s * 2", 180),
        ("-(3 + 4) * 2", -14),
        ("max(1, 2.5, 2)", 2.5),
        ("ceil(span / 3)", 7),
        ("1e-3 * 2", 0.002),
        ("80000 * above", 78000),
        ("for / interval - 2", 3),
    ],
)
def test_expressions_compute(text, value):
    assert scenarios.evaluate(text, NAMES) == pytest.approx(value)


def test_substitution_writes_numbers_promtool_reads_back_exactly():
    assert scenarios.substitute("${80000 * above}x${span}", NAMES) == "78000x20"
    third = scenarios.substitute("${1 / 3}", {})
    assert float(third) == 1 / 3 and third == repr(1 / 3)
    assert (
        scenarios.expand(scenarios.substitute("(${80000 * above} stale)*${2}", NAMES))
        == "78000 stale 78000 stale"
    )


def test_a_name_without_a_value_cannot_adapt_and_a_wrong_name_is_a_mistake():
    with pytest.raises(scenarios.Unadaptable):
        scenarios.evaluate("none + 1", NAMES)
    with pytest.raises(scenarios.ExpressionError, match="unknown name 'nope'"):
        scenarios.evaluate("nope + 1", NAMES)
    with pytest.raises(scenarios.Unadaptable, match="before the scenario starts"):
        scenarios.at_seconds("for - 10m", NAMES)


def test_names_follow_the_resolved_alert():
    """above/below sit on the right side of any threshold; histogram buckets come from the catalog."""
    for alert in MODEL.alerts():
        if alert.spec.threshold is None:
            continue
        names = scenarios.alert_names(MODEL, alert, 60.0)
        t = names["threshold"]
        assert names["below"] < t < names["just_above"] and names["just_below"] < t < names["above"], (
            alert.alert
        )
    ttft = scenarios.alert_names(MODEL, MODEL.alert("VLLMTimeToFirstTokenP95High"), 60.0)
    assert (ttft["above_lo"], ttft["above_hi"], ttft["below_lo"], ttft["below_hi"]) == (2.5, 5.0, 0.75, 1.0)
    assert ttft["above"] == pytest.approx(2.5 + 0.95 * 2.5)


def test_every_default_scenario_of_a_threshold_alert_is_relative():
    """A literal number in a scenario of a tunable alert would break on the first override."""
    literal = []
    for scenario in MODEL.spec.scenarios:
        rule = MODEL.alert(scenario.alert)  # None: an alert switched off by default (role, track)
        if rule is None or rule.spec.threshold is None:
            continue
        if not verify._is_relative(scenario):
            literal.append(scenario.name)
    assert literal == [], literal
    assert re.search(r"\$\{", (REPO / "specs" / "scenarios" / "gpu.yaml").read_text())


def test_expectations_the_settings_put_at_one_moment_must_agree(specs_copy):
    """promtool passes a test whose two checks at one eval_time contradict each other (one silent, one
    firing): with startup_grace gone, the drain scenario's "silent at back + for" and "fires at back +
    startup_grace + for" coincide, and servewatch must say so instead of writing that test."""
    alerts = specs_copy / "alerts" / "vllm.yaml"
    alerts.write_text(alerts.read_text().replace(", startup_grace: 45m}", "}", 1))
    path = specs_copy / "scenarios" / "vllm.yaml"
    line = _line_of(path, "      - at: 'back + startup_grace + for'")
    with pytest.raises(SpecErrors) as err:
        validate(load(specs_copy))
    got = [str(e) for e in err.value.errors]
    assert any(
        g.startswith(f"{path.as_posix()}:{line}: ")
        and "expect[0] and expect[2] both check VLLMMetricsAbsent at 25m" in g
        for g in got
    ), got


def test_a_switched_off_scenario_is_not_checked(specs_copy):
    """The way out a user is told to take for a scenario that cannot adapt: switch it off."""
    alerts = specs_copy / "alerts" / "vllm.yaml"
    alerts.write_text(alerts.read_text().replace(", startup_grace: 45m}", "}", 1))
    off = [
        "a new pod loading a large MoE model is not down",
        "a pod back on its node after an eviction loads its weights again",
    ]
    (specs_copy / "overrides.yaml").write_text(
        yaml.safe_dump({"overrides": {"scenarios": {name: {"enabled": False} for name in off}}})
    )
    model = validate(load(specs_copy)).model  # no SpecErrors: the two are not resolved
    tests, unadaptable = scenario_tests(model)
    written = {test["name"] for _, test in tests}
    assert not set(off) & written and unadaptable == []
    assert "vllm target down" in written  # the other scenarios of the alert still are
