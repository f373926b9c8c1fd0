"""The lint settings file (`.servewatch-lint.yaml`): checks disabled everywhere, and per-file ignores.

disable: [explicit-matching]          # never run these
ignore:                               # these checks, in these files only
  - file: dashboards/legacy/*.json    # a glob, relative to the settings file's folder
    checks: [angular-panel, unit-mismatch]
    reason: imported from NVIDIA's repo; rebuilt in PLAT-123
"""

from __future__ import annotations

import difflib
import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import Location, SpecError

DEFAULT_FILE = ".servewatch-lint.yaml"


@dataclass(frozen=True)
class Ignore:
    pattern: str
    checks: frozenset[str]
    reason: str


@dataclass
class LintSettings:
    disable: set[str] = field(default_factory=set)
    ignores: list[Ignore] = field(default_factory=list)
    folder: Path = Path(".")

    def ignored(self, file: str, check: str) -> bool:
        try:
            relative = os.path.relpath(Path(file).resolve(), self.folder.resolve())
        except ValueError:  # another drive
            relative = file
        relative = Path(relative).as_posix()
        return any(check in i.checks and fnmatch.fnmatch(relative, i.pattern) for i in self.ignores)


def _unknown(ids, known: set[str], where: Location) -> list[SpecError]:
    errors = []
    for check in ids:
        if check not in known:
            close = difflib.get_close_matches(str(check), sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            errors.append(SpecError(f"unknown check {check!r}{hint}", where))
    return errors


def load(path: Path, known: set[str]) -> LintSettings:
    """Read a settings file; every mistake is reported at once (SpecError list)."""
    from .inputs import yamlpos  # the inputs package: when a lint runs, not to build the command line

    try:
        docs = yamlpos.load_all(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"cannot read the lint settings: {exc}", Location(str(path))) from None
    doc = docs[0] if docs else yamlpos.YamlDoc({})
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise SpecError("the lint settings must be a mapping", Location(str(path), 1))
    errors: list[SpecError] = []

    def at(*fields) -> Location:
        return Location(str(path), doc.line(tuple(fields)), ".".join(map(str, fields)))

    for key in sorted(set(data) - {"disable", "ignore"}):
        close = difflib.get_close_matches(str(key), ["disable", "ignore"], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        errors.append(SpecError(f"unknown setting{hint} (known: disable, ignore)", at(key)))
    disable = data.get("disable") or []
    if not isinstance(disable, list):
        errors.append(SpecError("a list of check ids", at("disable")))
        disable = []
    errors += _unknown(disable, known, at("disable"))
    ignores = []
    for i, entry in enumerate(data.get("ignore") or []):
        if not isinstance(entry, dict) or not entry.get("file") or not isinstance(entry.get("checks"), list):
            errors.append(SpecError("each entry needs file: <glob> and checks: [ids]", at("ignore", i)))
            continue
        errors += _unknown(entry["checks"], known, at("ignore", i, "checks"))
        ignores.append(
            Ignore(str(entry["file"]), frozenset(map(str, entry["checks"])), str(entry.get("reason", "")))
        )
    if errors:
        from ..errors import SpecErrors

        raise SpecErrors(errors)
    return LintSettings(set(map(str, disable)), ignores, path.parent)
