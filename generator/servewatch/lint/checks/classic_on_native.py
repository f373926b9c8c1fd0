"""classic-on-native: no `_bucket`, `_count` or `_sum` read of a histogram the Prometheus stores native.

With `convert_classic_histograms_to_nhcb` Prometheus 3 stores vLLM's classic histograms as native
histograms with custom buckets: one series `x` per histogram, its count and sum folded in. `x_bucket`,
`x_count` and `x_sum` no longer exist there, so a query that reads them returns nothing, and an alert
on it never fires. Known only when lint asks a live Prometheus (`servewatch lint --prometheus URL`);
a query that also reads the native `x` (`config.histograms: both`) is fine.
"""

from __future__ import annotations

from ...promql import tree
from ...promql.histograms import SUFFIXES
from ..findings import Severity
from . import Check
from .metric_known import metric_name


def run(query, ctx):
    if not ctx.native_histograms:
        return
    names = {metric_name(sel) for sel in tree.selectors(query.ast)}
    seen = set()
    for name in sorted(n for n in names if n):
        for suffix in SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and base in ctx.native_histograms and base not in names and name not in seen:
                seen.add(name)
                yield CHECK.problem(
                    f"{name} does not exist on this Prometheus: it stores {base} as a native histogram "
                    "(convert_classic_histograms_to_nhcb), so the query returns nothing",
                    f"read the native histogram ({_native_read(base, suffix)}); servewatch's own "
                    "output: set config.histograms: native (or both)",
                )


def _native_read(base: str, suffix: str) -> str:
    if suffix == "_bucket":
        return f"histogram_quantile(0.95, sum by (...) (rate({base}[5m])))"
    read = "histogram_count" if suffix == "_count" else "histogram_sum"
    return f"{read}(rate({base}[5m]))"


CHECK = Check(
    id="classic-on-native",
    severity=Severity.ERROR,
    summary="No _bucket/_count/_sum read of a histogram the Prometheus stores native.",
    scope="query",
    run=run,
)
