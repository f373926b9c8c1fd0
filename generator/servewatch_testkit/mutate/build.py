"""The rules of another specs folder (`--specs DIR`): a configured build mutated beside the default one.

The checkout's rules/ are the default specs' build, so an alert or record that exists only with
config.role, config.track or config.client_side set is never mutated there. `--specs DIR` generates
DIR's rules and promtool tests (as `servewatch generate --specs DIR` would) into a scratch folder
laid out like the checkout (rules/, promtool/), which then stands in for it: the workspaces copy its
rules and run its generated tests. The hand-written tests/promtool/ cases are written against the
default rules and are not run; nor are the incident tests (tests/test_alerts_on_incidents.py holds
the default specs' alerts and thresholds).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from servewatch import generate, writer
from servewatch.errors import ServewatchError

from .mutants import Mutant
from .rules import load
from .workspace import RULES, TEST_DIRS

GENERATED_TESTS = TEST_DIRS[0]  # promtool/: the build's own tests; tests/promtool/ is the checkout's


# The committed configured build (role, track and a client source): its rules are mutated with
# `--specs bench/mutation/specs --only-new`, and notes on their survivors sit beside the default's.
CONFIGURED = Path("bench/mutation/specs")


class BuildError(Exception):
    """A specs folder the harness cannot build: the message names the folder and what is wrong."""


def write(specs: Path, dest: Path) -> None:
    """DIR's generated rules and promtool tests under dest, in the checkout's layout."""
    if not specs.is_dir():
        raise BuildError(f"specs folder {specs}: no such folder")
    try:
        _, files = generate.build(specs)
    except ServewatchError as exc:
        raise BuildError(f"specs folder {specs}: the specs do not build:\n{exc}") from None
    kept = {k: v for k, v in files.items() if k.startswith((f"{RULES}/", f"{GENERATED_TESTS}/"))}
    writer.write(dest, kept)
    if not load(dest / RULES):
        raise BuildError(f"specs folder {specs}: generates no rules (is it a specs folder?)")


def only_new(mutants: list[Mutant], default_rules: Path) -> list[Mutant]:
    """The mutants of the rules the default build (the checkout's rules/) does not have."""
    known = {r.key for r in load(default_rules)}
    return [m for m in mutants if m.rule.key not in known]


def rule_keys(root: Path) -> set[str]:
    """The rules of both builds the notes speak of: the checkout's rules/ and CONFIGURED's."""
    keys = {r.key for r in load(root / RULES)}
    if (root / CONFIGURED).is_dir():
        with tempfile.TemporaryDirectory(prefix="servewatch-mutate-build-") as scratch:
            write(root / CONFIGURED, Path(scratch))
            keys |= {r.key for r in load(Path(scratch) / RULES)}
    return keys
