"""The unit of a query's result, read from the catalogs, and the Grafana units that display it.

Only what is sure is inferred: a catalog metric's unit survives selection, max/min/avg/sum, the
*_over_time that keep values, histogram_quantile, and filtering; rate() of bytes is bytes/s; a
ratio of two series in the same unit is a 0-1 ratio; `ratio * 100` is a percent. Anything else
(other arithmetic with a number, products, unknown series) has no unit, and no claim is made.
"""

from __future__ import annotations

import promql_parser as pp

from ..promql import tree
from .facts import LintContext, lineage

# Grafana unit ids by quantity (Grafana's unit picker).
QUANTITIES = {
    "data": {
        "bits", "decbits", "bytes", "decbytes", "kbytes", "deckbytes", "mbytes", "decmbytes",
        "gbytes", "decgbytes", "tbytes", "dectbytes", "pbytes", "decpbytes",
    },
    "data rate": {
        "bps", "Bps", "binbps", "binBps", "Kbits", "KBs", "Kibits", "KiBs", "Mbits", "MBs", "Mibits",
        "MiBs", "Gbits", "GBs", "Gibits", "GiBs", "Tbits", "TBs", "Tibits", "TiBs",
    },
    "time": {
        "ns", "µs", "ms", "s", "m", "h", "d", "dtdurationms", "dtdurations", "dthms", "dtdhms",
        "clockms", "clocks", "timeticks",
    },
    "percent": {"percent", "percentunit"},
    "temperature": {"celsius", "fahrenheit", "kelvin"},
    "power": {"mwatt", "watt", "kwatt", "megwatt", "gwatt"},
    "frequency": {"hertz", "rothz", "rotkhz", "rotmhz", "rotghz"},
}  # fmt: skip

# catalog unit -> (quantity, the Grafana units that show it at the right scale, what it is)
RIGHT_UNITS = {
    "MiB": ("data", {"mbytes"}, "MiB (mebibytes)"),
    "bytes": ("data", {"bytes", "decbytes"}, "bytes"),
    "bytes_per_second": ("data rate", {"Bps", "binBps"}, "bytes per second"),
    "seconds": ("time", {"s", "dtdurations", "dthms", "dtdhms", "clocks"}, "seconds"),
    "ratio": ("percent", {"percentunit"}, "a 0-1 ratio"),
    "percent": ("percent", {"percent"}, "a 0-100 percent"),
    "celsius": ("temperature", {"celsius"}, "degrees Celsius"),
    "watts": ("power", {"watt"}, "watts"),
    "MHz": ("frequency", {"rotmhz"}, "MHz"),
}
KEEP_UNIT_AGGS = {"sum", "min", "max", "avg", "topk", "bottomk", "limitk", "limit_ratio", "quantile"}
KEEP_UNIT_FUNCS = {
    "abs", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max", "sort", "sort_desc",
    "sort_by_label", "sort_by_label_desc", "label_replace", "label_join", "last_over_time",
    "max_over_time", "min_over_time", "avg_over_time", "quantile_over_time", "increase", "delta",
}  # fmt: skip
PER_SECOND = {"bytes": "bytes_per_second"}


def quantity_of(grafana_unit: str) -> str | None:
    return next((q for q, units in QUANTITIES.items() if grafana_unit in units), None)


def mismatch(catalog_unit: str | None, grafana_unit: str | None) -> tuple[str, str] | None:
    """(what the values are, the right Grafana unit) when `grafana_unit` misreads `catalog_unit`."""
    if not catalog_unit or not grafana_unit or catalog_unit not in RIGHT_UNITS:
        return None
    _, right, what = RIGHT_UNITS[catalog_unit]
    if grafana_unit in right or quantity_of(grafana_unit) is None:
        return None  # right, or a unit that claims nothing (short, none, reqps, ...)
    return what, sorted(right)[0]


def unit_of(node, ctx: LintContext, _seen: frozenset[str] = frozenset()) -> str | None:
    node = tree.strip(node)
    if isinstance(node, pp.MatrixSelector):
        node = node.vector_selector
    if isinstance(node, (pp.UnaryExpr, pp.SubqueryExpr)):
        return unit_of(node.expr, ctx, _seen)
    if isinstance(node, pp.VectorSelector):
        return _selector_unit(node, ctx, _seen)
    if isinstance(node, pp.AggregateExpr):
        return unit_of(node.expr, ctx, _seen) if tree.op(node) in KEEP_UNIT_AGGS else None
    if isinstance(node, pp.Call):
        return _call_unit(node, ctx, _seen)
    if isinstance(node, pp.BinaryExpr):
        return _binary_unit(node, ctx, _seen)
    return None


def _selector_unit(node: pp.VectorSelector, ctx: LintContext, seen: frozenset[str]) -> str | None:
    metric = ctx.metric(node.name)
    if metric is not None:
        if metric.type == "histogram" and not node.name.endswith("_sum"):
            return None  # _bucket and _count count observations
        return metric.unit
    if node.name in seen or not ctx.record_asts(node.name or ""):
        return None
    units = {unit_of(ast, ctx, seen | {node.name}) for ast in ctx.record_asts(node.name)}
    return units.pop() if len(units) == 1 else None


def _call_unit(node: pp.Call, ctx: LintContext, seen: frozenset[str]) -> str | None:
    name = node.func.name
    vectors = [a for a in node.args if not tree.is_scalar(a)]
    if not vectors:
        return None
    if name == "histogram_quantile":
        units = {m.unit for m in lineage(vectors[0], ctx) if m.type == "histogram"}
        return units.pop() if len(units) == 1 else None
    if name in ("rate", "irate"):
        return PER_SECOND.get(unit_of(vectors[0], ctx, seen))
    return unit_of(vectors[0], ctx, seen) if name in KEEP_UNIT_FUNCS else None


def _binary_unit(node: pp.BinaryExpr, ctx: LintContext, seen: frozenset[str]) -> str | None:
    op = tree.op(node)
    lhs_scalar, rhs_scalar = tree.is_scalar(node.lhs), tree.is_scalar(node.rhs)
    if op in tree.COMPARISONS and not (node.modifier is not None and node.modifier.return_bool):
        return unit_of(node.rhs if lhs_scalar else node.lhs, ctx, seen)
    if lhs_scalar or rhs_scalar:
        number = tree.strip(node.lhs if lhs_scalar else node.rhs)
        unit = unit_of(node.rhs if lhs_scalar else node.lhs, ctx, seen)
        value = number.val if isinstance(number, pp.NumberLiteral) else None
        if op in ("+", "-"):
            return unit
        if unit == "ratio" and op == "*" and value == 100:
            return "percent"
        if unit == "percent" and op == "/" and rhs_scalar and value == 100:
            return "ratio"
        return None
    if op == "/" and (mean := _histogram_mean_unit(node, ctx)):
        return mean
    lhs, rhs = unit_of(node.lhs, ctx, seen), unit_of(node.rhs, ctx, seen)
    if op in ("and", "unless"):
        return lhs
    if lhs is None or lhs != rhs:
        return None
    return {"/": "ratio", "+": lhs, "-": lhs, "or": lhs}.get(op)


def _histogram_mean_unit(node: pp.BinaryExpr, ctx: LintContext) -> str | None:
    """rate(h_sum) / rate(h_count): the mean observation, in the histogram's unit."""

    def histograms(side, suffix):
        names = {sel.name for sel in tree.selectors(side)}
        if not names or not all(n and n.endswith(suffix) for n in names):
            return None
        metrics = {ctx.metric(n) for n in names}
        return metrics if None not in metrics and all(m.type == "histogram" for m in metrics) else None

    sums, counts = histograms(node.lhs, "_sum"), histograms(node.rhs, "_count")
    if sums and sums == counts and len({m.unit for m in sums}) == 1:
        return next(iter(sums)).unit
    return None
