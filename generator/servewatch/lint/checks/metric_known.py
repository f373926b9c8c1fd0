"""metric-known: names from vLLM's and dcgm-exporter's namespaces exist in the catalogs.

A name that was removed or renamed gets its replacement (the dashboards copied from vLLM's
examples still read vllm:gpu_cache_usage_perc). Names outside those namespaces are the user's own
and are not judged.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check

CATALOG_PREFIXES = ("vllm:", "DCGM_", "dcgm_")


def metric_name(sel: pp.VectorSelector) -> str | None:
    if sel.name:
        return sel.name
    for m in sel.matchers.matchers:
        if m.name == "__name__" and m.op == pp.MatchOp.Equal:
            return m.value
    return None


def run(query, ctx):
    seen = set()
    for sel in tree.selectors(query.ast):
        name = metric_name(sel)
        if not name or name in seen or ctx.is_record(name) or ctx.metric(name):
            continue
        seen.add(name)
        rename = ctx.catalog.rename_of(name)
        if rename is not None:
            fix = f"use {rename.replacement}" if rename.replacement else "remove it: nothing replaces it"
            yield CHECK.problem(f"metric {name} was removed (gone in {rename.gone_in})", fix)
        elif name.startswith(CATALOG_PREFIXES):
            yield CHECK.problem(ctx.catalog.problem(name))


CHECK = Check(
    id="metric-known",
    severity=Severity.ERROR,
    summary="vLLM and DCGM metric names exist in vLLM v0.25.0 / dcgm-exporter; removed names get their "
    "replacement.",
    scope="query",
    run=run,
)
