"""The PromQL checks: each fails on the naive query and passes on the servewatch one; the
generated rules pass them all."""

import pytest

from servewatch import catalog, generate
from servewatch.lint.engine import CHECKS, LintContext, lint, substitute_macros

CTX = LintContext(catalog.load(), records={"gpu:dcgm_fb_used:ratio"}, min_range_s=120)

# check -> (failing example, passing example)
EXAMPLES = {
    "syntax": ("sum(rate(vllm:prompt_tokens_total[5m])", "sum(rate(vllm:prompt_tokens_total[5m]))"),
    "metric-known": ("vllm:gpu_cache_usage_perc > 0.9", "vllm:kv_cache_usage_perc > 0.9"),
    "explicit-matching": (
        "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE > 0)",
        "DCGM_FI_DEV_FB_USED / on (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED "
        "+ on (UUID, GPU_I_ID) DCGM_FI_DEV_FB_FREE > 0)",
    ),
    "counter-rate": ("vllm:num_preemptions_total > 100", "rate(vllm:num_preemptions_total[5m]) > 1"),
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
}


def test_every_check_has_examples():
    assert set(EXAMPLES) == set(CHECKS) | {"syntax"}


@pytest.mark.parametrize("check", sorted(EXAMPLES))
def test_check_flags_the_failing_example_only(check):
    bad, good = EXAMPLES[check]
    assert check in {p.check for p in lint(bad, CTX)}
    assert check not in {p.check for p in lint(good, CTX)}


def test_checks_can_be_disabled():
    assert not lint("vllm:num_preemptions_total > 100", CTX, disable={"counter-rate"})


def test_grafana_macros_become_parseable():
    q = substitute_macros(
        'sum by (pod) (rate(vllm:prompt_tokens_total{model_name=~"$model"}[$__rate_interval]))'
    )
    assert lint(q, CTX) == []


def test_generated_rules_pass_every_check(repo):
    model, _ = generate.build(repo / "specs")
    ctx = LintContext(
        catalog.load(), records={s.record for s in model.spec.signals.values()}, min_range_s=120
    )
    exprs = [r.expr for r in model.records()] + [a.expr for a in model.alerts()]
    assert len(exprs) == 30
    for expr in exprs:
        assert lint(expr, ctx) == [], expr


def test_lint_cli_exit_codes(servewatch):
    assert servewatch("lint").returncode == 0
    res = servewatch("lint", "--expr", "vllm:gpu_cache_usage_perc > 0.9")
    assert res.returncode == 1 and "vllm:kv_cache_usage_perc" in res.stdout
    assert servewatch("lint", "--disable", "nope").returncode == 2
