"""Reading what users have: files found by content, folders walked.

documents.py  JSON/YAML text -> documents that know each value's line (jsonpos, yamlpos)
recognise.py  document -> rules and dashboards, in every delivery form (or why not)
rules.py      rule groups -> Rules;  dashboards.py  dashboard JSON -> LintDashboard
comments.py   inline `# servewatch-lint disable ...` suppressions
"""

from __future__ import annotations

from pathlib import Path

from .documents import Unreadable, parse
from .recognise import EXPECTED, Contents, recognise

SUFFIXES = (".yaml", ".yml", ".json")


def discover(paths: list[str]) -> tuple[list[str], list[str]]:
    """(files to read, paths that do not exist); folders are walked for .yaml/.yml/.json files."""
    files, missing = [], []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = [
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix in SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            ]
            files += sorted(str(p) for p in found)
        elif path.is_file():
            files.append(given)
        else:
            missing.append(given)
    return list(dict.fromkeys(files)), missing


def read(file: str, known_checks: set[str]) -> Contents:
    """Everything lint can read in `file`; what it cannot read is in `problems`, never dropped."""
    out = Contents()
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        out.problems.append((None, f"cannot read the file: {exc}"))
        return out
    if not text.strip():
        out.problems.append((None, f"the file is empty: {EXPECTED}"))
        return out
    try:
        docs = parse(text)
    except Unreadable as exc:
        out.problems.append((exc.line, str(exc)))
        return out
    for doc in docs:
        out.extend(recognise(doc, file, known_checks))
    if not (out.rules or out.dashboards or out.skipped or out.problems):
        out.problems.append((None, f"no documents: {EXPECTED}"))
    return out


__all__ = ["Contents", "discover", "read"]
