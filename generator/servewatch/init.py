"""`servewatch init`: start a repository of your own from the default specs.

Copies the default specs (shipped in the package as `servewatch/defaults`, the same files as this
project's specs/) and a make fragment with the CI targets, then says what to run next.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from .errors import ServewatchError

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


def start_repository(target: Path, force: bool = False) -> tuple[Path, int, Path]:
    """Write specs/ and servewatch.mk into target; returns (specs folder, spec files written, fragment).

    Without force, an existing specs/ or servewatch.mk is an error and nothing is written.
    """
    specs = target / "specs"
    fragment = target / "servewatch.mk"
    existing = [p for p in (specs, fragment) if p.exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        raise ServewatchError(f"{names} already exist(s); nothing was written (use --force to replace)")
    if specs.exists():
        shutil.rmtree(specs)
    count = _copy_tree(resources.files("servewatch") / "defaults", specs)
    fragment.write_text(MAKE_FRAGMENT)
    return specs, count, fragment
