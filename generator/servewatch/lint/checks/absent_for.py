"""absent-for: an alert on absent() waits before it fires.

Right after a Prometheus restart or a target's first scrape nothing is present yet, so absent()
is briefly true everywhere: without `for` (at least 2 scrape intervals) the alert fires falsely.
"""

from __future__ import annotations

import promql_parser as pp

from ...promql import tree
from ..findings import Severity
from . import Check


def for_seconds(duration: str | None) -> float:
    if not duration:
        return 0.0
    try:
        return pp.parse_duration(str(duration)).total_seconds()
    except Exception:  # an invalid `for` is promtool's to report
        return 0.0


def run(rule, ctx):
    if rule.kind != "alert" or rule.query.ast is None:
        return
    calls = {tree.func(n) for n, _ in tree.walk(rule.query.ast)} & {"absent", "absent_over_time"}
    if not calls:
        return
    needed = 2 * ctx.scrape_interval_s if ctx.scrape_interval_s else 0.0
    waited = for_seconds(rule.for_)
    if waited == 0 or waited < needed:
        fn = sorted(calls)[0]
        minimum = f"at least {int(needed)}s (2 scrape intervals)" if needed else "a few scrape intervals"
        yield CHECK.problem(
            f"alert {rule.name} uses {fn}() " + (f"with for: {rule.for_}" if rule.for_ else "without for"),
            f"set for: to {minimum}, so a restart or a slow first scrape does not fire it",
            at=rule.at("for"),
        )


CHECK = Check(
    id="absent-for",
    severity=Severity.WARNING,
    summary="Alerts using absent() have a `for` of at least 2 scrape intervals.",
    scope="rule",
    run=run,
)
