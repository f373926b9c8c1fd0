"""`python -m servewatch_testkit.mutate` (`make mutate`): mutate the generated rules, run the tests, report.

    --list                 print each mutant's id and change, run nothing
    --only TEXT            run the mutants whose id contains TEXT (repeatable; for development)
    --with-incidents       also run the real-Prometheus incident tests on mutants promtool did not kill
    --jobs N --timeout S   parallel mutants (default 2) and the deadline of each (default 300 s)
    --first-kill           stop each mutant at the first test file that fails
    --whole                run every test file whole, not each test against the rules it observes
    --combine DIR          run nothing: one report from the report.json of runs of parts (repeatable)
    --specs DIR            mutate the rules another specs folder generates, run that build's tests
    --only-new             with --specs: only the rules the checkout's rules/ does not have

A full run writes REPORT.md and report.json to --out (default bench/mutation); a run with --only
or --specs prints the report and writes nothing unless --out is given. The notes on survivors are
read from bench/mutation/ (--notes to read them elsewhere).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from servewatch import tools

from . import mutants as mutants_mod
from . import build, report, rules, runner
from .operators import OPERATORS

DEFAULT_OUT = Path("bench/mutation")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m servewatch_testkit.mutate", description=__doc__.splitlines()[0]
    )
    p.add_argument("--root", type=Path, default=Path("."), help="the servewatch checkout (default: .)")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--only", action="append", default=[], metavar="TEXT", help="ids containing TEXT")
    p.add_argument("--operator", action="append", default=[], choices=[o.name for o in OPERATORS])
    p.add_argument("--with-incidents", action="store_true", help="also run tests/test_alerts_on_incidents.py")
    p.add_argument(
        "--first-kill",
        action="store_true",
        help="stop each mutant at the first test file that fails (faster; killed_by names only that file)",
    )
    p.add_argument(
        "--whole",
        action="store_true",
        help="run every test file whole (by default each test runs against the rules it observes, "
        "and a slice that passed before on the same bytes is not run again)",
    )
    p.add_argument(
        "--combine",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="run nothing: combine the report.json of runs of parts (later DIRs win) into one report",
    )
    p.add_argument(
        "--specs",
        type=Path,
        default=None,
        metavar="DIR",
        help="generate DIR's rules and promtool tests into a scratch folder and mutate those "
        "(the alerts that exist only with config.role, track or client_side; build.py)",
    )
    p.add_argument(
        "--only-new",
        action="store_true",
        help="with --specs: only the mutants of rules the checkout's rules/ does not have",
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant, all its tests")
    p.add_argument(
        "--out", type=Path, default=None, help=f"report folder (default {DEFAULT_OUT} for full runs)"
    )
    p.add_argument(
        "--notes", type=Path, default=None, help=f"equivalent.yaml/gaps.yaml folder (default {DEFAULT_OUT})"
    )
    return p


def _selected(all_mutants: list, only: list[str], operators: list[str]) -> list:
    out = all_mutants
    if only:
        out = [m for m in out if any(t in m.id for t in only)]
    if operators:
        out = [m for m in out if m.operator in operators]
    return out


def _machine() -> str:
    """Cores and CPU model, so a run time can be compared with another machine's."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpu = f"{os.cpu_count()} cores" + (f" ({model})" if model else "")
    return f"{platform.machine()}, {cpu}, Python {platform.python_version()}"


def _selection(only: list[str], operators: list[str], chosen: int, total: int) -> str:
    """Which mutants ran: a report of a subset says so, and which."""
    if chosen == total:
        return f"all {total} mutants"
    parts = [f"ids containing {' or '.join(f'`{t}`' for t in only)}"] if only else []
    parts += [f"operators {', '.join(operators)}"] if operators else []
    return f"{chosen} of {total} mutants ({'; '.join(parts)})"


def _misuse(args) -> str | None:
    if args.only_new and not args.specs:
        return "--only-new goes with --specs DIR"
    if args.specs and args.combine:
        return "--combine takes each part's --specs from its report.json; give no --specs"
    return None


def _no_incidents(args) -> None:
    """No incident test applies to a --specs build: say so, and run its promtool tests only."""
    if args.specs and args.with_incidents:
        print(
            f"mutate: no incident test applies to --specs {args.specs}: {runner.INCIDENT_TESTS} holds "
            "the default specs' alerts and thresholds; running the build's generated promtool tests",
            file=sys.stderr,
        )
        args.with_incidents = False


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    misuse = _misuse(args)
    if misuse:
        print(f"mutate: {misuse}", file=sys.stderr)
        return 2
    _no_incidents(args)
    try:
        if args.combine:
            return _combine(args)
        if not args.specs:
            return _main(args, None)
        with tempfile.TemporaryDirectory(prefix="servewatch-mutate-build-") as scratch:
            build.write(args.specs, Path(scratch))
            return _main(args, Path(scratch))
    except build.BuildError as e:
        print(f"mutate: {e}", file=sys.stderr)
        return 2


def _mutants(root: Path, built: Path | None, only_new: bool) -> tuple[list, list]:
    """The mutants (and the rules left alone) of the checkout's rules, or of a build's."""
    all_mutants, unmutated = mutants_mod.generate((built or root) / "rules")
    if only_new:
        all_mutants = build.only_new(all_mutants, root / "rules")
        keys = {m.rule.key for m in all_mutants}
        unmutated = [u for u in unmutated if u.rule.key in keys]
    return all_mutants, unmutated


def _notes(args, root: Path, all_mutants: list) -> report.Notes:
    """The notes on survivors, less those on the rules of the other build (judged in its report)."""
    notes = report.Notes.load(args.notes or root / DEFAULT_OUT)
    return notes.without_rules(build.rule_keys(root) - {m.rule.key for m in all_mutants})


def _main(args, built: Path | None) -> int:
    """The run on the checkout's rules, or (built) on those of --specs generated into that folder."""
    root = args.root.resolve()
    all_mutants, unmutated = _mutants(root, built, args.only_new)
    chosen = _selected(all_mutants, args.only, args.operator)
    if args.list:
        for m in chosen:
            print(f"{m.id}\t{m.description}" + (f"\t(invalid: {m.invalid})" if m.invalid else ""))
        print(f"{len(chosen)} mutants ({len(all_mutants)} in all)", file=sys.stderr)
        return 0
    notes = _notes(args, root, all_mutants)
    full = len(chosen) == len(all_mutants) and built is None
    out = args.out or (root / DEFAULT_OUT if full else None)
    try:
        tools.find("promtool")
    except tools.ToolError as e:
        print(f"mutate: {e}", file=sys.stderr)
        return 2

    opts = runner.Options(
        root, args.with_incidents, args.jobs, args.timeout, args.first_kill, args.whole, source=built
    )
    started = time.monotonic()
    base = runner.baseline(opts, rules.load(opts.tests_root / "rules"))
    if base.status != "survived":
        print(
            f"mutate: the tests fail on the unmutated rules ({base.status}), so no mutant can be judged:",
            file=sys.stderr,
        )
        for line in base.killed_by or (base.detail,):
            print(f"  {line}", file=sys.stderr)
        return 2
    print(f"baseline: every test passes on the unmutated rules ({base.seconds} s)", file=sys.stderr)
    results = runner.run(opts, chosen, progress=lambda line: print(line, file=sys.stderr))

    run_info = {
        "date": dt.date.today().isoformat(),
        "tests": "promtool unit tests"
        + (" + incident tests on real Prometheus" if args.with_incidents else ""),
        "jobs": args.jobs,
        "first_kill": args.first_kill,
        "whole": args.whole,
        "wall_s": round(time.monotonic() - started),
        "machine": _machine(),
        "selection": _selection(args.only, args.operator, len(chosen), len(all_mutants)),
    }
    if built is not None:
        run_info.update(specs=_shown(args.specs, root), only_new=args.only_new)
        run_info["selection"] += f" of {_scope(run_info)}"
    return _write(out, all_mutants, results, notes, run_info, unmutated)


def _shown(path: Path, root: Path) -> str:
    """A path as the report names it: relative to the checkout when inside it."""
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def _scope(info: dict) -> str:
    """Which rules a run's mutants are of, from its run info."""
    if not info.get("specs"):
        return "the checkout's rules/"
    return f"the rules {'only ' if info.get('only_new') else ''}--specs {info['specs']} generates"


def _builds(info: dict) -> list[dict]:
    """The builds a run's mutants are of: a combined run lists them, a run of its own is of one."""
    if "builds" in info:
        return [{"specs": b.get("specs"), "only_new": bool(b.get("only_new"))} for b in info["builds"]]
    return [{"specs": info.get("specs"), "only_new": bool(info.get("only_new"))}]


def _combine(args) -> int:
    """One report from the runs of parts of the mutants: each mutant's latest result, judged by
    today's notes; mutants of rules that changed since a part ran are left out (their ids differ).
    The mutants counted are those of the builds the parts ran on: the checkout's rules/ when a part
    ran on them, and each part's --specs build, generated again today."""
    root = args.root.resolve()
    results, parts = {}, []
    for folder in args.combine:
        try:
            info, part = report.results_from_json((folder / "report.json").read_text())
        except (OSError, ValueError, KeyError) as e:
            print(f"mutate: {folder / 'report.json'}: not a mutation report ({e})", file=sys.stderr)
            return 2
        results.update(part)
        parts.append(info)
    builds: dict[str, tuple[dict, list, list]] = {}
    for b in (b for info in parts for b in _builds(info)):
        if _scope(b) in builds:
            continue
        if not b["specs"]:
            builds[_scope(b)] = (b, *_mutants(root, None, False))
            continue
        with tempfile.TemporaryDirectory(prefix="servewatch-mutate-build-") as scratch:
            build.write(root / b["specs"], Path(scratch))
            builds[_scope(b)] = (b, *_mutants(root, Path(scratch), b["only_new"]))
    all_mutants, unmutated, seen = [], [], set()
    for _, ms, skipped in builds.values():
        all_mutants += [m for m in ms if m.id not in seen]
        seen |= {m.id for m in ms}
        unmutated += skipped
    results = {i: r for i, r in results.items() if i in seen}
    covered = sum(1 for m in all_mutants if m.id in results)
    scopes = ", ".join(
        f"{sum(1 for m in ms if m.id in results)} of the {len(ms)} mutants of {scope}"
        for scope, (_, ms, _) in builds.items()
    )
    run_info = {
        "date": max(p.get("date", "") for p in parts),
        "tests": " / ".join(sorted({p.get("tests", "?") for p in parts})),
        "jobs": max(p.get("jobs", 0) for p in parts),
        "first_kill": any(p.get("first_kill") for p in parts),
        "wall_s": sum(p.get("wall_s", 0) for p in parts),
        "machine": parts[-1].get("machine", "?"),
        "builds": [b for b, _, _ in builds.values()],
        "selection": f"{covered} of {len(all_mutants)} mutants ({scopes}), combined from {len(parts)} runs: "
        + "; ".join(p.get("selection", "?") for p in parts),
    }
    out = args.out or root / DEFAULT_OUT
    return _write(out, all_mutants, results, _notes(args, root, all_mutants), run_info, unmutated)


def _write(out, all_mutants, results, notes, run_info, unmutated) -> int:
    markdown = report.to_markdown(all_mutants, results, notes, run_info, unmutated)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "REPORT.md").write_text(markdown)
        (out / "report.json").write_text(report.to_json(all_mutants, results, notes, run_info))
        print(f"wrote {out / 'REPORT.md'} and report.json", file=sys.stderr)
    else:
        print(markdown)
    s = report.summarize(all_mutants, results, notes)
    print(
        f"{s['killed']}/{s['valid']} killed ({100 * (s['kill_rate'] or 0):.1f}%), "
        f"{s['equivalent']} equivalent, {s['known_gap']} known gaps, {s['undocumented']} undocumented",
        file=sys.stderr,
    )
    return 0
