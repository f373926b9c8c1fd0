"""VLLMSignalMetricsMissing has one branch per input a vLLM signal reads, each firing for a target that
exports the liveness gauge but not that input; the liveness gauge itself gets no branch, since a target
without it is never checked (that branch could never fire, and a mutant removing it went unnoticed)."""

from __future__ import annotations

import re

import yaml

LIVENESS = "vllm:num_requests_running"
BRANCH = re.compile(
    r"group by \([^)]*\) \((?P<live>[^()]+)\)\s+unless on \([^)]*\)"
    r"\s+group by \([^)]*\) \((?P<input>[^()]+)\)"
    r"\s+\), \"metric\", \"(?P<label>[^\"]+)\""
)


def _expr(files: dict[str, str], alert: str) -> str:
    doc = yaml.safe_load(files["rules/vllm.rules.yaml"])
    rules = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == alert]
    assert len(rules) == 1, rules
    return rules[0]["expr"]


def test_each_branch_checks_one_input_other_than_the_liveness_gauge(default_build):
    _, files = default_build
    expr = _expr(files, "VLLMSignalMetricsMissing")
    branches = [m.groupdict() for m in BRANCH.finditer(expr)]
    assert len(branches) == expr.count("label_replace("), expr  # every branch parsed
    assert all(b["live"] == LIVENESS for b in branches), branches
    assert all(b["input"] == b["label"] for b in branches), branches  # the label names the input
    inputs = {b["input"] for b in branches}
    assert LIVENESS not in inputs
    # inputs the default signals read (specs/signals.yaml): latency histograms through _count, the
    # KV cache gauge, the token and preemption counters
    assert {
        "vllm:e2e_request_latency_seconds_count",
        "vllm:time_to_first_token_seconds_count",
        "vllm:kv_cache_usage_perc",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:num_requests_waiting",
    } <= inputs, inputs
