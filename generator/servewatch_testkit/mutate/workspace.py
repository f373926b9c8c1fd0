"""A throwaway copy of the repo's rules and promtool tests, with the rule files changed.

The copy keeps the repo's layout (rules/, promtool/, tests/promtool/), so every test file's
`rule_files` (`../rules/x.rules.yaml`, `../../rules/x.rules.yaml`) resolves to the changed rules
without rewriting a test file.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from servewatch import yamlio

from .rules import Rule

RULES = "rules"
TEST_DIRS = ("promtool", "tests/promtool")  # generated tests, then the hand-written ones
TEST_GLOBS = {"promtool": "*.test.yaml", "tests/promtool": "*.yaml"}  # what `servewatch test` runs


@dataclass(frozen=True)
class Edit:
    """A rule's new expression and/or `for` ("0s" removes it)."""

    rule: Rule
    expr: str | None = None
    for_: str | None = None


def test_files(root: Path) -> list[Path]:
    """The promtool test files `servewatch test` runs, relative to root."""
    out = []
    for d in TEST_DIRS:
        out += sorted(p.relative_to(root) for p in (root / d).glob(TEST_GLOBS[d]))
    return out


def rule_files_of(root: Path, test: Path) -> set[str]:
    """Names of the files under root/rules/ that a test file loads."""
    doc = yamlio.load((root / test).read_text()) or {}
    rules = (root / RULES).resolve()
    out = set()
    for entry in doc.get("rule_files") or []:
        path = ((root / test).parent / entry).resolve()
        if path.parent == rules:
            out.add(path.name)
    return out


def _write_rules(src: Path, dst: Path, edits: list[Edit]) -> None:
    dst.mkdir(parents=True)
    by_file: dict[str, list[Edit]] = {}
    for e in edits:
        by_file.setdefault(e.rule.file, []).append(e)
    for path in sorted(src.glob("*.rules.yaml")):
        if path.name not in by_file:
            shutil.copyfile(path, dst / path.name)
            continue
        doc = yamlio.load(path.read_text())
        for e in by_file[path.name]:
            rule = doc["groups"][e.rule.group]["rules"][e.rule.index]
            if e.expr is not None:
                rule["expr"] = e.expr
            if e.for_ == "0s":
                rule.pop("for", None)
            elif e.for_ is not None:
                rule["for"] = e.for_
        (dst / path.name).write_text(yaml.safe_dump(doc, sort_keys=False, width=1000, allow_unicode=True))


def create(root: Path, edits: list[Edit], parent: Path | None = None) -> Path:
    """A new folder holding root's rules with the edits applied and root's promtool tests unchanged."""
    work = Path(tempfile.mkdtemp(prefix="servewatch-mutant-", dir=parent))
    _write_rules(root / RULES, work / RULES, edits)
    # the tests and the files beside them they load (promtool/slo.inputs.rules.yaml)
    for folder in TEST_DIRS:
        for path in sorted((root / folder).glob("*.yaml")):
            (work / folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, work / folder / path.name)
    return work
