"""The `servewatch` command line."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from pathlib import Path

from . import demo, detect, init, upgrades
from .tools import ToolError
from .tools import cli as tools_cli
from .lint import cli as lint_cli
from .investigate import cli as investigate_cli
from .calibrate import cli as calibrate_cli
from .backtest import cli as backtest_cli
from .errors import ServewatchError, SpecErrors


def _fail(message: str, code: int = 2) -> int:
    print(f"servewatch: error: {message}", file=sys.stderr)
    return code


def cmd_generate(args) -> int:
    from . import generate, writer

    if args.diff and not args.check:
        return _fail("--diff goes with --check: `servewatch generate --check --diff`")
    root = Path(args.out)
    _, files = generate.build(Path(args.specs), root)
    if args.check:
        drift = writer.check(root, files)
        if not drift:
            print(f"servewatch: {len(files)} generated files are up to date")
            return 0
        print(
            f"servewatch: {len(drift)} generated file(s) differ from the specs; "
            "run `servewatch generate` and commit them"
        )
        print("\n".join(f"  {d.line()}" for d in drift))
        print(diff_excerpt(drift, None if args.diff else DIFF_EXCERPT_LINES), end="")
        return 1
    written, removed = writer.write(root, files)
    print(f"servewatch: {len(files)} files generated ({len(written)} changed, {len(removed)} stale removed)")
    return 0


DIFF_EXCERPT_LINES = 60  # of `generate --check`'s diff, unless --diff


def diff_excerpt(drift, limit: int | None) -> str:
    """The diffs of the changed files, cut after `limit` lines with a note on how to see them all."""
    lines = "".join(d.diff for d in drift).splitlines(keepends=True)
    if limit is None or len(lines) <= limit:
        return "".join(lines)
    return "".join(lines[:limit]) + (
        f"... the diff goes on for {len(lines) - limit} more lines: "
        "`servewatch generate --check --diff` shows all of it\n"
    )


def cmd_check(args) -> int:
    from .spec.loader import load
    from .validation import validate

    validated = validate(load(Path(args.specs)))
    model, spec = validated.model, validated.model.spec
    steps = sum(len(rb.steps) for rb in spec.runbooks.values())
    print(
        f"servewatch: specs OK: {len(spec.files)} files; {len(model.alerts())} alerts, "
        f"{len(model.records())} recording rules, {len(spec.scenarios)} scenarios, "
        f"{len(validated.dashboards)} dashboards, {len(spec.runbooks)} runbooks ({steps} steps), "
        f"{validated.links} links between alerts, dashboards and runbooks; nothing was rendered"
    )
    return 0


def cmd_init(args) -> int:
    specs, count, fragment = init.start_repository(Path(args.dir), force=args.force, full=args.full)
    print(f"servewatch: wrote {count} spec files to {specs} and {fragment}")
    if not args.full:
        print("servewatch: the other specs are the installed servewatch's defaults (`extends: servewatch`)")
    print(
        "next: tune specs/config.yaml (or run `servewatch detect --prometheus URL`), put your thresholds in "
        "specs/overrides.yaml, then `servewatch generate` and commit the outputs"
    )
    return 0


def cmd_schema(args) -> int:
    from . import writer
    from .render import spec_schema

    if not args.out:
        sys.stdout.write(spec_schema.text())
        return 0
    writer.replace(Path(args.out), spec_schema.text())
    print(f"servewatch: wrote the spec schema to {args.out}", file=sys.stderr)
    return 0


def cmd_test(args) -> int:
    from . import verify

    extra = sorted(Path(args.extra).glob("*.yaml")) if args.extra and Path(args.extra).is_dir() else []
    ok = verify.run(
        Path(args.out),
        extra,
        specs=Path(args.specs),
        cache=not args.no_cache,
        jobs=args.jobs,
        whole=args.whole,
    )
    return 0 if ok else 1


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"want a whole number of at least 1, not {text!r}")
    return n


SPEC_ERROR = "2 the specs are invalid or the command was misused (the message says which)"


def exits(*codes: str) -> str:
    """An --help epilog listing a command's exit statuses."""
    return "Exit status: " + "; ".join((*codes, SPEC_ERROR)) + "."


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="servewatch",
        description="Rules, dashboards, runbooks and promtool tests "
        "for vLLM on NVIDIA GPUs, from declarative specs.",
    )
    p.add_argument("--version", action="version", version=f"servewatch {upgrades.installed_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp):
        sp.add_argument("--specs", default="specs", help="specs folder (default: specs)")
        sp.add_argument(
            "--out",
            default=".",
            help="folder that holds rules/, dashboards/, runbooks/, promtool/ (default: .)",
        )

    g = sub.add_parser(
        "generate",
        help="write all outputs from the specs",
        epilog=exits("0 written (with --check: up to date)", "1 with --check: outputs differ from the specs"),
    )
    common(g)
    g.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1, listing the files that differ and a part of the diff, "
        "when committed outputs are stale",
    )
    g.add_argument("--diff", action="store_true", help="with --check: print the whole diff")
    g.set_defaults(func=cmd_generate)

    c = sub.add_parser(
        "check", help="validate the specs without writing anything", epilog=exits("0 the specs are valid")
    )
    common(c)
    c.set_defaults(func=cmd_check)

    t = sub.add_parser(
        "test",
        help="promtool check rules + promtool unit tests on the generated files",
        epilog=exits(
            "0 every rule file and test passed",
            "1 a check or test failed, a scenario cannot adapt to the tuning, or promtool is missing",
        ),
    )
    common(t)
    t.add_argument(
        "--extra",
        default="tests/promtool",
        help="folder of hand-written promtool tests (default: tests/promtool)",
    )
    t.add_argument(
        "--no-cache",
        action="store_true",
        help="run every promtool check and test again, even those that passed before on the same bytes",
    )
    t.add_argument(
        "--whole",
        action="store_true",
        help="run each test against the whole rule files, not only the rules it observes",
    )
    t.add_argument(
        "--jobs",
        "-j",
        type=_positive,
        default=None,
        help="promtool processes at once (default: one per core)",
    )
    t.set_defaults(func=cmd_test)

    i = sub.add_parser(
        "init",
        help="copy the default specs and a make fragment into a repository of your own",
        epilog=exits("0 written"),
    )
    i.add_argument("dir", nargs="?", default=".", help="target folder (default: .)")
    i.add_argument("--force", action="store_true", help="replace an existing specs/ and servewatch.mk")
    i.add_argument(
        "--full",
        action="store_true",
        help="copy every default spec instead of extending the installed ones (`servewatch defaults diff` "
        "then shows what a new release changed)",
    )
    i.set_defaults(func=cmd_init)

    s = sub.add_parser(
        "schema",
        help="print the JSON Schema of a spec file (editors validate specs against it)",
        epilog=exits("0 printed or written"),
    )
    s.add_argument(
        "--out", metavar="FILE", help="write it to FILE instead (e.g. specs/servewatch.schema.json)"
    )
    s.set_defaults(func=cmd_schema)

    tools_cli.add_cli(sub)
    lint_cli.add_cli(sub)
    investigate_cli.add_cli(sub)
    backtest_cli.add_cli(sub)
    detect.add_cli(sub)
    upgrades.add_cli(sub)
    calibrate_cli.add_cli(sub)
    demo.add_cli(sub).set_defaults(commands=tuple(sub.choices))  # it names the commands there are
    return p


def _in_defaults(error, specs) -> bool:
    """Whether a spec error lies in the installed servewatch's default specs (spec/layers.py) that
    another specs folder extends."""
    from .spec import layers

    where, defaults = error.location.file if error.location else None, layers.defaults_dir().resolve()
    if where is None or specs is None or Path(specs).resolve() == defaults:
        return False
    return Path(where).resolve().is_relative_to(defaults)


# A build makes hundreds of thousands of small objects that live until it ends. At Python's default
# threshold (a collection every 700 new objects) the cyclic collector ran 258 times in `generate`,
# 0.15 s of its second, each pass over objects that are still in use; at 10,000 it runs 14 times.
GC_THRESHOLD = 10_000


@contextlib.contextmanager
def fewer_collections():
    """The command's objects collected every GC_THRESHOLD new ones, as before once it returns (the
    tests and the Python API call main in their own process)."""
    before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    with fewer_collections():
        return _run(args)


def _run(args) -> int:
    try:
        return args.func(args)
    except SpecErrors as exc:
        for e in exc.errors:
            print(f"servewatch: error: {e}", file=sys.stderr)
        print(f"servewatch: {len(exc.errors)} problem(s) in the specs; nothing was written", file=sys.stderr)
        if any(_in_defaults(e, getattr(args, "specs", None)) for e in exc.errors):
            print(
                "servewatch: a problem in the installed servewatch's default specs (`extends: servewatch`) "
                "comes from your config: write the entry it names in your specs, where it replaces the "
                "default by name (docs/upgrading.md), or change the config",
                file=sys.stderr,
            )
        return 2
    except ServewatchError as exc:
        return _fail(f"{exc}; nothing was written" if args.command == "generate" else str(exc))
    except ToolError as exc:
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `servewatch ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
