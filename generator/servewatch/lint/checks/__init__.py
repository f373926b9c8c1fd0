"""The checks, one module each, behind one interface (pint's shape).

A check is a `Check`: an id, a severity, a one-line summary, a scope and a `run` function.

  scope "query"      run(query: Query, ctx) -> problems              any PromQL: rules, panels, --expr
  scope "rule"       run(rule: Rule, ctx) -> problems                one alerting or recording rule
  scope "rules"      run(rules: list[Rule], ctx) -> problems         every rule read, for duplicates
  scope "dashboard"  run(dashboard: LintDashboard, ctx) -> problems  one Grafana dashboard

A query check may limit the queries it reads by their origin (`origins`). docs/lint.md has one
section per check with a failing and a passing example; tests/test_lint_docs.py lints them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Iterable

from ..findings import LintLocation, Problem, Severity
from ..subjects import ORIGINS

SCOPES = ("query", "rule", "rules", "dashboard")

# In the order they run and are documented.
MODULES = (
    "syntax",
    "metric_known",
    "label_unknown",
    "counter_rate",
    "rate_gauge",
    "rate_window",
    "explicit_matching",
    "match_not_unique",
    "guarded_division",
    "quantile_le",
    "bucket_layout_mix",
    "classic_on_native",
    "saturation_avg",
    "rate_interval",
    "absent_for",
    "noisy_without_for",
    "alert_metadata",
    "template_labels",
    "duplicate_rule",
    "duplicate_expr",
    "variable_undefined",
    "variable_unused",
    "datasource_hardcoded",
    "unit_mismatch",
    "reduce_sum_gauge",
    "heatmap_bucket_mix",
    "angular_panel",
    "panel_overlap",
)


@dataclass(frozen=True)
class Check:
    id: str
    severity: Severity
    summary: str
    scope: str
    run: Callable[..., Iterable[Problem]]
    origins: tuple[str, ...] = ORIGINS

    def problem(self, message: str, fix: str | None = None, at: LintLocation | None = None) -> Problem:
        return Problem(self.id, message, fix, at)


def _load() -> dict[str, Check]:
    checks = {}
    for name in MODULES:
        check = importlib.import_module(f"{__name__}.{name}").CHECK
        assert check.scope in SCOPES and check.id not in checks, check.id
        checks[check.id] = check
    return checks


ALL: dict[str, Check] = _load()
