"""User-facing errors: each carries where the mistake is, so the CLI can print one clear line."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Control characters (and the line and paragraph separators) would break "one line per problem";
# they are shown as escapes wherever they come from: a value, a key or a file name in a spec.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_MESSAGE = 400  # a message quoting a huge value is cut, not printed whole


def one_line(text: str) -> str:
    out = _CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
    out = out.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates, shown escaped
    return out if len(out) <= MAX_MESSAGE else out[: MAX_MESSAGE - 3] + "..."


@dataclass(frozen=True)
class Location:
    file: str
    line: int | None = None
    field: str | None = None
    column: int | None = None  # where a tool that knows columns (Jsonnet) says so

    def __str__(self) -> str:
        where = one_line(self.file)
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{where}: {one_line(self.field)}" if self.field else where


class ServewatchError(Exception):
    """A mistake the user can fix; printed without a traceback."""


class SpecError(ServewatchError):
    def __init__(self, message: str, location: Location | None = None):
        self.message = one_line(message)
        self.location = location
        super().__init__(f"{location}: {self.message}" if location else self.message)


class SpecErrors(ServewatchError):
    """Several spec mistakes found in one pass, reported together."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))
