"""match-not-unique: matching on labels that do not tell one GPU or engine from another.

`gpu` (and `device`, `pci_bus_id`) repeat on every host, MIG instances of one GPU share `UUID`,
and vLLM's `engine` is "0" on every server: matching on those alone pairs the wrong series, or
fails the whole rule with "many-to-many matching not allowed". Two places are read: the labels of
on(...) (and of a by(...) that prepares a side for matching), and a side that was not aggregated,
whose series are per GPU or per engine, so on(...) must name that identity (facts.py).

A set operation (and/or/unless) one of whose sides reads only whole GPUs (`GPU_I_ID=""`) may match
on the GPU without GPU_I_ID: `UUID` names one whole GPU, and the other side's series, several per
key, are matched with the GPU they belong to (a whole GPU that reports as MIG instances now). So may
`x unless on (UUID) group by (UUID) (...)`: it drops every part whose physical GPU still reports.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..facts import IDENTITY_NOUN, identity_gaps, identity_sources, partial_key_gaps, whole_gpus_only
from ..findings import Severity
from ..flow import flow
from . import Check


def _operand(side):
    """The expression a side matches with, through parentheses and a `> 0` style filter."""
    side = tree.strip(side)
    while isinstance(side, pp.BinaryExpr) and tree.is_scalar(side.rhs):
        side = tree.strip(side.lhs)
    return side


def _label_lists(node, labels):
    """(what, labels, expression) for the on(...) list and the by(...) of each prepared side."""
    yield f"on ({', '.join(labels)})", labels, node
    for side in (node.lhs, node.rhs):
        operand = _operand(side)
        if isinstance(operand, pp.AggregateExpr) and (grouping := tree.agg_labels(operand)):
            if grouping[0] == "by":
                yield f"{tree.op(operand)} by ({', '.join(grouping[1])})", grouping[1], operand


def _unless_gpu_reports(node, labels) -> bool:
    """`x unless on (UUID) group by (UUID) (...)`: drop every part whose physical GPU still reports
    (GPUMissing: a MIG re-partition keeps its UUID). One right series per key, by construction."""
    right = _operand(node.rhs)
    if tree.op(node) != "unless" or not isinstance(right, pp.AggregateExpr):
        return False
    grouping = tree.agg_labels(right)
    return bool(grouping) and grouping[0] == "by" and set(grouping[1]) == labels


def _sides_needing_unique(node):
    card = tree.cardinality(node)
    if card == "many-to-one":
        return [("right", node.rhs)]
    if card == "one-to-many":
        return [("left", node.lhs)]
    return [("left", node.lhs), ("right", node.rhs)]


def _problems(node, ctx):
    matched = tree.matching_labels(node)
    if matched is None or matched[0] != "on":
        return
    labels = set(matched[1])
    flagged = set()  # sources whose label list is already reported
    whole = tree.op(node) in tree.SET_OPS and any(whole_gpus_only(side) for side in (node.lhs, node.rhs))
    whole = whole or _unless_gpu_reports(node, labels)
    for what, key, expr in _label_lists(node, matched[1]):
        for source in sorted(identity_sources(expr, ctx)):
            if gaps := partial_key_gaps(set(key), source, whole):
                flagged.add(source)
                yield CHECK.problem(
                    f"{what} does not name one {IDENTITY_NOUN[source]}: {'; '.join(gaps)}",
                    "match on the full identity, e.g. on (UUID, GPU_I_ID) for GPUs, "
                    "on (namespace, pod, engine) for vLLM engines",
                )
    if tree.op(node) in tree.SET_OPS:
        return  # and/or/unless tolerate several series per key
    for name, side in _sides_needing_unique(node):
        possible = flow(side, ctx)
        if possible.anything or not possible.foreign:
            continue  # unknown series, or aggregated: its own labels say what it is unique on
        for source in sorted(identity_sources(side, ctx) - flagged):
            if gaps := identity_gaps(labels, source):
                yield CHECK.problem(
                    f"the {name} side `{tree.short(side, 50)}` has one series per {IDENTITY_NOUN[source]}, "
                    f"and on ({', '.join(matched[1])}) does not tell them apart: {'; '.join(gaps)}",
                    "aggregate that side to the identity first (max by (<identity>) (...)) and match on it",
                )


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if tree.is_vector_match(node):
            yield from _problems(node, ctx)


CHECK = Check(
    id="match-not-unique",
    severity=Severity.ERROR,
    summary="Matching names a label set that is unique per GPU / MIG instance / engine.",
    scope="query",
    run=run,
)
