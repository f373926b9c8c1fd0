"""What a check reports: a Problem (message and fix) and, once located, a LintFinding."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """Ordered, so `--fail-on warning` means warning or worse."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


@dataclass(frozen=True)
class LintLocation:
    file: str
    line: int | None = None
    path: str | None = None  # JSON path inside a dashboard, e.g. panels[3].targets[0].expr
    where: str = ""  # what it is, for people: `alert GPUHot`, `panel "Power"`


@dataclass(frozen=True)
class Problem:
    check: str
    message: str
    fix: str | None = None
    at: LintLocation | None = None  # set by checks that look at more than one place (dashboards, rule sets)

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


@dataclass(frozen=True)
class LintFinding:
    location: LintLocation
    check: str
    severity: Severity
    message: str
    fix: str | None = None

    def sort_key(self) -> tuple:
        loc = self.location
        return (loc.file, loc.line or 0, loc.path or "", self.check, self.message)
