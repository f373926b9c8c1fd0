"""User-facing errors: each carries where the mistake is, so the CLI can print one clear line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    file: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}" if self.field else where


class ServewatchError(Exception):
    """A mistake the user can fix; printed without a traceback."""


class SpecError(ServewatchError):
    def __init__(self, message: str, location: Location | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class SpecErrors(ServewatchError):
    """Several spec mistakes found in one pass, reported together."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))
