"""What lint learns from a live Prometheus (`servewatch lint --prometheus URL`): which catalog
histograms it stores only as native histograms, so classic reads of them can be flagged."""

from __future__ import annotations

from ..catalog import Catalog
from ..detect.probes import regex
from ..promql import builders as b


def native_histograms(client, catalog: Catalog) -> frozenset[str]:
    """Catalog histograms with a series of their own name (native) and no `_bucket` series."""
    bases = sorted(n for n, m in catalog.metrics.items() if m.type == "histogram")
    names = bases + [f"{n}_bucket" for n in bases]
    rows = client.query(b.agg("count", ["__name__"], b.selector("", f'__name__=~"{regex(names)}"')))
    stored = {r["metric"].get("__name__", "") for r in rows}
    return frozenset(n for n in bases if n in stored and f"{n}_bucket" not in stored)
