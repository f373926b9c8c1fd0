"""`servewatch lint`: run the PromQL checks over rule files or single expressions."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from .. import catalog
from .engine import CHECKS, LintContext, lint
from ..spec.schema import seconds


def rule_exprs(path: Path) -> list[tuple[str, str]]:
    """(rule name, expr) from a plain rule file or a PrometheusRule manifest."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"servewatch: error: cannot read {path}: {exc}") from None
    groups = (data.get("spec") or data).get("groups") or []
    return [
        (r.get("record") or r.get("alert") or "?", r.get("expr", ""))
        for g in groups
        for r in g.get("rules", [])
    ]


def context_for(specs: Path | None) -> LintContext:
    ctx = LintContext(catalog.load())
    if specs and specs.is_dir():
        from ..spec.loader import load

        spec = load(specs)
        ctx.records = {s.record for s in spec.signals.values()}
        ctx.min_range_s = 4 * seconds(spec.config.scrape_interval)
    return ctx


def cmd_lint(args) -> int:
    ctx = context_for(Path(args.specs) if args.specs else None)
    disable = set(args.disable or [])
    unknown = disable - set(CHECKS)
    if unknown:
        print(
            f"servewatch: error: unknown check(s) {', '.join(sorted(unknown))}; known: {', '.join(CHECKS)}",
            file=sys.stderr,
        )
        return 2
    items: list[tuple[str, str]] = [("--expr", e) for e in args.expr or []]
    paths = [Path(p) for p in args.files] or ([] if items else sorted(Path("rules").glob("*.rules.yaml")))
    for path in paths:
        items.extend((f"{path}: {name}", expr) for name, expr in rule_exprs(path))
    count = 0
    for where, expr in items:
        for problem in lint(expr, ctx, disable):
            print(f"{where}: {problem}")
            count += 1
    print(f"servewatch: {len(items)} expressions checked, {count} problem(s)", file=sys.stderr)
    return 1 if count else 0


def add_cli(sub) -> None:
    p = sub.add_parser(
        "lint", help="check PromQL in rule files (default: rules/*.rules.yaml) against the catalogs"
    )
    p.add_argument("files", nargs="*", help="rule files (plain or PrometheusRule)")
    p.add_argument("--expr", action="append", help="an expression to check (repeatable)")
    p.add_argument(
        "--specs",
        default="specs",
        help="specs folder for recording-rule names and scrape interval ('' to skip)",
    )
    p.add_argument("--disable", action="append", metavar="CHECK", help=f"skip a check: {', '.join(CHECKS)}")
    p.set_defaults(func=cmd_lint)
