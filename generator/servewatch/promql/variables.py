"""Grafana variables in PromQL: find them, and replace them so promql-parser can read the query.

promql-parser type-checks, so a placeholder must fit where the variable stands: a duration inside
`[...]` or after `offset`, a label name inside `by (...)`/`on (...)` (the variable's name), and a
number or a name elsewhere (`topk($n, ...)`, `> $threshold`, `$metric{...}`), which is why a bare
variable yields two candidate texts; inside quotes a variable stays as written. Every duration
variable becomes a distinct sentinel window, so a check can tell `[$__rate_interval]` from
`[$__interval]` and from a literal `[5m]` after parsing (`Substitution.windows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

# $name, ${name}, ${name:format}, ${__field.labels.x}, [[name]], [[name:format]]; not label_replace's $1
VAR_RE = re.compile(r"\$\{([A-Za-z_]\w*)(?:[.:][^}]*)?\}|\$([A-Za-z_]\w*)|\[\[([A-Za-z_]\w*)(?::\w+)?\]\]")
LABEL_LIST_RE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*$")
OFFSET_RE = re.compile(r"\boffset\s*-?\s*$")
SENTINEL_BASE_S = 3600  # windows are 1h + n s ([1h1s], [1h2s], ...): no query writes those
# Grafana's numeric macros (milliseconds, seconds, epoch) stand where a number does
NUMBER_PLACEHOLDER = "1"
NAME_PLACEHOLDER = "x"


def names(text: str) -> list[str]:
    """The variable names referenced in `text`, in order."""
    return [m.group(1) or m.group(2) or m.group(3) for m in VAR_RE.finditer(text)]


def is_builtin(name: str) -> bool:
    """Grafana's own variables ($__interval, $__rate_interval, ${__field.labels.x}, ...)."""
    return name.startswith("__") or name in ("timeFilter", "interval")


@dataclass
class Substitution:
    candidates: list[str]  # texts to try in order; the first that parses wins
    windows: dict[timedelta, str] = field(default_factory=dict)  # sentinel window -> what was written


def _string_mask(text: str) -> list[bool]:
    """For each position: inside a quoted PromQL string?"""
    mask, quote, escaped = [], None, False
    for ch in text:
        if quote:
            mask.append(True)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        else:
            mask.append(False)
            if ch in "\"'`":
                quote = ch
    return mask


def _context(text: str, start: int, end: int, in_string: bool) -> str:
    if in_string:
        return "string"
    before, after = text[:start].rstrip(), text[end:].lstrip()
    if OFFSET_RE.search(text[:start]) or (before.endswith(("[", ":")) and after.startswith(("]", ":"))):
        return "duration"
    if LABEL_LIST_RE.search(text[:start]):
        return "label"
    return "bare"


def substitute(expr: str, values: dict[str, str] | None = None) -> Substitution:
    """`expr` with every variable replaced; `values` gives concrete values for bare variables."""
    values = values or {}
    mask: list[bool] | None = None  # made at the first variable: most expressions have none
    windows: dict[str, timedelta] = {}
    pieces: list[tuple[str, str | tuple[str, str]]] = []  # literal text or (number, name) alternatives
    pos = 0
    for m in VAR_RE.finditer(expr):
        name = m.group(1) or m.group(2) or m.group(3)
        pieces.append(("text", expr[pos : m.start()]))
        if mask is None:
            mask = _string_mask(expr)
        ctx = _context(expr, m.start(), m.end(), mask[m.start()])
        token = m.group(0)
        if ctx == "duration":
            window = windows.setdefault(token, timedelta(seconds=SENTINEL_BASE_S + len(windows) + 1))
            pieces.append(("text", f"{int(window.total_seconds())}s"))
        elif ctx == "string":
            pieces.append(("text", token))  # a string may hold `$var` as it is
        elif ctx == "label":
            pieces.append(("text", name))
        elif name in values:
            pieces.append(("text", values[name]))
        elif name.startswith("__"):
            pieces.append(("text", NUMBER_PLACEHOLDER))
        else:
            pieces.append(("alt", (NUMBER_PLACEHOLDER, NAME_PLACEHOLDER)))
        pos = m.end()
    pieces.append(("text", expr[pos:]))
    texts = []
    for choice in (0, 1):
        texts.append("".join(p if kind == "text" else p[choice] for kind, p in pieces))
    candidates = list(dict.fromkeys(texts))
    return Substitution(candidates, {w: token for token, w in windows.items()})


def substitute_macros(expr: str, variables: dict[str, str] | None = None) -> str:
    """One parseable text for `expr` (names for bare variables): for callers that need no windows."""
    return substitute(expr, variables).candidates[-1]
