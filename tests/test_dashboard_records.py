"""The vLLM dashboard reads every quantity vLLM's example dashboard also shows through recording rules:
one series per model (or one quantile per engine) instead of every raw series of every engine
(docs/scale.md, bench/README.md)."""

import json

import pytest

from servewatch_testkit.rule_stages import reads


@pytest.fixture(scope="module")
def serving(default_build):
    model, files = default_build
    board = json.loads(files["dashboards/vllm-serving.json"])
    panels = {}
    for p in board["panels"]:
        for inner in [p, *p.get("panels", [])]:
            if inner.get("type") != "row":
                panels.setdefault(inner["title"], inner)
    return model, panels


def exprs(panel) -> list[str]:
    return [t["expr"] for t in panel.get("targets", [])]


def raw(expr: str) -> set[str]:
    """The raw vLLM series an expression reads."""
    return {m for m in reads(expr.replace("$__rate_interval", "5m")) if m.startswith("vllm:")}


# (panel, the records it reads, the raw series it may still read): vLLM's example shows each of these
READS = [
    (
        "Time to first token",
        "model:vllm_time_to_first_token_seconds:histogram_quantile_rate5m",
        "_sum|_count",
    ),
    (
        "Inter-token latency",
        "model:vllm_inter_token_latency_seconds:histogram_quantile_rate5m",
        "_sum|_count",
    ),
    ("End-to-end latency", "model:vllm_e2e_request_latency_seconds:histogram_quantile_rate5m", "_sum|_count"),
    ("Prompt length: $model", "model:vllm_request_prompt_tokens_bucket:rate5m", ""),
    ("Generation length: $model", "model:vllm_request_generation_tokens_bucket:rate5m", ""),
    ("Token throughput", "model:vllm_prompt_tokens:rate5m", ""),
    ("Finished requests by reason", "model:vllm_request_success:rate5m", ""),
    (
        "Time to first token p95 per engine",
        "engine:vllm_time_to_first_token_seconds:histogram_quantile_rate5m",
        "",
    ),
    (
        "Inter-token latency p95 per engine",
        "engine:vllm_inter_token_latency_seconds:histogram_quantile_rate5m",
        "",
    ),
]


@pytest.mark.parametrize("title, record, allowed", READS, ids=[r[0] for r in READS])
def test_panels_read_recording_rules_not_raw_buckets(serving, title, record, allowed):
    model, panels = serving
    targets = exprs(panels[title])
    assert any(record in reads(e) for e in targets), targets
    for expr in targets:
        # the mean line reads _sum / _count (no record for it); never a raw bucket, never a raw counter
        left = {m for m in raw(expr) if not (allowed and m.endswith(tuple(allowed.split("|"))))}
        assert not left, (title, left)
        assert 'namespace=~"$namespace"' in expr
        assert 'model_name=~"$model"' in expr or 'model_name="${model:raw}"' in expr
    if record.startswith("engine:"):  # per engine: the pod and engine variables narrow it too
        assert all('pod=~"$pod"' in e and 'engine=~"$engine"' in e for e in targets)


def test_the_length_heatmaps_are_per_model(serving):
    _, panels = serving
    for title in ("Prompt length: $model", "Generation length: $model"):
        [expr] = exprs(panels[title])
        assert expr.startswith("sum by (le) (model:vllm_request_") and panels[title]["repeat"] == "model"
