"""`servewatch init`: start a repository of your own from the default specs.

Copies the default specs (shipped in the package as `servewatch/defaults`, the same files as this
project's specs/) and a make fragment with the CI targets, then says what to run next.
"""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path

MAKE_FRAGMENT = """\
# servewatch targets; include this file from your Makefile (`include servewatch.mk`).
SERVEWATCH ?= servewatch

.PHONY: servewatch-generate servewatch-check servewatch-test

# Write rules/, dashboards/, runbooks/ and promtool/ from specs/.
servewatch-generate:
\t$(SERVEWATCH) generate

# CI: fail when the committed outputs are stale, then prove the rules with promtool 3.5.
servewatch-check:
\t$(SERVEWATCH) generate --check
\t$(SERVEWATCH) lint

servewatch-test: servewatch-check
\t$(SERVEWATCH) test
"""


def _copy_tree(src, dst: Path) -> int:
    """Copy a resources Traversable tree; returns the number of files."""
    count = 0
    dst.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.iterdir(), key=lambda t: t.name):
        if item.is_dir():
            count += _copy_tree(item, dst / item.name)
        elif item.name.endswith((".yaml", ".yml", ".jsonnet", ".libsonnet")):
            (dst / item.name).write_bytes(item.read_bytes())
            count += 1
    return count


def cmd_init(args) -> int:
    target = Path(args.dir)
    specs = target / "specs"
    fragment = target / "servewatch.mk"
    existing = [p for p in (specs, fragment) if p.exists()]
    if existing and not args.force:
        names = ", ".join(str(p) for p in existing)
        print(
            f"servewatch: error: {names} already exist(s); nothing was written (use --force to replace)",
            file=sys.stderr,
        )
        return 2
    if specs.exists():
        shutil.rmtree(specs)
    count = _copy_tree(resources.files("servewatch") / "defaults", specs)
    fragment.write_text(MAKE_FRAGMENT)
    print(f"servewatch: wrote {count} spec files to {specs} and {fragment}")
    print(
        "next: tune specs/config.yaml (or run `servewatch detect --prometheus URL`), put your thresholds in "
        "specs/overrides.yaml, then `servewatch generate` and commit the outputs"
    )
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser(
        "init", help="copy the default specs and a make fragment into a repository of your own"
    )
    p.add_argument("dir", nargs="?", default=".", help="target folder (default: .)")
    p.add_argument("--force", action="store_true", help="replace an existing specs/ and servewatch.mk")
    p.set_defaults(func=cmd_init)
