"""rate-interval: rate()/irate()/increase() in a panel use [$__rate_interval].

Grafana sizes $__rate_interval to at least 4 scrapes at every zoom; $__interval shrinks below two
scrapes when zoomed in (empty or noisy graphs, vLLM's performance_statistics.json), and a fixed
[5m] over-smooths when zoomed out and is wrong for another scrape interval. [$__range] is accepted:
it is the "over the whole range" of a stat panel.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check

GOOD = ("$__rate_interval", "${__rate_interval}", "$__range", "${__range}")


def run(query, ctx):
    for node, _ in tree.walk(query.ast):
        if tree.func(node) not in tree.RATE_FUNCS or (ms := tree.range_arg(node)) is None:
            continue
        written = query.windows.get(ms.range)
        if written in GOOD:
            continue
        if written is None:
            what = f"a fixed window [{pp.display_duration(ms.range)}]"
        elif written.strip("${}") == "__interval":
            what = "[$__interval], which is below two scrapes when zoomed in"
        else:
            what = f"[{written}] instead of Grafana's rate window"
        yield CHECK.problem(
            f"{tree.func(node)}() over {what}",
            f"use {tree.func(node)}(...[$__rate_interval])",
        )


CHECK = Check(
    id="rate-interval",
    severity=Severity.WARNING,
    summary="rate()/increase() in dashboards use [$__rate_interval] (not $__interval or a fixed window).",
    scope="query",
    run=run,
    origins=("panel",),
)
