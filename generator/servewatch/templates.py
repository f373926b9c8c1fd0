"""The small subset of Prometheus alert templating that servewatch descriptions may use.

Descriptions are rendered by Prometheus at run time; servewatch also renders them itself to write
the exact annotations promtool tests expect. Keeping to a subset both sides agree on makes that
possible; anything else is a spec error rather than a surprise in a test.

Supported: {{ $labels.NAME }}, {{ $value }}, {{ $value | humanize }},
{{ $value | humanizePercentage }}, {{ $value | humanizeDuration }},
{{ with $labels.NAME }}...{{ . }}...{{ else }}...{{ end }} (the else part optional), and one lookup:
{{ with printf "<query>" $labels.A ... | query }}...{{ . | first | label "NAME" }}...{{ end }}, which
finds context at run time that must not be a label (the pod on a GPU, alert_context.py). Servewatch
cannot run the query; the scenario says what it finds (`context:` of an expected alert). Tokens
[[host]] etc. are replaced from config first.
"""

from __future__ import annotations

import math
import re

ACTION_RE = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
TOKEN_RE = re.compile(r"\[\[([a-z_]+)\]\]")
LOOKUP = r'printf\s+"(?:[^"\\]|\\.)*"(?:\s+\$labels\.[A-Za-z_][A-Za-z0-9_]*)*\s*\|\s*query'
WITH_RE = re.compile(
    r"\{\{\s*with\s+(?:\$labels\.(?P<label>[A-Za-z_][A-Za-z0-9_]*)|(?P<lookup>" + LOOKUP + r"))\s*\}\}"
    r"(?P<then>.*?)(?:\{\{\s*else\s*\}\}(?P<else>.*?))?\{\{\s*end\s*\}\}",
    re.S,
)
DOT_RE = re.compile(r"\{\{\s*\.\s*\}\}")
FOUND_RE = re.compile(r'\{\{\s*\.\s*\|\s*first\s*\|\s*label\s+"([A-Za-z_][A-Za-z0-9_]*)"\s*\}\}')
FILTERS = ("humanize", "humanizePercentage", "humanizeDuration")


def substitute_tokens(text: str, tokens: dict[str, str]) -> str:
    def repl(m):
        if m.group(1) not in tokens:
            raise KeyError(m.group(1))
        return tokens[m.group(1)]

    return TOKEN_RE.sub(repl, text)


def problems(text: str) -> list[str]:
    out = []

    def plain(m):
        inner = m.group("then") + (m.group("else") or "")
        return (FOUND_RE if m.group("lookup") else DOT_RE).sub("", inner)

    body = WITH_RE.sub(plain, text)
    for action in ACTION_RE.findall(body):
        if re.fullmatch(r"\$labels\.[A-Za-z_][A-Za-z0-9_]*", action):
            continue
        m = re.fullmatch(r"\$value(?:\s*\|\s*(\w+))?", action)
        if m and (m.group(1) is None or m.group(1) in FILTERS):
            continue
        out.append(
            f"template action {{{{ {action} }}}} is outside the "
            f"supported subset ({', '.join(FILTERS)}, $labels.X, with)"
        )
    for token in TOKEN_RE.findall(text):
        out.append(f"unknown token [[{token}]]")
    return out


def _g4(v: float) -> str:
    """Go's %.4g."""
    s = "%.4g" % v
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{exp[0]}{int(exp[1:]):02d}"
    return s


def humanize(v: float) -> str:
    if v == 0 or math.isnan(v) or math.isinf(v):
        return _g4(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
    else:
        for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
            if abs(v) >= 1:
                break
            prefix, v = p, v * 1000
    return _g4(v) + prefix


def humanize_percentage(v: float) -> str:
    return _g4(v * 100) + "%"


def humanize_duration(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return _g4(v)
    if v == 0:
        return _g4(v) + "s"
    if abs(v) >= 1:
        sign = "-" if v < 0 else ""
        v = abs(v)
        d = int(v)
        secs, mins, hours, days = d % 60, (d // 60) % 60, (d // 3600) % 24, d // 86400
        if days:
            return f"{sign}{days}d {hours}h {mins}m {secs}s"
        if hours:
            return f"{sign}{hours}h {mins}m {secs}s"
        if mins:
            return f"{sign}{mins}m {secs}s"
        return f"{sign}{_g4(v)}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{_g4(v)}{prefix}s"


def go_float(v: float) -> str:
    """How Go prints a float64 with %v (strconv 'g', shortest)."""
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    r = repr(v)
    if "e" in r:
        mant, exp = r.split("e")
        r = f"{mant}e{exp[0] if exp[0] in '+-' else '+'}{int(exp.lstrip('+-')):02d}"
    return r


def render(
    text: str, labels: dict[str, str], value: float | None, found: dict[str, str] | None = None
) -> str:
    """`text` as Prometheus renders it for an alert with `labels` and `value`; `found` is what the
    lookup finds (nothing when empty or None)."""
    found = found or {}

    def with_block(m):
        if m.group("lookup"):
            if not found:
                return m.group("else") or ""
            return FOUND_RE.sub(lambda f: found.get(f.group(1), ""), m.group("then"))
        label_value = labels.get(m.group("label"), "")
        if not label_value:
            return m.group("else") or ""
        return DOT_RE.sub(lambda _: label_value, m.group("then"))

    text = WITH_RE.sub(with_block, text)

    def action(m):
        act = m.group(1)
        if act.startswith("$labels."):
            return labels.get(act[len("$labels.") :], "")
        fm = re.fullmatch(r"\$value(?:\s*\|\s*(\w+))?", act)
        if fm:
            if value is None:
                raise ValueError("this description shows $value: the scenario must give the expected value")
            fn = {
                None: go_float,
                "humanize": humanize,
                "humanizePercentage": humanize_percentage,
                "humanizeDuration": humanize_duration,
            }[fm.group(1)]
            return fn(value)
        raise ValueError(f"unsupported template action {act!r}")

    return ACTION_RE.sub(action, text)


def uses_value(text: str) -> bool:
    return "$value" in text
