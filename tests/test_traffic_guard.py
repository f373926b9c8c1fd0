"""The generated boundary tests of a `min_traffic` guard (plan/traffic_guard.py): written for any
tuning, passed by the rules as generated, and failed by each way the guard breaks: moved, made strict,
its dedup or its sum changed, a label dropped from its grouping, its window changed. The guard reads
the request rate its group records, so its dedup and window break in that record."""

from __future__ import annotations

import re

import pytest

from servewatch import generate, yamlio
from servewatch.render import yamlout

ALERT = "VLLMRequestErrorRateHigh"

# the guard reads the request rate its group records before it (docs/scale.md); a guard breaks in
# its own text (threshold, comparison, grouping) or in that record's (dedup, window)
GUARD_RE = re.compile(r"(sum by \(([^)]*)\) \((\w+:\w+:\w+)\)) >= (\S+)")
RATE_RE = re.compile(r"sum by \(([^)]*)\) \(max by \(([^)]*)\) \(rate\(([^\[]*)\[(\w+)\]\)\)\)")


def _build(specs_with, tuning: str | None = None):
    edits = {"overrides.yaml": f"overrides:\n  alerts:\n    {ALERT}: {tuning}\n"} if tuning else {}
    _, files = generate.build(specs_with(edits))
    return files["rules/vllm.rules.yaml"], files["promtool/vllm.boundaries.test.yaml"]


def _guard_tests(tests: str) -> list[dict]:
    return [t for t in yamlio.load(tests)["tests"] if "min_traffic" in t["name"]]


def _broken(rules: str, break_) -> str:
    """The rules with the guard of ALERT, or the recorded rate it reads, rewritten by `break_`:
    ("guard" | "rate", how(match) -> new text)."""
    part, how = break_
    doc = yamlio.load(rules)
    rules_of = [r for g in doc["groups"] for r in g["rules"]]
    alert = next(r for r in rules_of if r.get("alert") == ALERT)
    guard = GUARD_RE.search(alert["expr"])
    assert guard, alert["expr"]
    if part == "guard":
        rule, match = alert, guard
    else:
        rule = next(r for r in rules_of if r.get("record") == guard.group(3))
        match = RATE_RE.search(rule["expr"])
        assert match, rule["expr"]
    rule["expr"] = rule["expr"].replace(match.group(0), how(match))
    return yamlout.dump(doc)  # as the renderer writes rules: libyaml, not PyYAML's own Python


def _drop(labels: str, label: str) -> str:
    return ", ".join(x for x in labels.split(", ") if x != label)


BREAKS = {  # how the guard breaks -> where, and its text instead
    "moved a quarter up": ("guard", lambda m: f"{m.group(1)} >= {float(m.group(4)) * 1.25}"),
    "moved a quarter down": ("guard", lambda m: f"{m.group(1)} >= {float(m.group(4)) * 0.75}"),
    "made strict": ("guard", lambda m: f"{m.group(1)} > {m.group(4)}"),
    "a model's reasons not added up": ("guard", lambda m: m.group(0).replace("sum by", "max by", 1)),
    "namespace dropped": (
        "guard",
        lambda m: m.group(0).replace(m.group(2), _drop(m.group(2), "namespace"), 1),
    ),
    "model_name dropped": (
        "guard",
        lambda m: m.group(0).replace(m.group(2), _drop(m.group(2), "model_name"), 1),
    ),
    "a duplicate scrape counted twice": ("rate", lambda m: m.group(0).replace("(max by", "(sum by")),
    "a model's engines not added up": ("rate", lambda m: m.group(0).replace("sum by", "max by", 1)),
    "pod dropped from the dedup": (
        "rate",
        lambda m: m.group(0).replace(m.group(2), _drop(m.group(2), "pod")),
    ),
    "engine dropped from the dedup": (
        "rate",
        lambda m: m.group(0).replace(m.group(2), _drop(m.group(2), "engine")),
    ),
    "finished_reason dropped from the dedup": (
        "rate",
        lambda m: m.group(0).replace(m.group(2), _drop(m.group(2), "finished_reason")),
    ),
    "window doubled": ("rate", lambda m: m.group(0).replace(f"[{m.group(4)}]", "[10m]")),
}


@pytest.fixture(scope="module")
def default_guard(specs_with):
    return _build(specs_with)


def test_the_guard_has_its_tests(default_guard):
    _, tests = default_guard
    names = {t["name"] for t in _guard_tests(tests)}
    assert names == {
        f"boundary: {ALERT} fires `for` after its traffic passes min_traffic",
        f"boundary: {ALERT} adds up a model's engines against min_traffic, and nothing else",
        f"boundary: {ALERT} traffic of exactly min_traffic is enough",
    }


def test_a_model_past_the_guard_fires_and_one_short_of_it_does_not(default_guard):
    """min_traffic 0.1/s: the past model finishes 0.11/s, the short ones 0.09/s, each of a pair 0.055/s."""
    _, tests = default_guard
    who = next(t for t in _guard_tests(tests) if "adds up" in t["name"])
    per_sample = {s["series"]: float(s["values"].split("+")[1].split("x")[0]) for s in who["input_series"]}
    fired = {a["exp_labels"]["model_name"] for a in who["alert_rule_test"][0]["exp_alerts"]}
    assert fired == {"model_name-a", "model_name-sum-pod", "model_name-sum-engine"}
    # both halves of a finished request (error and the rest) at 30 s a sample
    past = [
        v
        for s, v in per_sample.items()
        if 'namespace="namespace-a", pod="pod-a", model_name="model_name-a"' in s
    ]
    assert sum(past) / 30 == pytest.approx(0.11)


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("why", BREAKS)
def test_a_broken_guard_fails_the_generated_tests(default_guard, vllm_boundaries, tmp_path, why):
    rules, tests = default_guard  # as generated they pass: `servewatch test` in `make test`
    result = vllm_boundaries(tmp_path, _broken(rules, BREAKS[why]), tests)
    assert result.returncode == 1, why
    assert "min_traffic" in result.stdout + result.stderr, why


TUNINGS = {
    "a higher guard and a shorter for": "{min_traffic: 2, for: 3m}",
    "a lower guard": "{min_traffic: 0.03}",
    "a threshold above one half": "{threshold: 0.6, min_traffic: 0.5}",
}


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("tuning", TUNINGS)
def test_tuned_guard_tests_pass_and_still_catch_a_moved_guard(specs_with, vllm_boundaries, tmp_path, tuning):
    rules, tests = _build(specs_with, TUNINGS[tuning])
    assert len(_guard_tests(tests)) >= 2  # timing and who; exact where the rates come out exact
    result = vllm_boundaries(tmp_path, rules, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    for why in ("moved a quarter up", "moved a quarter down", "window doubled"):
        assert vllm_boundaries(tmp_path, _broken(rules, BREAKS[why]), tests).returncode == 1, why


def test_no_guard_no_guard_tests(specs_with):
    _, tests = _build(specs_with, "{min_traffic: 0}")
    assert _guard_tests(tests) == []


def test_a_ratio_whose_matchers_cannot_be_split_gets_no_guard_or_exact_cases(specs_with):
    # found by `make fuzz`: an error ratio that selects every series of a job (no label value servewatch
    # can give half the counters) made the exact-threshold case write no series at all: a traceback
    specs = specs_with({"signals.yaml": [("'finished_reason=\"error\"'", "'job=~\".*\"'")]})
    _, files = generate.build(specs)
    assert 'job=~".*"' in files["rules/vllm.rules.yaml"]
    names = [t["name"] for t in yamlio.load(files["promtool/vllm.boundaries.test.yaml"])["tests"]]
    assert not [n for n in names if ALERT in n and ("min_traffic" in n or "exactly at" in n)], names
