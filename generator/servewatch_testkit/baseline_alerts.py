"""The alerts a scenario must run through promtool itself: those whose inputs differ from a baseline's.

promtool evaluates an alert from the series that its expression and the records it reads (directly
or through records, rule_reads.alerts_closure) select, on a simulated clock that starts at the first
sample whatever the scenario. If every name those rules read carries the very same series (label
sets and values) in a scenario as in a baseline on the same grid, the alert's states are the
same in both runs, evaluation by evaluation. That holds for alerts on absence too (absent(),
`unless`, `up == 0`): a series missing or added under a name the alert reads makes that name
differ, so the alert runs. A scenario's run therefore needs only the alerts that read a changed
name; the states of the others are the baseline's run's. A rule that reads ALERTS (another alert's
states) or a name that cannot be followed makes every alert run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from servewatch.rule_slices import ALERT_SERIES

from .promtool_alerts import Labels
from .rule_reads import alerts_closure, names_read
from .synth.scenario import Scenario

__all__ = ["changed_names", "inputs_by_alert", "merged", "to_run"]


def inputs_by_alert(rule_files: Iterable[str | os.PathLike]) -> dict[str, set[str]] | None:
    """alert name -> the metric names its rules read, directly or through records; None when some
    rule's reads cannot be followed or an alert reads alert states."""
    rule_files = list(rule_files)
    names = {r["alert"] for g in alerts_closure(rule_files) for r in g["rules"] if "alert" in r}
    out = {}
    for name in sorted(names):
        read = names_read(alerts_closure(rule_files, {name}))
        if read is None or read & set(ALERT_SERIES):
            return None
        out[name] = read
    return out


def changed_names(scenario: Scenario, baseline: Scenario) -> set[str] | None:
    """The names whose series differ between the two (a label set or a value); None when their grids
    differ, so that every name may."""
    if (scenario.steps, scenario.step) != (baseline.steps, baseline.step):
        return None

    def by_name(sc: Scenario) -> dict[str, set]:
        out: dict[str, set] = {}
        for s in sc.series:
            out.setdefault(s.name, set()).add((s.labels, tuple(s.values)))
        return out

    mine, theirs = by_name(scenario), by_name(baseline)
    return {n for n in mine.keys() | theirs.keys() if mine.get(n) != theirs.get(n)}


def to_run(inputs: dict[str, set[str]] | None, changed: set[str] | None) -> set[str] | None:
    """The alerts that read a changed name; None (every alert) when either is unknown."""
    if inputs is None or changed is None:
        return None
    return {alert for alert, read in inputs.items() if read & changed}


def merged(
    own: dict[Labels, list[float]], baseline: dict[Labels, list[float]], ran: set[str] | None
) -> dict[Labels, list[float]]:
    """A scenario's firing: its own run's for the alerts in ``ran`` (all when None), the baseline's
    for the others."""
    if ran is None:
        return own
    return own | {labels: t for labels, t in baseline.items() if dict(labels)["alertname"] not in ran}
