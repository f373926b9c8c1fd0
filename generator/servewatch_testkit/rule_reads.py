"""Only the series some rule reads: less data to write, backfill and load into a test's Prometheus.

A test that queries rules (or the expressions of rule files) on a real Prometheus cannot see a series
no rule selects, so leaving it out changes no answer; in the incident scenarios those are more than
half of the data.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import yaml

from servewatch import rule_slices

from .synth.scenario import Scenario

__all__ = ["read_by_rules", "selected_names"]


def selected_names(paths: Iterable[str | os.PathLike]) -> set[str] | None:
    """The metric names the rules of the files at ``paths`` select; None when a selector names none
    (it could match any series)."""
    try:
        return {
            name
            for path in paths
            for group in yaml.safe_load(Path(path).read_text())["groups"]
            for rule in group["rules"]
            for name in rule_slices.read_names(rule["expr"])
        }
    except rule_slices.Unsliceable:
        return None


def read_by_rules(sc: Scenario, names: set[str] | None) -> Scenario:
    """``sc`` without the series whose name is not in ``names`` (all of it when ``names`` is None)."""
    return sc if names is None else replace(sc, series=tuple(s for s in sc.series if s.name in names))
