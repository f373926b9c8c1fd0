"""`servewatch lint`: check rule files, dashboards and expressions; exit codes a CI can gate on.

Exit codes: 0 nothing at or above --fail-on; 1 findings at or above --fail-on; 2 a usage mistake
or an input that cannot be read as a rule file or a dashboard (docs/lint.md).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SpecErrors
from . import report, settings
from .findings import Severity

if TYPE_CHECKING:  # the checks, inputs and runner are imported when a lint runs, not for --help
    from .facts import LintContext

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
DEFAULT_GLOB = "rules/*.rules.yaml"


def _seconds(duration: str) -> float:
    import promql_parser as pp

    return pp.parse_duration(duration).total_seconds()


def build_context(specs: str | None, scrape_interval: str | None) -> LintContext:
    """The catalogs, plus the specs' recording rules and scrape interval when a specs folder exists."""
    from .. import catalog
    from .facts import LintContext, RecordDef

    ctx = LintContext(catalog.load())
    interval = None
    if specs and Path(specs).is_dir():
        from ..model import Model
        from ..spec.loader import load

        spec = load(Path(specs))
        for record in Model(spec).records():
            ctx.add_record(RecordDef(record.record, record.expr, tuple(sorted(record.labels.items()))))
        interval = _seconds(spec.config.scrape_interval)
    if scrape_interval:
        interval = _seconds(scrape_interval)
    if interval:
        ctx.scrape_interval_s, ctx.min_range_s = interval, 4 * interval
    return ctx


def _check_ids(values: list[str] | None) -> list[str]:
    return [v for value in values or [] for v in value.replace(",", " ").split()]


def _unknown_ids(ids: list[str]) -> list[str]:
    from .checks import ALL

    out = []
    for check in ids:
        if check not in ALL:
            close = difflib.get_close_matches(check, sorted(ALL), n=1)
            out.append(f"unknown check {check!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
    return out


def _error(message: str) -> int:
    print(f"servewatch: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _settings(path: str | None) -> settings.LintSettings:
    from .checks import ALL

    if path:
        return settings.load(Path(path), set(ALL))
    default = Path(settings.DEFAULT_FILE)
    return settings.load(default, set(ALL)) if default.is_file() else settings.LintSettings()


def list_checks() -> str:
    from .checks import ALL

    width = max(map(len, ALL))
    return "\n".join(
        f"{c.id:<{width}}  {str(c.severity):<7}  {c.scope:<9}  {c.summary}" for c in ALL.values()
    )


def cmd_lint(args) -> int:
    from . import runner
    from .inputs import discover

    if args.list_checks:
        print(list_checks())
        return EXIT_CLEAN
    enable, disable = _check_ids(args.enable), _check_ids(args.disable)
    if unknown := _unknown_ids(enable + disable):
        return _error("; ".join(unknown) + " (servewatch lint --list-checks)")
    try:
        chosen = runner.select(enable, disable, _settings(args.config))
    except SpecErrors as exc:
        for e in exc.errors:
            print(f"servewatch: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    exprs = args.expr or []
    given = args.paths or ([] if exprs else sorted(str(p) for p in Path(".").glob(DEFAULT_GLOB)))
    files, missing = discover(given)
    ctx = build_context(args.specs, args.scrape_interval)
    if args.prometheus:
        from ..investigate.cli import connect
        from ..investigate.client import InvestigateError
        from .live import native_histograms

        try:
            with connect(args) as client:
                ctx.native_histograms = native_histograms(client, ctx.catalog)
        except InvestigateError as exc:
            return _error(str(exc))
    result = runner.run(files, exprs, ctx, chosen)
    for path in missing:
        result.findings.insert(0, runner_missing(path))
    fail_on = Severity.parse(args.fail_on)
    sys.stdout.write(report.RENDER[args.format](result, fail_on))
    counts = report.summary_counts(result)
    code = (
        EXIT_ERROR
        if result.input_errors
        else EXIT_FINDINGS
        if any(f.severity >= fail_on for f in result.findings)
        else EXIT_CLEAN
    )
    verdict = {EXIT_CLEAN: "passed", EXIT_FINDINGS: "failed", EXIT_ERROR: "failed: unreadable input"}[code]
    print(
        f"servewatch lint: {counts['files']} files, {counts['rules']} rules, "
        f"{counts['dashboards']} dashboards, {counts['queries']} queries: "
        f"{counts['error']} errors, {counts['warning']} warnings, "
        f"{counts['info']} info: {verdict} (--fail-on {fail_on})",
        file=sys.stderr,
    )
    return code


def runner_missing(path: str):
    from . import runner
    from .findings import LintFinding, LintLocation

    return LintFinding(LintLocation(path), runner.INPUT_CHECK, Severity.ERROR, "no such file or folder")


def add_cli(sub) -> None:
    p = sub.add_parser(
        "lint",
        help="check rule files, Grafana dashboards and PromQL against the vLLM/DCGM catalogs",
        description="Lint Prometheus rules (plain, PrometheusRule, Mimir), Grafana dashboards (any "
        "delivery form) and expressions. Exit codes: 0 clean, 1 findings at or above --fail-on, "
        "2 usage error or unreadable input. Checks: docs/lint.md.",
    )
    p.add_argument("paths", nargs="*", help=f"files or folders (default: {DEFAULT_GLOB})")
    p.add_argument("--expr", action="append", metavar="PROMQL", help="an expression to check (repeatable)")
    p.add_argument(
        "--specs",
        default="specs",
        help="specs folder for recording rules and the scrape interval ('' to skip; default: specs)",
    )
    p.add_argument("--scrape-interval", metavar="DURATION", help="scrape interval for rate-window/absent-for")
    p.add_argument("--format", choices=report.FORMATS, default="text", help="output format (default: text)")
    p.add_argument(
        "--fail-on",
        choices=[str(s) for s in Severity],
        default="warning",
        help="exit 1 on findings of this severity or worse (default: warning)",
    )
    p.add_argument("--disable", action="append", metavar="CHECK", help="skip checks (repeatable, comma list)")
    p.add_argument("--enable", action="append", metavar="CHECK", help="run only these checks (repeatable)")
    p.add_argument(
        "--config", metavar="FILE", help=f"lint settings (default: ./{settings.DEFAULT_FILE} if present)"
    )
    p.add_argument("--list-checks", action="store_true", help="list the checks and exit")
    from ..investigate.cli import add_connection_args

    add_connection_args(p)  # --prometheus: which histograms it stores native (classic-on-native)
    for action in p._actions:  # asked only when given: an environment default would query on every run
        if "--prometheus" in action.option_strings:
            action.default = None
            action.help = "a Prometheus to ask which histograms it stores native (check classic-on-native)"
    p.set_defaults(func=cmd_lint)
