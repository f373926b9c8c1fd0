"""Run the checks over what was read, and keep the findings nobody suppressed.

Suppressions, in order: the selected checks (`--enable`/`--disable`, the settings file's
`disable`), the settings file's per-file `ignore` list, and inline `# servewatch-lint disable`
comments on a rule (or for the whole file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import promql_parser as pp

from . import inputs
from .checks import ALL, Check
from .facts import LintContext, RecordDef
from .findings import LintFinding, LintLocation, Problem, Severity
from .settings import LintSettings
from .subjects import LintDashboard, Query, Rule, parse_query

INPUT_CHECK = "input"  # what cannot be read: an error that no suppression hides


@dataclass
class LintResult:
    findings: list[LintFinding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, what it is)
    queries: int = 0
    rules: int = 0
    dashboards: int = 0

    @property
    def input_errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.check == INPUT_CHECK]


@dataclass
class CheckSelection:
    checks: dict[str, Check]
    settings: LintSettings = field(default_factory=LintSettings)

    def allows(self, check: str, file: str, disabled: Iterable[str] = ()) -> bool:
        return check in self.checks and check not in disabled and not self.settings.ignored(file, check)


def select(
    enable: Iterable[str] = (), disable: Iterable[str] = (), settings: LintSettings | None = None
) -> CheckSelection:
    settings = settings or LintSettings()
    chosen = set(enable) or set(ALL)
    off = set(disable) | settings.disable
    return CheckSelection({k: c for k, c in ALL.items() if k in chosen and k not in off}, settings)


def query_problems(query: Query, ctx: LintContext, checks: dict[str, Check]) -> list[Problem]:
    """Every problem of one query (each once), from the query checks that read queries of its origin."""
    out = []
    for check in checks.values():
        if check.scope != "query" or query.origin not in check.origins:
            continue
        if query.ast is None and check.id != "syntax":
            continue
        out.extend(check.run(query, ctx))
    return list(dict.fromkeys(out))


def shown_as_written(problem: Problem, query: Query) -> Problem:
    """The problem with Grafana's windows back in place of their stand-ins ([1h1s] -> [$__interval])."""
    message, fix = problem.message, problem.fix
    for window, written in query.windows.items():
        shown = pp.display_duration(window)
        message = message.replace(shown, written)
        fix = fix.replace(shown, written) if fix else fix
    return Problem(problem.check, message, fix, problem.at)


def _scoped(checks: dict[str, Check], scope: str) -> list[Check]:
    return [c for c in checks.values() if c.scope == scope]


def learn_records(ctx: LintContext, rules: list[Rule]) -> None:
    for rule in rules:
        if rule.kind == "record":
            record = RecordDef(rule.name, rule.query.text, tuple(sorted(rule.labels.items())))
            if record not in ctx.definitions.get(rule.name, []):
                ctx.add_record(record)


class LintRun:
    def __init__(self, ctx: LintContext, selection: CheckSelection):
        self.ctx = ctx
        self.selection = selection
        self.result = LintResult()

    def report(self, problem: Problem, default: LintLocation, disabled: Iterable[str] = ()) -> None:
        location = problem.at or default
        if self.selection.allows(problem.check, location.file, disabled):
            severity = self.selection.checks[problem.check].severity
            self.result.findings.append(
                LintFinding(location, problem.check, severity, problem.message, problem.fix)
            )

    def input_error(self, file: str, line: int | None, message: str) -> None:
        self.result.findings.append(
            LintFinding(LintLocation(file, line), INPUT_CHECK, Severity.ERROR, message)
        )

    def query(self, query: Query, disabled: Iterable[str] = ()) -> None:
        self.result.queries += 1
        for problem in query_problems(query, self.ctx, self.selection.checks):
            self.report(shown_as_written(problem, query), query.location, set(disabled) | query.disabled)

    def rule(self, rule: Rule) -> None:
        self.result.rules += 1
        self.query(rule.query, rule.disabled)
        for check in _scoped(self.selection.checks, "rule"):
            for problem in check.run(rule, self.ctx):
                self.report(problem, rule.location, rule.disabled)

    def dashboard(self, dashboard: LintDashboard) -> None:
        self.result.dashboards += 1
        for pq in dashboard.queries:
            self.query(pq.query, dashboard.disabled)
        for query in dashboard.variable_queries:
            self.query(query, dashboard.disabled)
        for check in _scoped(self.selection.checks, "dashboard"):
            for problem in check.run(dashboard, self.ctx):
                self.report(problem, dashboard.at(()), dashboard.disabled)

    def rule_set(self, rules: list[Rule]) -> None:
        disabled_at = {(r.location.file, r.location.line): r.disabled for r in rules}
        for check in _scoped(self.selection.checks, "rules"):
            for problem in check.run(rules, self.ctx):
                at = problem.at or rules[0].location
                self.report(problem, at, disabled_at.get((at.file, at.line), ()))


def run(files: list[str], exprs: list[str], ctx: LintContext, selection: CheckSelection) -> LintResult:
    run = LintRun(ctx, selection)
    contents = {}
    for file in files:
        contents[file] = inputs.read(file, set(ALL))
        run.result.files.append(file)
        for line, message in contents[file].problems:
            run.input_error(file, line, message)
        run.result.skipped += [(file, what) for what in contents[file].skipped]
    rules = [rule for c in contents.values() for rule in c.rules]
    learn_records(ctx, rules)
    for rule in rules:
        run.rule(rule)
    if rules:
        run.rule_set(rules)
    for c in contents.values():
        for dashboard in c.dashboards:
            run.dashboard(dashboard)
    for i, expr in enumerate(exprs):
        run.query(parse_query(expr, LintLocation("--expr", i + 1, None, "expression"), "expr"))
    run.result.findings = sorted(set(run.result.findings), key=LintFinding.sort_key)
    return run.result
