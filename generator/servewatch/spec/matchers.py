"""Label matchers and regular expressions, checked the way Prometheus reads them.

Matcher text from the specs (config.selectors, config.targets, a signal's or a runbook query's
matchers) is written into rules and queries as it is, so it must be what PromQL accepts: a label
name, an operator and a double-quoted string with Go's escapes. `=~`/`!~` values are Go regular
expressions (RE2 syntax), which Prometheus anchors as `^(?s:...)$`. They are checked with Google's
RE2 (the `google-re2` package) plus the two places where Go's regexp differs from it: Go has no
`\\C` (any byte), and Go refuses groups nested about 1,000 deep, where servewatch stops at 100.
RE2 does not know the newest Unicode scripts (Unicode 16: Garay, Todhri, Sunuwar), so `\\p{Garay}`
is refused although Prometheus would accept it. A regex must also be one servewatch's own PromQL
reader (promql-parser, Rust's regex crate: lint and the dashboard checks) reads, which refuses
`\\Q...\\E` quoting and an empty `(?)`. tests/test_fuzz_matchers.py proves these decisions against
`promtool check rules`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import promql_parser
import re2

LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
OPERATORS = ("=~", "!~", "!=", "=")  # longest first
SPACE = " \t\n\r"  # PromQL's whitespace between tokens
SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
MAX_GROUP_NESTING = 100


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str  # decoded: what Prometheus compares with


def parse(text: str) -> list[Matcher]:
    """`a="x", b=~"y.*"` as PromQL reads it; ValueError naming the first problem."""
    return list(_parsed(text))


@functools.lru_cache(maxsize=4096)  # a build parses 185 texts 412 times, each regex checked by promql
def _parsed(text: str) -> tuple[Matcher, ...]:
    out, pos = [], _skip(text, 0)
    while pos < len(text):
        name = LABEL_NAME_RE.match(text, pos)
        if not name:
            raise ValueError(f"expected a label name at {_near(text, pos)}")
        pos = _skip(text, name.end())
        op = next((o for o in OPERATORS if text.startswith(o, pos)), None)
        if op is None:
            raise ValueError(f"expected =, !=, =~ or !~ after {name.group()!r}, at {_near(text, pos)}")
        pos = _skip(text, pos + len(op))
        value, pos = _string(text, pos)
        out.append(Matcher(name.group(), op, value))
        if op in ("=~", "!~"):
            problem = regex_problem(value)
            if problem:
                raise ValueError(f"{name.group()}{op}: {problem}")
        pos = _skip(text, pos)
        if pos < len(text):
            if text[pos] != ",":
                raise ValueError(f"expected ',' between label matchers, at {_near(text, pos)}")
            pos = _skip(text, pos + 1)
    return tuple(out)


def quote(value: str) -> str:
    """A value as a PromQL double-quoted string (control characters are refused before this)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def regex_problem(pattern: str) -> str | None:
    """Why Prometheus would refuse `pattern` as a label regex (None when it accepts it)."""
    if _has_any_byte_escape(pattern):
        return f"regex {pattern!r}: \\C (any byte) is not in Go's regexp syntax"
    if _group_nesting(pattern) > MAX_GROUP_NESTING:
        return f"regex {pattern!r}: groups nested more than {MAX_GROUP_NESTING} deep"
    options = re2.Options()
    options.dot_nl = True  # Prometheus' (?s)
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        reason = (
            exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        )
        return f"regex {pattern!r} is not valid RE2 syntax: {reason}"
    try:
        promql_parser.parse(f"x{{a=~{quote(pattern)}}}")
    except ValueError:
        return f"regex {pattern!r} is valid RE2 but servewatch's PromQL reader (promql-parser) cannot read it"
    return None


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in SPACE:
        pos += 1
    return pos


def _near(text: str, pos: int) -> str:
    return repr(text[pos : pos + 20]) if pos < len(text) else "the end"


def _string(text: str, pos: int) -> tuple[str, int]:
    """A double-quoted PromQL string at `pos`, decoded; (value, position after it)."""
    if pos >= len(text) or text[pos] != '"':
        raise ValueError(f"expected a double-quoted value at {_near(text, pos)}")
    out = bytearray()
    i = pos + 1
    while True:
        if i >= len(text):
            raise ValueError(f"unterminated quoted value starting at {_near(text, pos)}")
        ch = text[i]
        if ch == '"':
            break
        if ch < " " or ch == "\x7f":
            raise ValueError(f"a raw control character {ch!r} in a quoted value: write it as an escape")
        if ch != "\\":
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        escaped, i = _escape(text, i)
        out += escaped
    try:
        return out.decode("utf-8"), i + 1
    except UnicodeDecodeError:
        raise ValueError(
            f"the value at {_near(text, pos)} is not valid UTF-8 once its escapes are read"
        ) from None


def _escape(text: str, i: int) -> tuple[bytes, int]:
    """The escape sequence at text[i] (a backslash), as bytes; Go's rules for double quotes."""
    kind = text[i + 1] if i + 1 < len(text) else ""
    if kind in SIMPLE_ESCAPES:
        return bytes([SIMPLE_ESCAPES[kind]]), i + 2
    digits = {"x": 2, "u": 4, "U": 8}.get(kind)
    if digits:
        code = text[i + 2 : i + 2 + digits]
        if len(code) != digits or not all(c in "0123456789abcdefABCDEF" for c in code):
            raise ValueError(f"escape \\{kind} needs {digits} hex digits, at {_near(text, i)}")
        value = int(code, 16)
        if kind == "x":
            return bytes([value]), i + 2 + digits
        if value > 0x10FFFF or 0xD800 <= value < 0xE000:
            raise ValueError(f"escape \\{kind}{code} is not a Unicode character")
        return chr(value).encode("utf-8"), i + 2 + digits
    if kind in "01234567" and kind:
        code = text[i + 1 : i + 4]
        if len(code) != 3 or not all(c in "01234567" for c in code) or int(code, 8) > 255:
            raise ValueError(f"octal escape needs 3 digits up to \\377, at {_near(text, i)}")
        return bytes([int(code, 8)]), i + 4
    shown = f"\\{kind}" if kind else "\\ at the end"
    hint = f" (a regex escape is written \\\\{kind} in PromQL)" if kind.isalpha() else ""
    raise ValueError(f"unknown escape sequence {shown} in a quoted value{hint}")


def _scan(pattern: str):
    """(index, char, escaped) for each position of a regex outside \\Q...\\E quoting."""
    i, quoted = 0, False
    while i < len(pattern):
        if quoted:
            if pattern.startswith("\\E", i):
                quoted = False
                i += 2
            else:
                i += 1
            continue
        if pattern[i] == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] == "Q":
                quoted = True
            else:
                yield i, pattern[i + 1], True
            i += 2
            continue
        yield i, pattern[i], False
        i += 1


def _has_any_byte_escape(pattern: str) -> bool:
    return any(escaped and ch == "C" for _, ch, escaped in _scan(pattern))


def _group_nesting(pattern: str) -> int:
    """How deep parentheses nest (outside character classes); an estimate, enough for a limit."""
    depth = deepest = 0
    in_class = False
    for _, ch, escaped in _scan(pattern):
        if escaped:
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth = max(depth - 1, 0)
    return deepest


# -- values that a matcher accepts ---------------------------------------------------------------


def _compiled(pattern: str):
    options = re2.Options()
    options.dot_nl = True  # Prometheus' (?s)
    options.log_errors = False
    return re2.compile(f"^(?:{pattern})$", options)


def accepts(op: str, pattern: str, value: str) -> bool:
    """Whether a label matcher accepts `value`, as Prometheus reads it (`=~` anchored, RE2)."""
    if op == "=":
        return value == pattern
    if op == "!=":
        return value != pattern
    found = _compiled(pattern).search(value) is not None
    return found if op == "=~" else not found


def examples(pattern: str, fill: str, limit: int = 16) -> list[str]:
    """Strings the regex may match: one per combination of its alternatives (at most `limit`), with
    `fill` standing for what `.*` or `.+` matches (so distinct fills give distinct strings).
    Candidates only: callers check each with `accepts` (Python's parser reads RE2 syntax close to,
    not exactly as, RE2 does)."""
    import re._parser as sre  # noqa: PLC0415 - only here, and private to the standard library

    try:
        return _walk(sre, sre.parse(pattern), fill, 0, limit)
    except (re.error, ValueError, RecursionError, OverflowError):
        return []


def _walk(sre, items, fill: str, depth: int, limit: int) -> list[str]:
    """Every string (up to `limit`) the parsed items make, one choice per alternative."""
    if depth > MAX_GROUP_NESTING:
        raise ValueError("too deep")
    out = [""]
    for op, arg in items:
        if op == sre.LITERAL:
            choices = [chr(arg)]
        elif op == sre.NOT_LITERAL:
            choices = ["a" if arg != ord("a") else "b"]
        elif op == sre.ANY:
            choices = ["a"]
        elif op == sre.IN:
            choices = [_in_class(sre, arg)]
        elif op == sre.SUBPATTERN:
            choices = _walk(sre, arg[3], fill, depth + 1, limit)
        elif op == sre.BRANCH:
            choices = [s for branch in arg[1] for s in _walk(sre, branch, fill, depth + 1, limit)]
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
            low, high, sub = arg
            if len(sub) == 1 and sub[0][0] == sre.ANY and fill and high > 1:
                choices = [fill]  # `.*` / `.+`: the caller's text, which keeps values apart
            else:
                times = low if low else (1 if high else 0)
                choices = [s * times for s in _walk(sre, sub, fill, depth + 1, limit)]
        elif op == sre.AT:
            continue
        else:
            raise ValueError(f"cannot make an example of {op}")
        out = [a + c for a in out for c in choices][:limit]
    return out


def _in_class(sre, items) -> str:
    negate = any(op == sre.NEGATE for op, _ in items)
    if negate:
        return next(c for c in "abcxyz019_-" if not _class_has(sre, items, c))
    for op, arg in items:
        if op == sre.LITERAL:
            return chr(arg)
        if op == sre.RANGE:
            return chr(arg[0])
        if op == sre.CATEGORY:
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "a"}.get(str(arg), "a")
    raise ValueError("empty class")


def _class_has(sre, items, c: str) -> bool:
    for op, arg in items:
        if op == sre.LITERAL and chr(arg) == c:
            return True
        if op == sre.RANGE and arg[0] <= ord(c) <= arg[1]:
            return True
        if op == sre.CATEGORY:
            return True  # a class of categories: refuse to guess
    return False
