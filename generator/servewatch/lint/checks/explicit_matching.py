"""explicit-matching: a binary operation between two vectors names its matching labels.

Implicit matching uses every label: it breaks as soon as one side carries a label the other lacks
(a new exporter label, exported_pod, a recording rule's static label). `or` is exempt: it joins
alternatives that differ in labels on purpose, and so is an operation between two sides that carry
no labels at all (`sum(a) / sum(b)`), where `on (...)` has nothing to match on.
"""

from __future__ import annotations

from ...promql import tree
from ..findings import Severity
from . import Check


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if (
            tree.is_vector_match(node)
            and tree.op(node) != "or"
            and tree.matching(node) is None
            and not (tree.carries_no_labels(node.lhs) and tree.carries_no_labels(node.rhs))
        ):
            yield CHECK.problem(
                f"`{str(node.op)}` between two vectors without on(...) or ignoring(...): "
                f"`{tree.short(node, 60)}`",
                f"name the labels that identify a series on both sides: `{str(node.op)} on (...)`",
            )


CHECK = Check(
    id="explicit-matching",
    severity=Severity.WARNING,
    summary="Binary operations between two vectors say on(...) or ignoring(...).",
    scope="query",
    run=run,
)
