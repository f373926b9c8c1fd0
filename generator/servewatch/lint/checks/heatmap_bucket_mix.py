"""heatmap-bucket-mix: a heatmap does not add up histograms whose buckets differ per deployment.

The dashboard twin of bucket-layout-mix: `sum by (le) (rate(vllm:request_prompt_tokens_bucket[...]))`
across models with different max_model_len adds counts of different bucket sets, so the
cumulative counts stop growing with le and the heatmap shows negative or shifted cells.
"""

from __future__ import annotations

from ..findings import Severity
from ..subjects import panel_where
from . import Check
from .bucket_layout_mix import mixed_layouts


def run(dashboard, ctx):
    for pq in dashboard.shown_queries({"heatmap"}):
        if names := mixed_layouts(pq.query.ast, ctx):
            yield CHECK.problem(
                f"{panel_where(pq.panel)} adds up {', '.join(names)} across models, whose buckets follow "
                "each deployment's max_model_len",
                "keep model_name in the aggregation (sum by (le, model_name)) or select one model",
                at=dashboard.in_panel(pq, ("targets",)),
            )


CHECK = Check(
    id="heatmap-bucket-mix",
    severity=Severity.WARNING,
    summary="Heatmaps keep model_name over histograms whose buckets differ per deployment.",
    scope="dashboard",
    run=run,
)
