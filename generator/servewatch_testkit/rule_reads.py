"""Only the series some rule reads: less data to write, backfill and load into a test's Prometheus.

A test that queries rules (or the expressions of rule files) on a real Prometheus cannot see a series
no rule selects, so leaving it out changes no answer; in the incident scenarios those are more than
half of the data.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import replace
from pathlib import Path

from servewatch import rule_slices, yamlio

from .rule_stages import reads
from .synth.scenario import Scenario

__all__ = ["alerts_closure", "names_read", "read_by_rules", "selected_names"]


def _groups(paths: Iterable[str | os.PathLike]) -> list[dict]:
    return [g for p in paths for g in (yamlio.load(Path(p).read_text()) or {}).get("groups") or []]


def names_read(groups: Iterable[dict]) -> set[str] | None:
    """The metric names the rules of ``groups`` select; None when a selector names none (it could
    match any series)."""
    try:
        return {n for g in groups for r in g.get("rules") or [] for n in rule_slices.read_names(r["expr"])}
    except rule_slices.Unsliceable:
        return None


def selected_names(paths: Iterable[str | os.PathLike]) -> set[str] | None:
    """The metric names the rules of the files at ``paths`` select (see names_read)."""
    return names_read(_groups(paths))


def alerts_closure(paths: Iterable[str | os.PathLike], alerts: Collection[str] | None = None) -> list[dict]:
    """The groups of the rule files at ``paths`` with only their alerts (those named in ``alerts``,
    every one when None) and the records those read, directly or through records; a group left with
    no rule is left out. Nothing else can change those alerts' states."""
    groups = _groups(paths)

    def kept_alert(r: dict) -> bool:
        return "alert" in r and (alerts is None or r["alert"] in alerts)

    rules = [r for g in groups for r in g.get("rules") or [] if "record" in r or kept_alert(r)]
    wanted = {n for r in rules if "alert" in r for n in reads(r["expr"])}
    producers = {r["record"] for r in rules if "record" in r}
    todo = list(wanted & producers)
    while todo:
        name = todo.pop()
        for r in rules:
            if r.get("record") == name:
                for n in reads(r["expr"]) & (producers - wanted):
                    wanted.add(n)
                    todo.append(n)
    kept = [
        {**g, "rules": [r for r in g.get("rules") or [] if kept_alert(r) or r.get("record") in wanted]}
        for g in groups
    ]
    return [g for g in kept if g["rules"]]


def read_by_rules(sc: Scenario, names: set[str] | None) -> Scenario:
    """``sc`` without the series whose name is not in ``names`` (all of it when ``names`` is None)."""
    return sc if names is None else replace(sc, series=tuple(s for s in sc.series if s.name in names))
