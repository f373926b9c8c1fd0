"""bucket-layout-mix: histogram_quantile() never merges histograms whose buckets differ per deployment.

vLLM's token-count histograms (prompt, generation, max_tokens, ...) have buckets up to each
deployment's max_model_len: summing them `by (le)` across models adds counts of different bucket
sets, and the quantile is wrong. Keep model_name in the aggregation.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..facts import lineage
from ..findings import Severity
from ..flow import flow
from . import Check


def _one_model(node) -> bool:
    """Every selector pins model_name with `=`: one deployment's layout only."""
    return all(
        any(m.name == "model_name" and m.op == pp.MatchOp.Equal for m in sel.matchers.matchers)
        for sel in tree.selectors(node)
    )


def mixed_layouts(node, ctx) -> list[str]:
    """Histograms with per-deployment buckets that `node` aggregates across models."""
    varying = sorted(m.name for m in lineage(node, ctx) if m.buckets_per_deployment)
    if not varying or _one_model(node):
        return []
    possible = flow(node, ctx)
    if possible.anything or "model_name" in possible.labels:
        return []
    return varying


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if tree.func(node) == "histogram_quantile" and len(node.args) == 2:
            if names := mixed_layouts(node.args[1], ctx):
                yield CHECK.problem(
                    f"histogram_quantile() over {', '.join(names)} summed across models: its buckets "
                    "follow each deployment's max_model_len, so different layouts are added together",
                    "keep model_name: sum by (le, model_name) (rate(..._bucket[5m]))",
                )


CHECK = Check(
    id="bucket-layout-mix",
    severity=Severity.WARNING,
    summary="histogram_quantile() keeps model_name over histograms whose buckets differ per deployment.",
    scope="query",
    run=run,
)
