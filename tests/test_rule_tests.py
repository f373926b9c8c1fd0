"""The promtool tests servewatch derives from the rules (plan/rule_tests.py): a boundary test for
every threshold alert and a check of every recording rule, generated for the resolved alerts, and
strong enough to fail when a rule is broken the way rules break."""

from __future__ import annotations

from pathlib import Path

import pytest

from servewatch import generate, scenarios, tools, verify, yamlio
from servewatch.plan import rule_tests
from servewatch.plan.synthetic import Synth, bucket_quantile, exact_total
from servewatch.render import yamlout


def _generated(files: dict, kind: str) -> list[dict]:
    return [
        t for p, text in files.items() if p.endswith(f".{kind}.test.yaml") for t in yamlio.load(text)["tests"]
    ]


def test_every_threshold_alert_has_its_boundaries(default_build):
    model, files = default_build
    names = {t["name"] for t in _generated(files, "boundaries")}
    for alert in model.alerts():
        if alert.spec.threshold is None:
            continue
        assert f"boundary: {alert.alert} just past its threshold" in names, alert.alert
        if alert.spec.threshold == 0 and model.signal(alert.spec.signal).kind == "rate":
            # no rate lies below 0: the value at the threshold (no increase) is the silent side
            assert f"boundary: {alert.alert} exactly at its threshold" in names, alert.alert
            continue
        assert f"boundary: {alert.alert} just short of its threshold" in names, alert.alert
    # an exact check where the value can be written exactly: a gauge, a used / (used + free)
    assert "boundary: GPUFramebufferUsageHigh exactly at its threshold" in names
    assert "boundary: VLLMKVCacheUsageHigh exactly at its threshold" in names
    # and a rate, quantiles at a bucket bound (ITL, E2E) and inside a bucket (TTFT), worked out to the bit
    for alert in EXACT_ALERTS:
        assert f"boundary: {alert} exactly at its threshold" in names, alert


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


def test_a_for_of_weeks_keeps_its_boundaries_without_the_exact_search(specs_with):
    """Found by `make fuzz`: with a `for` of years the search for the exact case listed every evaluation
    of the `for` (10 GB, minutes). Past a week of evaluations the search is skipped; hours keep it."""
    from servewatch.model import Model
    from servewatch.spec.loader import load

    tuned = "    VLLMRequestErrorRateHigh: {for: 30d}\n    VLLMPreemptionsHigh: {for: 6h}\n"
    model = Model(load(specs_with({"overrides.yaml": f"overrides:\n  alerts:\n{tuned}"})))
    names = {t["name"] for _, t in rule_tests.boundary_tests(model)}
    for alert in ("VLLMRequestErrorRateHigh", "VLLMPreemptionsHigh"):
        assert f"boundary: {alert} just past its threshold" in names
        assert f"boundary: {alert} just short of its threshold" in names
    assert "boundary: VLLMRequestErrorRateHigh exactly at its threshold" not in names
    assert "boundary: VLLMPreemptionsHigh exactly at its threshold" in names


# -- the generated tests fail on broken rules -----------------------------------------------------------
E2E_BUCKETS = "model:vllm_e2e_request_latency_seconds_bucket:rate5m)"
KV, WAITING = "(vllm:kv_cache_usage_perc)", "(vllm:num_requests_waiting)"
ENGINE = "by (namespace, pod, model_name, engine)"
# why it is broken -> (family, the generated text, what the broken rule says instead, the tests that see it)
MUTANTS = {
    "> became >=": ("gpu", "ratio) > 0.95", "ratio) >= 0.95", "boundaries"),
    "a shorter for": ("gpu", "ratio) > 0.95\n    for: 5m", "ratio) > 0.95\n    for: 4m", "boundaries"),
    "threshold moved": ("vllm", "kv_cache_usage:max > 0.95", "kv_cache_usage:max > 0.951", "boundaries"),
    "rate threshold moved": ("vllm", "preemptions:rate5m > 1", "preemptions:rate5m > 1.00001", "boundaries"),
    "> became >= on a rate": ("vllm", "preemptions:rate5m > 1\n", "preemptions:rate5m >= 1\n", "boundaries"),
    "> became >= on a quantile at a bucket bound": (
        "vllm",
        '"0.95"} > 0.1\n',
        '"0.95"} >= 0.1\n',
        "boundaries",
    ),
    "> became >= on a quantile inside a bucket": ("vllm", '"0.95"} > 2\n', '"0.95"} >= 2\n', "boundaries"),
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
    # issue 22.4: the workload a GPU is mapped to joins the alert's labels, so `for` restarts
    "a GPU alert keyed by its workload": (
        "gpu",
        "modelName) (gpu:dcgm_fb_used:ratio)",
        "modelName, exported_namespace) (gpu:dcgm_fb_used:ratio)",
        "churn",
    ),
    "an engine alert keyed by a scrape label": (
        "vllm",
        f"max {ENGINE} {KV}",
        "max by (namespace, pod, model_name, engine, service) " + KV,
        "churn",
    ),
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
    # the rules as generated pass (the committed bytes: servewatch test's verdict, or one run per family)
    assert all(r.passed for r in verify.prove([tests]))
    (tmp_path / "rules" / f"{family}.rules.yaml").write_text(rules.replace(old, new))
    assert not all(r.passed for r in verify.prove([tests])), why


# -- exactly at the threshold, to the last bit -----------------------------------------------------------
EXACT_ALERTS = (
    "VLLMPreemptionsHigh",
    "VLLMTimeToFirstTokenP95High",
    "VLLMInterTokenLatencyP95High",
    "VLLMEndToEndLatencyP95High",
)
TUNINGS = {  # thresholds halved, quadrupled, and odd ones that are no bucket bound and no round rate
    "halved": {
        "VLLMPreemptionsHigh": 0.5,
        "VLLMTimeToFirstTokenP95High": 1,
        "VLLMInterTokenLatencyP95High": 0.05,
    },
    "quadrupled": {
        "VLLMPreemptionsHigh": 4,
        "VLLMTimeToFirstTokenP95High": 8,
        "VLLMEndToEndLatencyP95High": 240,
    },
    "odd": {
        "VLLMPreemptionsHigh": 0.37,
        "VLLMTimeToFirstTokenP95High": 2.2,
        "VLLMInterTokenLatencyP95High": 0.123,
        "VLLMEndToEndLatencyP95High": 45,
    },
}


def inclusive(rules: str, alert: str) -> str:
    """The rules with `alert`'s `>` made `>=`."""
    doc = yamlio.load(rules)
    rule = next(r for g in doc["groups"] for r in g["rules"] if r.get("alert") == alert)
    head, sep, tail = rule["expr"].rpartition(" > ")
    assert sep, rule["expr"]
    rule["expr"] = f"{head} >= {tail}"
    return yamlout.dump(doc)


def assert_exact_cases_pin_the_comparison(vllm_boundaries, tmp_path, rules: str, tests: str, alerts) -> None:
    """The boundary tests pass under `rules`, and each of `alerts` made inclusive (`>=`) fails its
    "exactly at its threshold" case."""
    result = vllm_boundaries(tmp_path, rules, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    for alert in alerts:
        result = vllm_boundaries(tmp_path, inclusive(rules, alert), tests)
        assert result.returncode == 1, alert
        assert f"boundary: {alert} exactly at its threshold" in result.stdout + result.stderr


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("tuning", TUNINGS)
def test_a_tuned_exact_case_is_silent_and_fails_when_the_comparison_includes_the_threshold(
    specs_with, vllm_boundaries, tmp_path, tuning
):
    """Whatever the tuning, an exact case is written only where promtool's value is the threshold: the
    rule passes it, and the same rule with `>=` fails it (a value a bit below would pass both)."""
    thresholds = TUNINGS[tuning]
    overrides = "".join(f"    {a}: {{threshold: {t}}}\n" for a, t in thresholds.items())
    _, files = generate.build(specs_with({"overrides.yaml": f"overrides:\n  alerts:\n{overrides}"}))
    rules, tests = files["rules/vllm.rules.yaml"], files["promtool/vllm.boundaries.test.yaml"]
    names = {t["name"] for t in yamlio.load(tests)["tests"]}
    exact = [a for a in thresholds if f"boundary: {a} exactly at its threshold" in names]
    if tuning != "odd":  # round rates and bucket bounds are always exact
        assert exact == list(thresholds)
    assert_exact_cases_pin_the_comparison(vllm_boundaries, tmp_path, rules, tests, exact)


@pytest.mark.tools("promtool")
def test_the_worked_out_values_are_to_the_bit_what_promtool_computes(default_model, tmp_path):
    """rate_at and quantile_at against promtool itself: `==` in PromQL compares exactly, and each value is
    written in the shortest form that reads back to the same float; in the ramp and once settled."""
    synth = Synth(default_model, 30, 45)
    series, checks = [], []
    times = (30, 60, 150, 300, 330, 600, 900)
    for i, per_sample in enumerate((30, 9, 11.1, 0.37 * 30, 0.001, 123456.789)):
        name = f'counter{{i="{i}"}}'
        series.append({"series": name, "values": synth.counter_per_sample(per_sample)})
        for at in times:
            value = synth.rate_at(per_sample, at, 300)
            checks.append((f"rate({name}[5m])", value, f'{{i="{i}"}}', at))
    ttft = default_model.signal("model_ttft")
    for i, counts in enumerate(
        ({1.0: 85.0, 2.5: 15.0}, {0.1: 95.0, float("inf"): 5.0}, {0.5: 3.3, 10.0: 7.1})
    ):
        labels = {"h": str(i)}
        series += [{"series": s, "values": v} for s, v in synth.histogram(ttft.metric, labels, counts)]
        for at in times:
            value = synth.quantile_at(ttft, counts, 0.95, at, 300)
            expr = f'histogram_quantile(0.95, rate({ttft.metric}_bucket{{h="{i}"}}[5m]))'
            checks.append((expr, value, f'{{h="{i}"}}', at))
    test = {
        "name": "worked out values",
        "interval": "30s",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f"{expr} == bool {scenarios.number(value)}",
                "eval_time": scenarios.duration(at),
                "exp_samples": [{"labels": labels, "value": 1}],
            }
            for expr, value, labels, at in checks
        ],
    }
    rules = tmp_path / "empty.rules.yaml"
    rules.write_text("groups: []\n")
    path = tmp_path / "values.test.yaml"
    path.write_text(yamlout.dump({"rule_files": [rules.name], "tests": [test]}))
    result = tools.run("promtool", "test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


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
