"""Value types the spec schemas share, each checked the way the tool that reads it will.

A spec value ends up in a rule file, a PromQL expression, a Kubernetes manifest or a URL. Each type
here refuses what that reader would refuse (or would read differently from what was meant), so a
mistake is reported at its file:line instead of surfacing later as promtool's error, a rule that
never fires, or a traceback. Names are matched with `re.fullmatch`: `$` also matches before a
trailing newline, so "5m\\n" would pass a `^...$` pattern.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import AfterValidator, AllowInfNan
from pydantic import Strict as StrictInput

from . import matchers as matcher_syntax

# Prometheus' duration grammar, as promtool 3.5 reads it: each unit at most once, largest first.
DURATION_RE = re.compile(
    r"(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?"
)
UNITS_MS = (31_536_000_000, 604_800_000, 86_400_000, 3_600_000, 60_000, 1_000, 1)
# Prometheus keeps a duration as int64 nanoseconds: `promtool check rules` refuses 9223372036855ms
# ("duration out of range") and accepts 9223372036854ms, in `for:` and in a range alike.
MAX_DURATION_MS = (2**63 - 1) // 1_000_000
# promql-parser (servewatch's own PromQL reader: lint, dashboard checks) reads each number of a
# duration as 32 bits: 4294967296ms is an error there, while 4294967295ms or 50d are fine.
MAX_DURATION_NUMBER = 2**32 - 1
LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
NUMBER_WORDS = ("nan", "inf")  # PromQL's lexer reads these as numbers, in any case, where a label is due
CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123 label: namespaces, names
K8S_LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
K8S_LABEL_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
SIGNIFICANT_DIGITS = 6  # rules write numbers with Python's "g" format (promql/builders.py, model.py)


def shown(value, limit: int = 60) -> str:
    """repr of a value for a message, cut when long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


# -- durations ---------------------------------------------------------------------------------


def duration_ms(value: str) -> int:
    m = DURATION_RE.fullmatch(value)
    return sum(int(n) * unit for n, unit in zip(m.groups(), UNITS_MS, strict=True) if n)


def duration(value, *, positive: bool = False) -> str:
    if not isinstance(value, str) or not value or not DURATION_RE.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a Prometheus duration like 30s, 5m or 1h30m "
            "(units y, w, d, h, m, s, ms, each once, largest first)"
        )
    total = duration_ms(value)
    if total > MAX_DURATION_MS:
        raise ValueError(f"{shown(value)} is longer than Prometheus can hold (about 292 years)")
    if any(n and int(n) > MAX_DURATION_NUMBER for n in DURATION_RE.fullmatch(value).groups()):
        raise ValueError(f"{shown(value)}: write it with a larger unit (numbers up to {MAX_DURATION_NUMBER})")
    if positive and total == 0:
        raise ValueError(f"{shown(value)} must be longer than zero")
    return value


Duration = Annotated[str, AfterValidator(duration)]
PositiveDuration = Annotated[str, AfterValidator(lambda v: duration(v, positive=True))]


# -- numbers -----------------------------------------------------------------------------------


def _exact(value: float) -> float:
    if float(f"{value:g}") != value:
        raise ValueError(
            f"{value!r} has more than {SIGNIFICANT_DIGITS} significant digits, "
            f"which the rules cannot carry; write {value:g}"
        )
    return value


# A YAML number: not a bool or a string, finite, and written into rules as it was given.
Number = Annotated[float, StrictInput(), AllowInfNan(False), AfterValidator(_exact)]


# -- labels ------------------------------------------------------------------------------------


def label_name(value: str) -> str:
    if not isinstance(value, str) or not LABEL_NAME_RE.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a label name (letters, digits and _, not starting with a digit)"
        )
    if value.startswith("__"):
        raise ValueError(f"{shown(value)}: label names starting with __ are reserved for Prometheus")
    if value.lower() in NUMBER_WORDS:
        raise ValueError(
            f"{shown(value)} reads as a number in PromQL (`by ({value})` does not parse); choose another name"
        )
    return value


def label_value(value: str) -> str:
    bad = CONTROL_RE.search(value)
    if bad:
        raise ValueError(f"{shown(value)} holds the control character {bad.group()!r}; a label value cannot")
    return value


def static_label_value(value: str) -> str:
    """An alert's label value: Prometheus expands templates in them, which the scenarios cannot follow."""
    if "{{" in label_value(value):
        raise ValueError(f"{shown(value)} is a template; alert label values must be static")
    return value


LabelName = Annotated[str, AfterValidator(label_name)]
AlertLabels = dict[LabelName, Annotated[str, AfterValidator(static_label_value)]]


# -- matchers ----------------------------------------------------------------------------------


def matchers(text: str) -> str:
    """Label matchers as PromQL reads them (RE2 regexes, no __name__), in one canonical spelling:
    `a="x", b=~"y"`. Builders and dashboards join matcher texts with ", " and re-read them, so a
    trailing comma, odd spacing or an escape written another way must not reach them."""
    try:
        parsed = matcher_syntax.parse(text)
    except ValueError as exc:
        raise ValueError(f"label matchers {shown(text)}: {exc}") from None
    for m in parsed:
        if m.label.startswith("__"):
            raise ValueError(
                f"label matchers {shown(text)}: the metric name ({m.label}) comes from the signal"
            )
        if CONTROL_RE.search(m.value):
            raise ValueError(f"label matchers {shown(text)}: a label value cannot hold control characters")
    return ", ".join(f"{m.label}{m.op}{matcher_syntax.quote(m.value)}" for m in parsed)


Matchers = Annotated[str, AfterValidator(matchers)]


def regex(pattern: str) -> str:
    problem = matcher_syntax.regex_problem(pattern)
    if problem:
        raise ValueError(problem)
    return pattern


# -- URLs, Kubernetes names --------------------------------------------------------------------


def url_pattern(value: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> str:
    """A URL with `{name}` placeholders from `allowed` and no other braces.

    A literal brace is not valid in a URL (percent-encode it as %7B, %7D), and `{{` would become a
    Prometheus template in the alert's annotations, so every brace must be one of the placeholders.
    """
    known = ", ".join("{" + a + "}" for a in allowed)
    for m in PLACEHOLDER_RE.finditer(value):
        if m.group(1) not in allowed:
            raise ValueError(f"unknown placeholder {m.group()!r}; known: {known}")
    rest = PLACEHOLDER_RE.sub("", value)
    if "{" in rest or "}" in rest:
        raise ValueError(
            f"a lone brace in {shown(value)}; use only the placeholders {known} (%7B, %7D for a brace)"
        )
    if re.search(r"[\s\x00-\x1f\x7f]", value):
        raise ValueError(f"{shown(value)} holds whitespace or a control character; a URL cannot")
    for name in required:
        if "{" + name + "}" not in value:
            raise ValueError(f"{shown(value)} must contain {{{name}}}")
    return value


def k8s_name(value: str) -> str:
    if not K8S_NAME_RE.fullmatch(value) or len(value) > 63:
        raise ValueError(
            f"{shown(value)} is not a Kubernetes name (lower-case letters, digits and -, at most 63)"
        )
    return value


def k8s_label_key(key: str) -> str:
    """A label or annotation key: [prefix/]name."""
    prefix, _, name = key.rpartition("/")
    name_ok = 0 < len(name) <= 63 and K8S_LABEL_VALUE_RE.fullmatch(name)
    prefix_ok = not prefix or (len(prefix) <= 253 and K8S_LABEL_PREFIX_RE.fullmatch(prefix))
    if not (name_ok and prefix_ok):
        raise ValueError(f"{shown(key)} is not a Kubernetes label key")
    return key


def k8s_label_value(value: str) -> str:
    if len(value) > 63 or not K8S_LABEL_VALUE_RE.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a Kubernetes label value (letters, digits, - _ ., at most 63)"
        )
    return value


K8sName = Annotated[str, AfterValidator(k8s_name)]
K8sLabelKey = Annotated[str, AfterValidator(k8s_label_key)]
K8sLabelValue = Annotated[str, AfterValidator(k8s_label_value)]
K8sLabels = dict[K8sLabelKey, K8sLabelValue]


def not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if CONTROL_RE.search(value):
        raise ValueError(f"{shown(value)} holds a control character")
    return value


Name = Annotated[str, AfterValidator(not_blank)]


# -- scenario input series (promtool's notation) -------------------------------------------------

TOKEN_RE = re.compile(r"\[\[([a-z_]+)\]\]")  # [[host]] etc., replaced from config before rendering
METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER = r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
SAMPLE_RE = re.compile(
    rf"(?P<blank>_)(?:x(?P<blank_n>[0-9]+))?|stale|[+-]?(?i:inf|nan)"
    rf"|(?P<start>{_NUMBER})(?:(?:(?P<sign>[+-])(?P<step>{_NUMBER}))?x(?P<n>[0-9]+))?"
)
MAX_SAMPLES = 100_000  # per series: promtool loads every one (`1x99999999999999999999` never ends)


def series(text: str) -> str:
    """`metric{label="value", ...}` as promtool reads an input series; [[tokens]] stand for names."""
    plain = TOKEN_RE.sub(lambda m: m.group(1), text).strip()
    name = METRIC_NAME_RE.match(plain)
    if not name:
        raise ValueError(f"series {shown(text)} must start with a metric name")
    rest = plain[name.end() :].strip()
    if rest:
        if not (rest.startswith("{") and rest.endswith("}")):
            raise ValueError(f'series {shown(text)}: expected {{label="value", ...}} after the metric name')
        try:
            parsed = matcher_syntax.parse(rest[1:-1])
        except ValueError as exc:
            raise ValueError(f"series {shown(text)}: {exc}") from None
        for m in parsed:
            if m.op != "=":
                raise ValueError(
                    f'series {shown(text)}: {m.label}{m.op} is a matcher; a series has label="value"'
                )
            label_name(m.label)
            label_value(m.value)
        names = [m.label for m in parsed]
        if len(set(names)) != len(names):
            raise ValueError(f"series {shown(text)} names a label twice")
    return text


def sample_values(text: str) -> str:
    """promtool's expanding notation: `1 2 _ stale`, `0+10x20`, `5x10`, `_x3` (no native histograms)."""
    total = 0
    for item in text.split():
        m = SAMPLE_RE.fullmatch(item)
        if not m:
            raise ValueError(
                f"{shown(item)} in values is not a sample: use 1.5, 0+10x20, 5x10, _, _x3 or stale"
            )
        for number in (m.group("start"), m.group("step")):
            if number is not None and not math.isfinite(float(number)):
                raise ValueError(f"{shown(item)} in values: {number} is out of range for a float")
        repeat = m.group("n") or m.group("blank_n")
        total += int(repeat) + 1 if repeat is not None else 1
        if total > MAX_SAMPLES:
            raise ValueError(f"values expand to more than {MAX_SAMPLES} samples")
    return text


Series = Annotated[str, AfterValidator(series)]
SampleValues = Annotated[str, AfterValidator(sample_values)]
