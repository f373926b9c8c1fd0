"""How a histogram is read: the one place that knows the classic and the native form.

A classic histogram is three families of float series (`x_bucket` per `le`, `x_count`, `x_sum`).
Prometheus 3 can store the same exposition as one native histogram with custom buckets per series
(NHCB, `convert_classic_histograms_to_nhcb: true`): the series is named `x`, carries no `le`, and its
count and sum are folded into it, so `x_bucket`, `x_count` and `x_sum` no longer exist.

`config.histograms` says which form the rules, dashboards, runbooks and tests read:

  classic  `rate(x_bucket[w])` per `le`, `rate(x_count[w])`, `rate(x_sum[w])` (what servewatch
           always generated; byte for byte the same output)
  native   `rate(x[w])`, `histogram_count(rate(x[w]))`, `histogram_sum(rate(x[w]))`
  both     the native read `or on (identity)` the classic one, per identity: a Prometheus holding
           either form (or a fleet mid-migration) gives one answer per engine, native preferred

Callers write what they mean in the classic spelling (`x_bucket`, `x_count`, `x_sum`) and pass it
through `deduped_rate`; the forms differ only here. Two facts of native histograms shape the code:
`max` ignores them (so one engine scraped twice is deduplicated with `avg`, which leaves identical
copies unchanged), and `histogram_count`/`histogram_sum` give floats, deduplicated with `max` as
before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from . import builders as b

FORMS = ("classic", "native", "both")
SUFFIXES = ("_bucket", "_count", "_sum")
LE = "le"
# what each classic series becomes once its histogram is native
NATIVE_READ = {"_count": "histogram_count", "_sum": "histogram_sum"}

_SELECTOR_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?$", re.S)


@dataclass(frozen=True)
class Component:
    """A classic histogram series named by a selector: `base` + `suffix`, with `matchers`."""

    base: str
    suffix: str
    matchers: str


@dataclass(frozen=True)
class Histograms:
    """The reads of one configured form. `is_histogram(name)`: whether a metric (without suffix) is
    a histogram, so a counter that happens to end in `_count` is left alone."""

    form: str
    is_histogram: Callable[[str], bool]

    @property
    def native(self) -> bool:
        return self.form != "classic"

    def component(self, series: str) -> Component | None:
        """The histogram series a selector reads, None for anything else."""
        m = _SELECTOR_RE.match(series.strip())
        if not m:
            return None
        name, body = m.group(1), (m.group(2) or "{}")[1:-1]
        for suffix in SUFFIXES:
            if name.endswith(suffix) and self.is_histogram(name.removesuffix(suffix)):
                return Component(name.removesuffix(suffix), suffix, body)
        return None

    # -- names ---------------------------------------------------------------------------------
    def grouping(self, labels: Sequence[str]) -> list[str]:
        """Labels to aggregate bucket rates by: `le` goes in native form (a native histogram has
        none); `both` keeps it, so classic buckets stay apart while native ones group without it."""
        return [label for label in labels if label != LE] if self.form == "native" else list(labels)

    def stored(self, name: str) -> list[str]:
        """The stored series names that hold a classic series `name` in this form (absence checks)."""
        comp = self.component(name)
        if comp is None or not self.native:
            return [name]
        return [comp.base] if self.form == "native" else [comp.base, name]

    # -- rates -------------------------------------------------------------------------------
    def deduped_rate(self, series: str, window: str, dedup_by: Sequence[str]) -> str:
        """`max by (dedup_by) (rate(series[window]))`, the rate of a counter with each engine counted
        once, and the same for a histogram series in the configured form."""
        classic = b.dedup(b.rate(series, window), dedup_by)
        comp = self.component(series)
        if comp is None or not self.native:
            return classic
        native = self._native_rate(comp, window, [label for label in dedup_by if label != LE])
        if self.form == "native":
            return native
        return b.otherwise(native, classic, [label for label in dedup_by if label != LE])

    def _native_rate(self, comp: Component, window: str, dedup_by: Sequence[str]) -> str:
        if comp.suffix == "_bucket":
            bound = _bound(comp.matchers)
            hist = b.agg("avg", dedup_by, b.rate(b.selector(comp.base, _without_le(comp.matchers)), window))
            if bound is None:
                return hist
            if bound == float("inf"):  # the +Inf bucket counts every observation
                return f"histogram_count({hist})"
            return count_below(bound, hist, dedup_by)
        read = NATIVE_READ[comp.suffix]
        return b.dedup(f"{read}({b.rate(b.selector(comp.base, comp.matchers), window)})", dedup_by)

    # -- recorded bucket rates ---------------------------------------------------------------------
    def recorded_total(self, record: str, keep: Sequence[str], *matchers: str) -> str:
        """The rate of every observation in a record of bucket rates (per `keep`, of the series
        `matchers` select): its `+Inf` bucket, or the count of its native histograms."""
        classic = b.selector(record, f'{LE}="+Inf"', *matchers)
        if not self.native:
            return classic
        native = f"histogram_count({b.selector(record, *matchers)})"
        return native if self.form == "native" else b.otherwise(native, classic, keep)


def count_below(bound: float, hist: str, on: Sequence[str]) -> str:
    """Observations at or below `bound` per second in native histograms `hist` (one per `on`): what
    the classic `le` bucket of that bound counts, where `bound` is one of the custom buckets (to the
    last bit or so: fraction x count). A histogram that observed nothing has no fraction (NaN): it
    counts 0 there, as the classic bucket's rate does. Neither NaN nor no result: a NaN poisons a
    sum, and a missing sample drops out of a window's avg_over_time while the count's 0 stays in,
    so an SLO's good events would be averaged over fewer samples than its valid ones."""
    on_ = b.labels(on)
    return (
        f"(\n  histogram_fraction(0, {bound!r}, {hist})\n* on ({on_})\n  (histogram_count({hist}) > 0)\n"
        f"or on ({on_})\n  (histogram_count({hist}) == 0)\n)"
    )


def _bound(matchers: str) -> float | None:
    """The bucket bound an `le` matcher selects (`le="0.5"`, or `le=~"5|5\\.0"` of one bound)."""
    for label, op, value in b.parse_matchers(matchers) if matchers.strip() else []:
        if label == LE and op in ("=", "=~"):
            return float(value.split("|")[0])
    return None


def _without_le(matchers: str) -> str:
    parts = b.parse_matchers(matchers) if matchers.strip() else []
    return ", ".join(f'{label}{op}"{value}"' for label, op, value in parts if label != LE)
