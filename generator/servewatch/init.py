"""`servewatch init`: start a repository of your own from the default specs.

By default the repository holds only what a team tunes: specs/config.yaml (with `extends:
servewatch`, so every other spec comes from the installed servewatch and follows its upgrades,
spec/layers.py) and specs/overrides.yaml. `--full` copies every default spec (shipped in the
package as `servewatch/defaults`, the same files as this project's specs/) and records what was
copied, so `servewatch defaults diff` can later say what a release changed (upgrades.py). Both
write a make fragment with the CI targets. Each YAML spec starts with a `yaml-language-server` line
pointing at the spec schema written beside them, so an editor validates the specs as they are typed.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from . import upgrades
from .errors import ServewatchError
from .render import spec_schema

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


def with_modeline(data: bytes, path: Path, specs: Path) -> bytes:
    """A YAML spec with the schema line on top, unless it already names a schema."""
    if data.startswith(spec_schema.MODELINE.encode()):
        return data
    return spec_schema.modeline(path, specs).encode() + b"\n" + data


def _copy_tree(src, dst: Path, specs: Path) -> int:
    """Copy a resources Traversable tree; returns the number of files."""
    count = 0
    dst.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.iterdir(), key=lambda t: t.name):
        if item.is_dir():
            count += _copy_tree(item, dst / item.name, specs)
        elif item.name.endswith((".yaml", ".yml")):
            path = dst / item.name
            path.write_bytes(with_modeline(item.read_bytes(), path, specs))
            count += 1
        elif item.name.endswith((".jsonnet", ".libsonnet")):
            (dst / item.name).write_bytes(item.read_bytes())
            count += 1
    return count


MINIMAL = ("config.yaml", "overrides.yaml")  # what a team over the defaults starts with
EXTENDS = (
    "# The specs this folder does not hold (alerts, scenarios, runbooks, SLOs, dashboards) are those of\n"
    "# the installed servewatch, so they follow its upgrades; write one here to replace it by name\n"
    "# (docs/upgrading.md).\n"
    "extends: servewatch\n"
)


def _minimal(specs: Path) -> int:
    specs.mkdir(parents=True)
    for name in MINIMAL:
        data = (resources.files("servewatch") / "defaults" / name).read_bytes()
        if name == "config.yaml":
            data = EXTENDS.encode() + data
        (specs / name).write_bytes(with_modeline(data, specs / name, specs))
    return len(MINIMAL)


def start_repository(target: Path, force: bool = False, full: bool = False) -> tuple[Path, int, Path]:
    """Write specs/ and servewatch.mk into target; returns (specs folder, spec files written, fragment).
    `full` copies every default spec (and records them for `defaults diff`); otherwise only what a
    team tunes, over the installed defaults.

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
    if full:
        count = _copy_tree(resources.files("servewatch") / "defaults", specs, specs)
        upgrades.write_record(specs, upgrades.default_bytes(specs))
    else:
        count = _minimal(specs)
    (specs / spec_schema.FILE_NAME).write_text(spec_schema.text(), encoding="utf-8")
    fragment.write_text(MAKE_FRAGMENT)
    return specs, count, fragment
