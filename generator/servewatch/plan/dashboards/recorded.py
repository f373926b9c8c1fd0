"""Which recording rules record a rate or a quantile a panel would otherwise compute, read from the
rules' own expressions, so a dashboard uses a rule the moment it exists, whatever it is called.

A rate rule is `sum by (L) (rate(m[w]))`, possibly over a deduplication `max by (E) (...)`, or such
a deduplication alone (one series per engine): it records m's rate per L, and summing it further
(over engines, over le) is still m's rate. A rule that sums a rate rule recorded before it
(`sum by (L) (r)`) records m's rate per L too. A quantile rule is `histogram_quantile(q, <a rate
rule's expression over m_bucket, or that rule's record>)`, possibly guarded by `and on (...)
<observed> > 0`: it records m's q-quantile per L, and can only be read at exactly L. A rule that
filters its series beyond the configured selectors, or adds static labels other than `quantile`,
records a subset and is not used.

With native histograms (config.histograms: native) a bucket-rate rule is `sum by (L) (avg by (E)
(rate(m[w])))` over the native series `m`: it is taken as recording m_bucket's rates per L and `le`,
which is what the classic rule records, so panels ask for bucket rates the same way in both forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import promql_parser as pp

from ...promql import builders as promql

OPS = {"=": "MatchOp.Equal", "!=": "MatchOp.NotEqual", "=~": "MatchOp.Re", "!~": "MatchOp.NotRe"}


@dataclass(frozen=True)
class RateRule:
    record: str
    metric: str  # the counter (or _bucket series) whose rate it records
    labels: frozenset[str]  # one series per value of these


@dataclass(frozen=True)
class QuantileRule:
    record: str
    metric: str  # the histogram
    quantile: float
    labels: frozenset[str]  # one series per value of these (le aggregated away)
    static: tuple[tuple[str, str], ...]  # the rule's own labels (e.g. quantile="0.5")


def _strip(node):
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


def _grouping(node) -> list[str] | None:
    if not (isinstance(node, pp.AggregateExpr) and node.modifier and str(node.modifier.type).endswith("By")):
        return None
    return list(node.modifier.labels)


def _whole(node, known: dict[str, RateRule]) -> RateRule | None:
    """The rate rule whose record `node` selects, unfiltered; None for anything else."""
    node = _strip(node)
    if isinstance(node, pp.VectorSelector) and node.name in known and not node.matchers.matchers:
        return known[node.name]
    return None


def _rate(
    node, engine: set[str], plain: Callable[[str], set], known: dict[str, RateRule], native=None
) -> tuple[str, frozenset[str]] | None:
    """(metric, labels) of a rate-rule expression, or None."""
    node = _strip(node)
    if (read := _whole(node, known)) is not None:
        return read.metric, read.labels
    by = _grouping(node)
    if by is None:
        return None
    inner = _strip(node.expr)
    op = str(node.op)
    dedups = ("max", "avg") if native else ("max",)  # native histograms are deduplicated by avg
    if op == "sum" and (read := _whole(inner, known)) is not None:
        return (read.metric, frozenset(by)) if set(by) <= read.labels else None
    if op == "sum" and _grouping(inner) is not None and str(inner.op) in dedups:
        if not set(_grouping(inner)) >= engine:
            return None
        inner = _strip(inner.expr)
    elif op in dedups and not set(by) >= engine:  # a max over engines is not a rate any more
        return None
    elif op not in ("sum", *dedups):
        return None
    if not (isinstance(inner, pp.Call) and inner.func.name == "rate"):
        return None
    selector = inner.args[0].vector_selector
    matchers = {(m.name, str(m.op), m.value) for m in selector.matchers.matchers}
    if not matchers <= plain(selector.name):
        return None
    if native and native(selector.name):
        return f"{selector.name}_bucket", frozenset([*by, "le"])
    return selector.name, frozenset(by)


def rules(records, builder) -> tuple[list[RateRule], list[QuantileRule]]:
    """The rate and quantile rules among `records` (RecordRule-like: record, expr, labels), for the
    model's SignalBuilder (its engine identity and configured selectors)."""
    engine = set(builder.labels.identity("engine"))
    selectors = lambda metric: plain_matchers(builder, metric)  # noqa: E731
    hist = builder.histograms
    native = hist.is_histogram if hist.form == "native" else None
    rates, quantiles = [], []
    known: dict[str, RateRule] = {}  # the rate rules so far: a rule may read one recorded before it
    for rule in records:
        node = _strip(pp.parse(rule.expr))
        static = dict(rule.labels)
        if isinstance(node, pp.BinaryExpr) and str(node.op) == "and":  # an `observed > 0` guard
            node = _strip(node.lhs)
        if isinstance(node, pp.Call) and node.func.name == "histogram_quantile":
            found = _rate(node.args[1], engine, selectors, known, native)
            if found and found[0].endswith("_bucket") and set(static) <= {"quantile"}:
                metric, labels = found
                quantiles.append(
                    QuantileRule(
                        rule.record,
                        metric.removesuffix("_bucket"),
                        float(node.args[0].val),
                        labels - {"le"},
                        tuple(sorted(static.items())),
                    )
                )
        elif not static:
            found = _rate(node, engine, selectors, known, native)
            if found:
                rates.append(RateRule(rule.record, *found))
                known.setdefault(rule.record, rates[-1])
    return rates, quantiles


def plain_matchers(builder, metric: str) -> set[tuple[str, str, str]]:
    """The matchers the configured selector of `metric`'s source puts on it: all a rule's selector may
    carry and still record every series."""
    text = builder.config.selector(builder.source(metric))
    return {(name, OPS[op], value) for name, op, value in promql.parse_matchers(text)}
