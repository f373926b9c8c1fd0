"""Recording rules split into the stages in which promtool can backfill them.

``promtool tsdb create-blocks-from rules`` evaluates each rule against the data the server already
holds, so a rule that reads a record of the same run sees nothing. A live Prometheus has no such
limit: it evaluates a group's rules one after another at one timestamp, and servewatch's rules use
that (a quantile reads its histogram's recorded bucket rates). Backfilling stage by stage gives the
same result: stage 0 holds the recording rules that read only scraped series, stage n those that
read records of earlier stages. Each stage keeps the groups' names and intervals, so written to one
path it is evaluated at the same times as every other stage (Prometheus derives a group's phase
from its name and file).
"""

from __future__ import annotations

from typing import Iterable

import promql_parser as pp

from servewatch.promql import builders as b
from servewatch.promql import tree

__all__ = ["backfilled", "reads", "stages"]


def reads(expr: str) -> set[str]:
    """The metric names an expression selects."""
    return {s.name for s in tree.selectors(pp.parse(expr)) if s.name}


def backfilled(record: str, expr: str) -> str:
    """`expr` as a backfill evaluates it: a memory of `record` without its read of itself."""
    return b.unrolled(record, expr) or expr


def stages(rule_files: Iterable[dict]) -> list[list[dict]]:
    """``[stage][file]``: the parsed rule files (``{"groups": [...]}``) cut into backfill stages, each
    file holding only its recording rules of that stage (alerting rules are not backfilled)."""
    rule_files = list(rule_files)
    exprs: dict[str, list[str]] = {}  # record -> the expressions that produce it
    for body in rule_files:
        for group in body.get("groups") or []:
            for rule in group.get("rules") or []:
                if "record" in rule:
                    exprs.setdefault(rule["record"], []).append(backfilled(rule["record"], rule["expr"]))

    level: dict[str, int] = {}

    def stage_of(expr: str, path: tuple[str, ...]) -> int:
        deps = [name for name in reads(expr) if name in exprs]
        return 1 + max((record_stage(d, path) for d in deps), default=-1)

    def record_stage(record: str, path: tuple[str, ...] = ()) -> int:
        if record in path:
            raise ValueError(f"recording rules read each other in a cycle: {' -> '.join((*path, record))}")
        if record not in level:
            level[record] = max(stage_of(e, (*path, record)) for e in exprs[record])
        return level[record]

    count = 1 + max((record_stage(r) for r in exprs), default=-1)
    out: list[list[dict]] = []
    for n in range(count):
        files = []
        for body in rule_files:
            groups = []
            for group in body.get("groups") or []:
                rules = [
                    {**r, "expr": backfilled(r["record"], r["expr"])}
                    for r in group.get("rules") or []
                    if "record" in r and stage_of(backfilled(r["record"], r["expr"]), ()) == n
                ]
                if rules:
                    groups.append({**{k: v for k, v in group.items() if k != "rules"}, "rules": rules})
            files.append({"groups": groups})
        out.append(files)
    return out
