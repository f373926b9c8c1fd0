"""The promtool tests servewatch derives from the rules (render/rule_tests.py): a boundary test for
every threshold alert and a check of every recording rule, generated for the resolved alerts, and
strong enough to fail when a rule is broken the way rules break."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servewatch import tools
from servewatch.render import rule_tests
from servewatch.render.synthetic import Synth, bucket_quantile, exact_total


def _generated(files: dict, kind: str) -> list[dict]:
    return [
        t
        for p, text in files.items()
        if p.endswith(f".{kind}.test.yaml")
        for t in yaml.safe_load(text)["tests"]
    ]


def test_every_threshold_alert_has_its_boundaries(default_build):
    model, files = default_build
    names = {t["name"] for t in _generated(files, "boundaries")}
    for alert in model.alerts():
        if alert.spec.threshold is None:
            continue
        assert f"boundary: {alert.alert} just past its threshold" in names, alert.alert
        assert f"boundary: {alert.alert} just short of its threshold" in names, alert.alert
    # an exact check where the value can be written exactly: a gauge, a used / (used + free)
    assert "boundary: GPUFramebufferUsageHigh exactly at its threshold" in names
    assert "boundary: VLLMKVCacheUsageHigh exactly at its threshold" in names


def test_just_past_fires_exactly_for_after_onset_and_not_before(default_build):
    model, files = default_build
    test = next(
        t
        for t in _generated(files, "boundaries")
        if t["name"] == "boundary: VLLMKVCacheUsageHigh just past its threshold"
    )
    before, at = test["alert_rule_test"]
    assert (before["eval_time"], before["exp_alerts"]) == ("270s", [])  # for 5m, one evaluation earlier
    assert at["eval_time"] == "5m" and len(at["exp_alerts"]) == 1


def test_every_recording_rule_is_checked(default_build):
    model, files = default_build
    names = {t["name"] for t in _generated(files, "records")}
    # the SLO records are asserted on a real Prometheus by tests/test_slo_integration.py
    slo = {r.record for g in model.groups if g.family == "slo" for r in g.records}
    for rule in (r for r in model.records() if r.record not in slo):
        static = "".join(f" {k}={v}" for k, v in rule.labels.items())
        assert f"record: {rule.record}{static}" in names, rule.record


def test_the_tests_follow_a_tuning(specs_with):
    from servewatch.model import Model
    from servewatch.spec.loader import load

    specs = specs_with(
        {"overrides.yaml": "overrides:\n  alerts:\n    VLLMKVCacheUsageHigh: {threshold: 0.8, for: 2m}\n"}
    )
    tests = rule_tests.boundary_tests(Model(load(specs)))
    past = next(t for f, t in tests if t["name"] == "boundary: VLLMKVCacheUsageHigh just past its threshold")
    assert float(past["input_series"][0]["values"].split("x")[0]) == pytest.approx(0.800001)
    assert [c["eval_time"] for c in past["alert_rule_test"]] == ["90s", "2m"]


# -- the generated tests fail on broken rules -----------------------------------------------------------
E2E_BUCKETS = "model:vllm_e2e_request_latency_seconds_bucket:rate5m)"
KV, WAITING = "(vllm:kv_cache_usage_perc)", "(vllm:num_requests_waiting)"
ENGINE = "by (namespace, pod, model_name, engine)"
# why it is broken -> (family, the generated text, what the broken rule says instead, the tests that see it)
MUTANTS = {
    "> became >=": ("gpu", ") > 0.95", ") >= 0.95", "boundaries"),
    "a shorter for": ("gpu", ") > 0.95\n    for: 5m", ") > 0.95\n    for: 4m", "boundaries"),
    "threshold moved": ("vllm", "kv_cache_usage:max > 0.95", "kv_cache_usage:max > 0.951", "boundaries"),
    "rate threshold moved": ("vllm", "preemptions:rate5m > 1", "preemptions:rate5m > 1.00001", "boundaries"),
    "max became sum: a thing scraped twice counts twice": (
        "vllm",
        f"max {ENGINE} {KV}",
        f"sum {ENGINE} {KV}",
        "records",
    ),
    "a label dropped from by": (
        "vllm",
        f"max {ENGINE} {WAITING}",
        f"max by (namespace, pod, model_name) {WAITING}",
        "records",
    ),
    "the p99 record computes p50": (
        "vllm",
        "histogram_quantile(0.99, " + E2E_BUCKETS,
        "histogram_quantile(0.5, " + E2E_BUCKETS,
        "records",
    ),
    "the zero guard removed": ("gpu", "(DCGM_FI_DEV_FB_FREE)) > 0)", "(DCGM_FI_DEV_FB_FREE)))", "records"),
}


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("why", MUTANTS)
def test_a_broken_rule_fails_the_generated_tests(repo, tmp_path, why):
    family, old, new, kind = MUTANTS[why]
    for folder in ("rules", "promtool"):
        (tmp_path / folder).mkdir()
    rules = (repo / "rules" / f"{family}.rules.yaml").read_text()
    assert rules.count(old) == 1, old
    tests = tmp_path / "promtool" / f"{family}.{kind}.test.yaml"
    tests.write_text((repo / "promtool" / f"{family}.{kind}.test.yaml").read_text())
    (tmp_path / "rules" / f"{family}.rules.yaml").write_text(rules)
    assert tools.run("promtool", "test", "rules", tests).returncode == 0  # the rules as generated pass
    (tmp_path / "rules" / f"{family}.rules.yaml").write_text(rules.replace(old, new))
    assert tools.run("promtool", "test", "rules", tests).returncode == 1, why


# -- the synthetic inputs ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0.03, 0.3, 1.7, 4.875, 9.0])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_observations_put_the_quantile_where_asked(default_model, value, q):
    synth = Synth(default_model, 30, 10)
    signal = default_model.signal("model_ttft")
    counts = synth.quantile_counts(signal, value, q)
    assert counts is not None
    cumulative, running = [], 0.0
    for bound in [*synth.buckets_of(signal.metric), float("inf")]:
        running += counts.get(bound, 0.0)
        cumulative.append((bound, running))
    assert bucket_quantile(q, cumulative) == pytest.approx(value, rel=1e-12)


def test_a_value_past_the_last_finite_bucket_cannot_be_made(default_model):
    synth = Synth(default_model, 30, 10)
    assert synth.quantile_counts(default_model.signal("model_ttft"), 5000.0, 0.95) is None


@pytest.mark.parametrize("ratio", [0.95, 0.9, 0.123, 0.5, 0.999])
def test_a_ratio_written_exactly_reads_back_exactly(ratio):
    total = exact_total(ratio)
    part = ratio * total
    assert part / (part + (total - part)) == ratio


def test_the_generated_files_are_checked_by_servewatch_test(repo):
    from servewatch import verify

    names = {p.name for p in verify.test_files(repo)}
    assert {"gpu.boundaries.test.yaml", "vllm.records.test.yaml"} <= names
    assert all(Path(repo / "promtool" / n).is_file() for n in names)
