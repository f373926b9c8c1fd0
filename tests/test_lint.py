"""The expression checks one by one (engine.lint), and servewatch's own output linting clean."""

import json
from pathlib import Path

import pytest

from servewatch import catalog
from servewatch.lint.checks import ALL
from servewatch.lint.engine import CHECKS, LintContext, lint, substitute_macros
from servewatch.lint.facts import RecordDef

CTX = LintContext(catalog.load(), records={"gpu:dcgm_fb_used:ratio"}, min_range_s=120)

# check -> (failing example, passing example): each a mistake users copy, and its fix
EXAMPLES = {
    "syntax": ("sum(rate(vllm:prompt_tokens_total[5m])", "sum(rate(vllm:prompt_tokens_total[5m]))"),
    "metric-known": ("vllm:gpu_cache_usage_perc > 0.9", "vllm:kv_cache_usage_perc > 0.9"),
    "label-unknown": (
        'max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED{model_name="llama"})',
        'max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED{modelName="NVIDIA-H100"})',
    ),
    "explicit-matching": (
        "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE > 0)",
        "DCGM_FI_DEV_FB_USED / on (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED "
        "+ on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE > 0)",
    ),
    "match-not-unique": (
        "DCGM_FI_DEV_FB_USED / on (gpu) (DCGM_FI_DEV_FB_USED + on (gpu) DCGM_FI_DEV_FB_FREE > 0)",
        "DCGM_FI_DEV_FB_USED / on (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED "
        "+ on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE > 0)",
    ),
    "counter-rate": ("vllm:num_preemptions_total > 100", "rate(vllm:num_preemptions_total[5m]) > 1"),
    "rate-gauge": ("rate(DCGM_FI_DEV_XID_ERRORS[5m]) > 0", "max_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0"),
    "rate-window": ("rate(vllm:prompt_tokens_total[1m])", "rate(vllm:prompt_tokens_total[5m])"),
    "quantile-le": (
        "histogram_quantile(0.95, sum by (model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        "histogram_quantile(0.95, sum by (model_name, le) "
        "(rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
    ),
    "guarded-division": (
        "sum(rate(vllm:prefix_cache_hits_total[5m])) / on () sum(rate(vllm:prefix_cache_queries_total[5m]))",
        "sum(rate(vllm:prefix_cache_hits_total[5m])) / on () "
        "(sum(rate(vllm:prefix_cache_queries_total[5m])) > 0)",
    ),
    "bucket-layout-mix": (
        "histogram_quantile(0.9, sum by (le) (rate(vllm:request_prompt_tokens_bucket[5m])))",
        "histogram_quantile(0.9, sum by (le, model_name) (rate(vllm:request_prompt_tokens_bucket[5m])))",
    ),
    "saturation-avg": (
        "avg by (model_name) (vllm:kv_cache_usage_perc) > 0.9",
        "max by (model_name) (vllm:kv_cache_usage_perc) > 0.9",
    ),
    "classic-on-native": (  # against a Prometheus holding the histogram native (CTX_NATIVE)
        "histogram_quantile(0.95, sum by (model_name, le) "
        "(rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        "histogram_quantile(0.95, sum by (model_name) (rate(vllm:e2e_request_latency_seconds[5m])))",
    ),
}
CTX_NATIVE = LintContext(
    catalog.load(), min_range_s=120, native_histograms=frozenset({"vllm:e2e_request_latency_seconds"})
)
CONTEXTS = {"classic-on-native": CTX_NATIVE}


def test_every_expression_check_has_examples():
    assert set(EXAMPLES) == set(CHECKS)


@pytest.mark.parametrize("check", sorted(EXAMPLES))
def test_check_flags_the_failing_example_only(check):
    bad, good = EXAMPLES[check]
    ctx = CONTEXTS.get(check, CTX)
    assert check in {p.check for p in lint(bad, ctx)}
    assert not lint(good, ctx)


def test_quantile_le_leaves_native_histograms_alone():
    """A native histogram has no le: its quantile over `sum by (model_name)` is right, directly or
    through a record of its rates; a record of classic bucket rates still needs le."""
    native = "sum by (model_name) (rate(vllm:e2e_request_latency_seconds[5m]))"
    classic = "sum by (model_name, le) (rate(vllm:e2e_request_latency_seconds_bucket[5m]))"
    ctx = LintContext(catalog.load(), min_range_s=120)
    ctx.add_record(RecordDef("model:native:rate5m", native, ()))
    ctx.add_record(RecordDef("model:classic:rate5m", classic, ()))
    found = lambda e: {p.check for p in lint(e, ctx)}  # noqa: E731
    assert "quantile-le" not in found(f"histogram_quantile(0.95, {native})")
    assert "quantile-le" not in found("histogram_quantile(0.95, sum by (model_name) (model:native:rate5m))")
    assert "quantile-le" in found("histogram_quantile(0.95, sum by (model_name) (model:classic:rate5m))")


def test_classic_on_native_is_quiet_without_a_prometheus_and_for_both_forms():
    bad, _ = EXAMPLES["classic-on-native"]
    assert "classic-on-native" not in {p.check for p in lint(bad, CTX)}
    both = (
        "sum by (model_name) (rate(vllm:e2e_request_latency_seconds[5m])) or on (model_name) "
        "sum by (model_name, le) (rate(vllm:e2e_request_latency_seconds_bucket[5m]))"
    )
    assert "classic-on-native" not in {p.check for p in lint(both, CTX_NATIVE)}
    count = "rate(vllm:e2e_request_latency_seconds_count[5m])"
    assert "classic-on-native" in {p.check for p in lint(count, CTX_NATIVE)}


def test_a_counter_is_tested_for_presence_through_a_union():
    """group() of a counter under either host spelling tests presence; a sum of the union is raw."""
    counter = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    either = f'{counter}{{Hostname="a"}} or {counter}{{hostname="a", Hostname=""}}'
    assert "counter-rate" not in {p.check for p in lint(f"group by (UUID, GPU_I_ID) (({either}))", CTX)}
    assert "counter-rate" in {p.check for p in lint(f"sum by (UUID, GPU_I_ID) ({either})", CTX)}
    assert "counter-rate" in {p.check for p in lint(either, CTX)}


def test_the_xid_window_count_is_read_as_a_gauge():
    """DCGM_EXP_XID_ERRORS_COUNT counts the XIDs of the exporter's last window and falls as they age
    out, whatever the counters CSV types it: rate() of it reads each fall as a reset, a new XID."""
    assert "rate-gauge" in {p.check for p in lint("rate(DCGM_EXP_XID_ERRORS_COUNT[5m]) > 0", CTX)}
    assert not lint("max by (UUID, GPU_I_ID, xid) (DCGM_EXP_XID_ERRORS_COUNT) > 0", CTX)


def test_checks_can_be_disabled():
    assert not lint("vllm:num_preemptions_total > 100", CTX, disable={"counter-rate"})


def test_every_check_has_an_id_severity_summary_and_scope():
    for check in ALL.values():
        assert (
            check.id
            and check.summary.endswith(".")
            and check.scope in ("query", "rule", "rules", "dashboard")
        )


def test_grafana_macros_become_parseable():
    q = substitute_macros(
        'sum by (pod) (rate(vllm:prompt_tokens_total{model_name=~"$model"}[$__rate_interval]))'
    )
    assert lint(q, CTX) == []


def test_an_average_used_as_a_baseline_is_not_hidden_saturation():
    imbalance = (
        "max by (model_name) (vllm:kv_cache_usage_perc) / on (model_name) "
        "(avg by (model_name) (vllm:kv_cache_usage_perc) > 0)"
    )
    assert lint(imbalance, CTX) == []


FB_RATIO = (
    "DCGM_FI_DEV_FB_USED / on (UUID, GPU_I_ID) "
    "(DCGM_FI_DEV_FB_USED + on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE > 0)"
)


def test_the_saturation_average_quotes_the_expression_as_written():
    """It once printed `DCGM_FI_DEV_FB_FREE / DCGM_FI_DEV_FB_USED` for USED / (USED + FREE)."""
    [problem] = lint(f"avg({FB_RATIO})", CTX)
    assert problem.check == "saturation-avg"
    assert problem.message.startswith(
        "avg of `DCGM_FI_DEV_FB_USED / on (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED"
    )


def test_a_saturation_ratio_pooled_across_devices_is_reported():
    """sum(used) / sum(used + free) is an average weighted by size: the fullest GPU hides in it."""
    pooled = "sum(DCGM_FI_DEV_FB_USED) / (sum(DCGM_FI_DEV_FB_USED) + sum(DCGM_FI_DEV_FB_FREE) > 0)"
    [problem] = lint(pooled, CTX)
    assert (
        problem.check == "saturation-avg"
        and "pools GPUs (and MIG instances) into one ratio" in problem.message
    )
    assert (
        "`sum(vllm:kv_cache_usage_perc) / (count(vllm:kv_cache_usage_perc) > 0)` pools engines"
        in lint("sum(vllm:kv_cache_usage_perc) / (count(vllm:kv_cache_usage_perc) > 0)", CTX)[0].message
    )
    per_device = f"max({FB_RATIO})"
    per_host = (
        "sum by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED) / on (UUID, GPU_I_ID) "
        "(sum by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED + on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE) > 0)"
    )
    assert lint(per_device, CTX) == [] and lint(per_host, CTX) == []


def test_no_matching_advice_between_two_label_less_sides():
    """`on (...)` means nothing between two sides without labels; with labels on one side it does."""
    for q in (
        "sum(rate(vllm:num_preemptions_total[5m])) / (sum(rate(vllm:request_success_total[5m])) > 0)",
        "max by () (vllm:num_requests_waiting) > bool sum(vllm:num_requests_running)",
        "histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))"
        " > bool abs(sum(vllm:num_requests_running))",
    ):
        assert "explicit-matching" not in [p.check for p in lint(q, CTX)], q
    labelled = (
        "sum by (model_name) (rate(vllm:num_preemptions_total[5m])) "
        "/ (sum(rate(vllm:request_success_total[5m])) > 0)"
    )
    assert "explicit-matching" in [p.check for p in lint(labelled, CTX)]
    topk = "topk(1, vllm:num_requests_waiting) > bool sum(vllm:num_requests_running)"  # topk keeps labels
    assert "explicit-matching" in [p.check for p in lint(topk, CTX)]


def test_the_old_grafana_gauge_form_is_read_for_sums():
    """A 6.x gauge keeps its reduction in options.fieldOptions.calcs; "sum" there adds up a gauge too."""
    from servewatch.lint import runner
    from servewatch.lint.facts import LintContext as FileContext

    bad = Path(__file__).parent / "lint_fixtures" / "reduce-sum-gauge" / "bad.json"
    ctx = FileContext(catalog.load(), scrape_interval_s=30, min_range_s=120)
    found = runner.run([str(bad)], [], ctx, runner.select()).findings
    old = [f for f in found if f.check == "reduce-sum-gauge" and "fieldOptions" in f.location.path]
    assert len(old) == 1 and "gauge DCGM_FI_DEV_GPU_TEMP" in old[0].message


def test_the_label_flow_follows_recording_rules():
    ctx = LintContext(catalog.load())
    ctx.add_record(
        RecordDef("engine:kv:max", "max by (namespace, pod, model_name, engine) (vllm:kv_cache_usage_perc)")
    )
    assert [p.check for p in lint('engine:kv:max{Hostname="a"}', ctx)] == ["label-unknown"]
    assert [p.check for p in lint("avg(engine:kv:max)", ctx)] == ["saturation-avg"]
    assert lint('max(engine:kv:max{pod="a"})', ctx) == []


def test_generated_rules_pass_every_check(repo):
    from servewatch import generate

    model, _ = generate.build(repo / "specs")
    ctx = LintContext(catalog.load(), min_range_s=120)
    for r in model.records():
        ctx.add_record(RecordDef(r.record, r.expr, tuple(sorted(r.labels.items()))))
    exprs = [r.expr for r in model.records()] + [a.expr for a in model.alerts()]
    assert len(exprs) == len(model.records()) + len(model.alerts()) > 30
    for expr in exprs:
        assert lint(expr, ctx) == [], expr


def test_servewatch_own_rules_and_dashboards_lint_clean(servewatch, repo):
    """rules/ and dashboards/ in every delivery form; the known dashboard defects are listed in
    .servewatch-lint.yaml (the lead removes them when the dashboards are reworked)."""
    res = servewatch("lint", "rules", "dashboards", "--format", "json", "--fail-on", "info")
    report = json.loads(res.stdout)
    assert res.returncode == 0, res.stdout
    assert report["findings"] == []
    # every rule (the house's and the SLOs') in each of plain, PrometheusRule, Mimir, Thanos and
    # kube-prometheus-stack values; 4 dashboards in each of classic, import, ConfigMap and
    # GrafanaDashboard form
    from servewatch import generate

    model, _ = generate.build(repo / "specs")
    rules = len(model.records()) + len(model.alerts())
    assert report["summary"]["rules"] == 5 * rules and report["summary"]["dashboards"] == 16


def test_lint_cli_exit_codes(servewatch):
    assert servewatch("lint").returncode == 0
    res = servewatch("lint", "--expr", "vllm:gpu_cache_usage_perc > 0.9")
    assert res.returncode == 1 and "vllm:kv_cache_usage_perc" in res.stdout
    assert servewatch("lint", "--disable", "nope").returncode == 2
