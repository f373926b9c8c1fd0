"""Property: expressions composed from promql/builders.py the way servewatch composes them lint
clean, and the same expressions with their on(...) removed do not (DESIGN.md invariants 1-4)."""

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from servewatch import catalog
from servewatch.lint.engine import LintContext, lint
from servewatch.promql import builders as b

CTX = LintContext(catalog.load(), scrape_interval_s=30, min_range_s=120)

# Identities as specs/config.yaml sets them, and the context labels a GPU result may carry.
GPU = ["UUID", "GPU_I_ID"]
ENGINE = ["namespace", "pod", "model_name", "engine"]
MODEL = ["namespace", "model_name"]
GPU_CONTEXT = [
    "Hostname",
    "hostname",
    "gpu",
    "GPU_I_PROFILE",
    "modelName",
    "exported_namespace",
    "exported_pod",
]
DCGM_GAUGES = [
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
]
VLLM_COUNTS = ["vllm:num_requests_running", "vllm:num_requests_waiting"]
VLLM_SATURATION = "vllm:kv_cache_usage_perc"
VLLM_GAUGES = [*VLLM_COUNTS, VLLM_SATURATION]
VLLM_COUNTERS = ["vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total"]
HISTOGRAMS = [
    "vllm:e2e_request_latency_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:request_prompt_tokens",
]
WINDOWS = st.sampled_from(["2m", "5m", "10m", "1h"])
OPS = st.sampled_from([">", "<", ">="])
THRESHOLDS = st.floats(min_value=0.01, max_value=100, allow_nan=False).map(lambda v: round(v, 2))


@st.composite
def gpu_series(draw):
    """One series per GPU: a gauge, deduplicated to the GPU's identity."""
    return b.dedup(draw(st.sampled_from(DCGM_GAUGES)), GPU)


@st.composite
def engine_series(draw, gauges=tuple(VLLM_GAUGES)):
    """One series per engine: a gauge, or a counter's rate, deduplicated to the engine."""
    if draw(st.booleans()):
        return b.dedup(draw(st.sampled_from(gauges)), ENGINE)
    return b.dedup(b.rate(draw(st.sampled_from(VLLM_COUNTERS)), draw(WINDOWS)), ENGINE)


@st.composite
def model_series(draw):
    """One series per model: the engines' counts and rates summed, the fullest engine's KV cache
    (a saturation is never summed across engines: saturation-avg), or a latency quantile that keeps
    le and the model."""
    how = draw(st.sampled_from(["sum", "fullest", "quantile"]))
    if how == "sum":
        return b.agg("sum", MODEL, draw(engine_series(tuple(VLLM_COUNTS))))
    if how == "fullest":
        return b.agg("max", MODEL, b.dedup(VLLM_SATURATION, ENGINE))
    buckets = b.dedup(b.rate(draw(st.sampled_from(HISTOGRAMS)) + "_bucket", draw(WINDOWS)), [*ENGINE, "le"])
    return b.quantile(draw(st.sampled_from([0.5, 0.95, 0.99])), b.agg("sum", [*MODEL, "le"], buckets))


def combine(leaf, identity, context=None):
    """Binary compositions of one identity level, each through a builder."""

    def extend(children):
        pair = st.tuples(children, children)
        options = [
            pair.map(lambda p: b.guarded_div(p[0], p[1], identity)),
            st.tuples(children, children, OPS, THRESHOLDS).map(
                lambda p: b.only_where(p[0], b.compare(p[1], p[2], p[3]), identity)
            ),
            pair.map(lambda p: b.unless(p[0], p[1], identity)),
        ]
        if context:
            options.append(
                st.tuples(children, st.sampled_from(DCGM_GAUGES)).map(
                    lambda p: b.with_context(p[0], p[1], identity, context)
                )
            )
        return st.one_of(options)

    return st.recursive(leaf, extend, max_leaves=4)


@st.composite
def ratios(draw):
    """part / (part + rest) per identity, the builder's matched ratio."""
    metrics = st.sampled_from(DCGM_GAUGES)
    return b.matched_ratio(draw(metrics), draw(metrics), GPU)


EXPRESSIONS = st.one_of(
    combine(st.one_of(gpu_series(), ratios()), GPU, GPU_CONTEXT),
    combine(engine_series(), ENGINE),
    combine(model_series(), MODEL),
).flatmap(lambda e: st.one_of(st.just(e), st.tuples(OPS, THRESHOLDS).map(lambda p: b.compare(e, *p))))

ON_CLAUSE = re.compile(r"\bon \([^)]*\)\s*")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_builder_expressions_lint_clean(expr):
    assert lint(expr, CTX) == [], expr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_the_same_without_on_do_not(expr):
    stripped = ON_CLAUSE.sub("", expr)
    assume(stripped != expr)
    problems = {p.check for p in lint(stripped, CTX)}
    assert problems & {"explicit-matching", "syntax"}, stripped


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(DCGM_GAUGES),
    st.sampled_from(DCGM_GAUGES),
    st.sampled_from([["UUID"], ["gpu"], ["Hostname", "gpu"]]),
)
def test_a_gpu_identity_that_is_not_unique_does_not(part, rest, identity):
    problems = {p.check for p in lint(b.matched_ratio(part, rest, identity), CTX)}
    assert "match-not-unique" in problems


def test_a_sum_of_kv_caches_over_another_is_a_pooled_saturation():
    """Why model_series never sums a saturation: hypothesis once composed the engines' summed KV
    cache over a ratio with the same sum inside, and saturation-avg reports that pooling, rightly."""
    kv = b.agg("sum", MODEL, b.dedup(VLLM_SATURATION, ENGINE))
    running = b.agg("sum", MODEL, b.dedup("vllm:num_requests_running", ENGINE))
    expr = b.guarded_div(kv, b.guarded_div(running, kv, MODEL), MODEL)
    assert [p.check for p in lint(expr, CTX)] == ["saturation-avg"], expr
