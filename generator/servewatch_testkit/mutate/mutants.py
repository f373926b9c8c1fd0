"""Every mutant of a rule set: each operator applied to each rule, with a stable id and a description.

An id is `<rule key>/<operator>/<6 hex digits>`, the digits a hash of the rule key, the operator and
the text before and after the change (a second identical change in the same rule gets `.2`, ...).
It does not move when other rules or other parts of the rule change, and it does change when the
changed text does: a human's note on why a mutant is equivalent (bench/mutation/equivalent.yaml) then
no longer matches and is reported as stale instead of silently covering a different mutant.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import tree
from .operators import OPERATORS, Change, Context
from .rules import Rule, load


@dataclass(frozen=True)
class Mutant:
    id: str
    rule: Rule
    operator: str
    description: str
    expr: str | None  # the rule's new expression (None: unchanged)
    for_: str | None  # the rule's new `for` (None: unchanged, "0s": removed)
    invalid: str | None = None  # why it is not run (not valid PromQL), None when it is


@dataclass(frozen=True)
class Unmutated:
    rule: Rule
    reason: str


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:6]


def _mutant(rule: Rule, operator: str, change: Change, ident: str) -> Mutant:
    if change.for_ is not None:
        return Mutant(ident, rule, operator, change.description, None, change.for_)
    invalid = None if tree.reparses(change.root) else "the printed expression does not parse back"
    return Mutant(ident, rule, operator, change.description, tree.render(change.root), None, invalid)


def for_rules(rules: list[Rule], ctx: Context | None = None) -> tuple[list[Mutant], list[Unmutated]]:
    """The mutants of these rules, in rule order then operator order, and the rules left alone."""
    ctx = ctx or Context(records=frozenset(r.name for r in rules if r.kind == "record"))
    mutants: list[Mutant] = []
    skipped: list[Unmutated] = []
    for rule in rules:
        try:
            root = tree.parse(rule.expr)
        except tree.Unsupported as exc:
            skipped.append(Unmutated(rule, f"not mutated: {exc}"))
            continue
        seen: Counter[str] = Counter()
        for op in OPERATORS:
            for change in op.changes(rule, root, ctx):
                ident = f"{rule.key}/{op.name}/{_digest(rule.key, op.name, change.old, change.new)}"
                seen[ident] += 1
                if seen[ident] > 1:
                    ident += f".{seen[ident]}"
                mutants.append(_mutant(rule, op.name, change, ident))
    return mutants, skipped


def generate(rules_dir: Path, ctx: Context | None = None) -> tuple[list[Mutant], list[Unmutated]]:
    return for_rules(load(rules_dir), ctx)
