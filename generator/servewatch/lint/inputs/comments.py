"""Inline suppressions in YAML rule files.

# servewatch-lint disable counter-rate explicit-matching   (the rule below, or the rule it is in)
# servewatch-lint disable-file label-unknown                (every finding in this file)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

COMMENT_RE = re.compile(r"#\s*servewatch-lint\s+(disable-file|disable)\b([^#\n]*)")


@dataclass
class Suppressions:
    file_wide: set[str] = field(default_factory=set)
    by_line: dict[int, set[str]] = field(default_factory=dict)  # comment line -> check ids
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, message)

    def for_rule(self, start: int, next_start: int | None, lines: list[str], shift: int) -> frozenset[str]:
        """Ids disabled for the rule starting at `start`: comments inside it, or right above it."""
        out: set[str] = set()
        for line, ids in self.by_line.items():
            inside = start <= line < (next_start or 10**9)
            if next_start is not None and _just_above(line, next_start, lines, shift):
                inside = False  # it introduces the next rule
            if inside or _just_above(line, start, lines, shift):
                out |= ids
        return frozenset(out)


def _just_above(line: int, start: int, lines: list[str], shift: int) -> bool:
    if line >= start:
        return False
    between = lines[line - shift : start - 1 - shift]  # lines after the comment, before the rule
    return all(not text.strip() or text.strip().startswith("#") for text in between)


def scan(text: str, shift: int, known: set[str]) -> Suppressions:
    out = Suppressions()
    for i, line in enumerate(text.splitlines(), start=1 + shift):
        m = COMMENT_RE.search(line)
        if not m:
            continue
        listed = re.split(r"--|\(", m.group(2), maxsplit=1)[0]
        ids = {t for t in re.split(r"[\s,]+", listed.strip()) if t}
        for unknown in sorted(ids - known):
            out.problems.append((i, f"unknown check {unknown!r} in a servewatch-lint comment"))
        ids &= known
        if not ids:
            out.problems.append((i, "a servewatch-lint comment names no check"))
        elif m.group(1) == "disable-file":
            out.file_wide |= ids
        else:
            out.by_line[i] = ids
    return out


def next_starts(starts: list[int]) -> dict[int, int | None]:
    """For each rule start line, the next rule's start line (None for the last)."""
    ordered = sorted(set(starts))
    return {s: (ordered[i + 1] if i + 1 < len(ordered) else None) for i, s in enumerate(ordered)}
