"""Scenario values and times relative to the alert they prove (DESIGN.md invariant 12).

A scenario may write, instead of literal numbers:

  values and series   '${used}x${span}', le="${above_hi}"   (a `${...}` expression anywhere);
                      in values also '(79000 stale)*${n}': the samples in brackets n times
  expect[].at         'for + 2m', 'window + for - 30s'        (an expression of durations)
  expect[].value      '${used / (used + free)}'                (or a plain number)
  let                 {used: '80000 * above', free: '80000 - used'}   (names for the scenario)

Expressions are arithmetic (+ - * / and parentheses, min, max, round, ceil, floor) over numbers,
durations (`2m`: 120 seconds) and these names, resolved from the alert with overrides applied:

  threshold                 the alert's threshold
  above, below              a value clearly beyond it / clearly short of it: halfway to 1 and half
                            of it for a ratio, twice and half of it for anything else; for a
                            quantile, the quantile all observations in the `above_*` / `below_*`
                            bucket give
  just_above, just_below    the threshold moved by a millionth (at least 1e-6)
  above_lo, above_hi        catalog bucket bounds of a quantile alert's histogram: the bucket just
  below_lo, below_hi        past the threshold, the bucket just short of it
  q                         a quantile alert's quantile
  for, keep_firing_for      the alert's durations, in seconds
  min_traffic, startup_grace   the alert's guards (0 when it has none)
  window, scrape            config.rate_window and config.scrape_interval, in seconds
  interval, eval_interval   the scenario's sample interval and the rule evaluation interval
  span                      intervals from 0 to the last `at` plus 5 minutes: `x${span}` covers them

In an expectation, `for`, `threshold` and the rest are those of the expectation's alert. A scenario
that cannot be computed for the resolved values (no value above a threshold of 1, an `at` before 0)
cannot adapt: `servewatch test` says so (verify.py) instead of running it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .spec.fields import DURATION_RE, MAX_DURATION_MS, MAX_SAMPLES
from .spec.schema import MAX_EVAL_MS, seconds

EVAL_INTERVAL = "30s"  # the promtool tests' rule evaluation interval (render/unit_tests.py)
EXPR_RE = re.compile(r"\$\{([^}]*)\}")
REPEAT_RE = re.compile(r"\(([^()]*)\)\*(\d+)")
SPAN_MARGIN_S = 300  # `span` covers the last `at` plus this, so every lookback at it sees data
MARGIN = 1e-6  # just_above / just_below: relative to the threshold, at least absolute

TOKEN_RE = re.compile(
    r"\s*(?:(?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+)(?![A-Za-z0-9_])"
    r"|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>[-+*/(),]))"
)
UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
FUNCTIONS = {"min": min, "max": max, "round": round, "ceil": math.ceil, "floor": math.floor}


class ExpressionError(ValueError):
    """An expression that is not written correctly (a spec mistake, whatever the tuning)."""


class Unadaptable(ValueError):
    """An expression that is correct but has no value for the alert's resolved threshold or `for`."""


class TooLong(Unadaptable):
    """A scenario whose times, as resolved, are more than a generated promtool test can hold."""


# -- the expression language -------------------------------------------------------------------
def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ExpressionError(f"cannot read {text[pos:].strip()!r} in {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
    unary := '-' unary | atom; atom := number | duration | name | name '(' expr, ... ')' | '(' expr ')'"""

    def __init__(self, text: str, names: dict[str, float]):
        self.text, self.names = text, names
        self.tokens = _tokens(text)
        self.pos = 0

    def parse(self) -> float:
        if not self.tokens:
            raise ExpressionError("empty expression")
        value = self.expr()
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {self.text!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExpressionError(f"{self.text!r} ends too early")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expr(self) -> float:
        value = self.term()
        while self._peek() in ("+", "-"):
            op = self._take()[1]
            value = value + self.term() if op == "+" else value - self.term()
        return value

    def term(self) -> float:
        value = self.unary()
        while self._peek() in ("*", "/"):
            op = self._take()[1]
            right = self.unary()
            if op == "/" and right == 0:
                raise Unadaptable(f"{self.text!r} divides by zero")
            value = value * right if op == "*" else value / right
        return value

    def unary(self) -> float:
        if self._peek() == "-":
            self._take()
            return -self.unary()
        return self.atom()

    def atom(self) -> float:
        kind, text = self._take()
        if kind == "number":
            return float(text)
        if kind == "duration":  # any order of units, as written in an expression
            value = float(sum(int(n) * UNIT_S[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)))
            if value * 1000 > MAX_DURATION_MS:  # promtool: "duration out of range"
                raise ExpressionError(
                    f"{text} in {self.text!r} is longer than Prometheus can hold (about 292 years)"
                )
            return value
        if kind == "name":
            if self._peek() == "(":
                return self._call(text)
            if text not in self.names:
                known = ", ".join(sorted(self.names))
                raise ExpressionError(f"unknown name {text!r} in {self.text!r}; known here: {known}")
            value = self.names[text]
            if value is None:
                raise Unadaptable(NO_VALUE.get(text, f"{text!r} has no value for this alert"))
            return value
        if text == "(":
            value = self.expr()
            if self._take()[1] != ")":
                raise ExpressionError(f"missing ')' in {self.text!r}")
            return value
        raise ExpressionError(f"unexpected {text!r} in {self.text!r}")

    def _call(self, name: str) -> float:
        if name not in FUNCTIONS:
            raise ExpressionError(
                f"unknown function {name!r} in {self.text!r}; known: {', '.join(FUNCTIONS)}"
            )
        self._take()  # (
        args = [self.expr()]
        while self._peek() == ",":
            self._take()
            args.append(self.expr())
        if self._take()[1] != ")":
            raise ExpressionError(f"missing ')' in {self.text!r}")
        try:
            return float(FUNCTIONS[name](*args))
        except TypeError as exc:
            raise ExpressionError(f"{name}() in {self.text!r}: {exc}") from None


def evaluate(text: str, names: dict[str, float | None]) -> float:
    value = _Parser(text, names).parse()
    if math.isnan(value) or math.isinf(value):
        raise Unadaptable(f"{text!r} is not a finite number")
    return value


def number(value: float) -> str:
    """A number as promtool reads it back exactly: integers without a point, others shortest-exact."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def substitute(text: str, names: dict[str, float | None]) -> str:
    """`text` with each `${expr}` replaced by its value. A repeat count (`x${expr}`) is rounded up to
    a whole number of samples: a time that is no multiple of the interval (a tuning, a compressed
    clock) still needs the samples that cover it."""

    def value(m: re.Match) -> str:
        v = evaluate(m.group(1), names)
        if v is not None and m.start() > 0 and text[m.start() - 1] == "x":
            v = float(math.ceil(v - 1e-9))
        return number(v)

    return EXPR_RE.sub(value, text)


def expand(values: str) -> str:
    """promtool's series notation with every `(samples)*n` written out n times."""
    return REPEAT_RE.sub(lambda m: " ".join([m.group(1).strip()] * int(m.group(2))), values)


def is_duration(text: str) -> bool:
    return bool(text) and DURATION_RE.fullmatch(text) is not None


def is_relative(text: str) -> bool:
    return bool(EXPR_RE.search(text))


def at_seconds(at: str, names: dict[str, float | None]) -> float:
    """An expectation's time: a duration, or an expression of durations."""
    value = float(seconds(at)) if is_duration(at) else evaluate(at, names)
    if value < 0:
        raise Unadaptable(f"at {at!r} is {value:g}s, before the scenario starts")
    if value * 1000 > MAX_EVAL_MS:  # promtool evaluates every rule up to it
        raise TooLong(f"at {at!r} is {duration_text(value)}, later than a scenario may run (7d)")
    return value


def duration_text(value_s: float) -> str:
    """Seconds as a short human duration for a message (4d3h, 90s)."""
    out, rest = "", int(value_s)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out, rest = out + f"{rest // size}{unit}", rest % size
    return out or f"{value_s:g}s"


def duration(value_s: float) -> str:
    """Seconds as the single-unit duration promtool wants for eval_time."""
    if value_s != int(value_s):
        raise Unadaptable(f"{value_s:g}s is not a whole number of seconds")
    s = int(value_s)
    return f"{s // 60}m" if s % 60 == 0 else f"{s}s"


# -- the names of an alert ---------------------------------------------------------------------
NO_VALUE = {
    "above": "no value lies above the threshold (a ratio is at most 1)",
    "just_above": "no value lies above the threshold (a ratio is at most 1)",
    "above_lo": "no catalog bucket of the histogram lies past the threshold",
    "above_hi": "no catalog bucket of the histogram lies past the threshold",
    "below_lo": "no catalog bucket of the histogram lies short of the threshold",
    "below_hi": "no catalog bucket of the histogram lies short of the threshold",
    "threshold": "the alert has no threshold",
}


@dataclass(frozen=True)
class SignalBounds:
    """What the values of a signal can be: at most 1 for a ratio; a histogram's bucket bounds."""

    ratio: bool = False
    buckets: tuple[float, ...] = ()
    quantile: float | None = None


def bounds_of(model, alert) -> SignalBounds:
    """The value range of the signal an alert watches (no signal: nothing)."""
    if alert.spec.signal is None:
        return SignalBounds()
    signal = model.signal(alert.spec.signal)
    if signal.kind == "quantile":
        buckets = model.builder.catalog.test_buckets(model.builder.metric_name(signal.metric))
        return SignalBounds(buckets=buckets, quantile=alert.spec.quantile)
    return SignalBounds(ratio=model.builder.is_ratio(signal))


def alert_names(model, alert, interval_s: float) -> dict[str, float | None]:
    """Every name an expression of a scenario of `alert` may use, resolved (None: no value)."""
    spec, config = alert.spec, model.config
    names: dict[str, float | None] = {
        "for": float(seconds(spec.for_)),
        "keep_firing_for": float(seconds(spec.keep_firing_for or "0s")),
        "min_traffic": float(spec.min_traffic or 0),
        "startup_grace": float(seconds(spec.absence.startup_grace or "0s")) if spec.absence else 0.0,
        "busy": float(spec.absence.busy or 0) if spec.absence else 0.0,
        "parts": float(seconds(config.remember.parts)),
        "parts_every": float(seconds(config.remember.parts_every)),
        "window": float(seconds(config.rate_window)),
        "scrape": float(seconds(config.scrape_interval)),
        "interval": interval_s,
        "eval_interval": float(seconds(EVAL_INTERVAL)),
    }
    t = spec.threshold
    names.update(dict.fromkeys(("threshold", "above", "below", "just_above", "just_below", "q"), None))
    names.update(dict.fromkeys(("above_lo", "above_hi", "below_lo", "below_hi"), None))
    if t is None:
        return names
    b = bounds_of(model, alert)
    margin = max(abs(t), 1.0) * MARGIN
    names.update(threshold=t, just_below=t - margin)
    names["just_above"] = t + margin if not (b.ratio and t + margin >= 1) else None
    if b.buckets:
        names.update(_buckets(t, b.buckets, b.quantile))
    elif b.ratio:
        names.update(above=t + (1 - t) / 2 if t < 1 else None, below=t / 2)
    else:
        names.update(above=2 * t if t > 0 else t + 1, below=t / 2 if t > 0 else t - 1)
    return names


def _buckets(t: float, bounds: tuple[float, ...], q: float | None) -> dict[str, float | None]:
    """The bucket whose every observation puts the quantile past `t`, and the one that keeps it short
    of `t`: histogram_quantile interpolates linearly inside the bucket holding the quantile."""
    q = q if q is not None else 0.5
    out: dict[str, float | None] = {"q": q}
    past = [i for i, bound in enumerate(bounds) if bound >= t and i + 1 < len(bounds)]
    if past:
        lo, hi = bounds[past[0]], bounds[past[0] + 1]
        out.update(above_lo=lo, above_hi=hi, above=lo + q * (hi - lo))
    short = [i for i, bound in enumerate(bounds) if bound <= t]
    if short:
        hi = bounds[short[-1]]
        lo = bounds[short[-1] - 1] if short[-1] > 0 else 0.0
        out.update(below_lo=lo, below_hi=hi, below=lo + q * (hi - lo))
    return out


# -- a whole scenario --------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    labels: dict[str, str]
    value: float | None
    context: dict[str, str]


@dataclass(frozen=True)
class ScenarioCheck:
    at_s: float
    alert: object  # the AlertRule this check is about
    firing: tuple[Expected, ...]


@dataclass(frozen=True)
class Resolved:
    """A scenario with every expression computed for the alerts as they are resolved."""

    scenario: object
    series: tuple[tuple[str, str], ...]  # (series, values)
    checks: tuple[ScenarioCheck, ...]


def _lets(scenario, names: dict, without: str | None = None) -> dict:
    """`names` and the scenario's lets, computed in order; with `without`, the lets that need that
    name (or a let that does) are left out."""
    out, skipped = dict(names), {without} if without else set()
    for name, text in scenario.let.items():
        if skipped & {value for kind, value in _tokens(text) if kind == "name"}:
            skipped.add(name)
            continue
        out[name] = _at_field(("let", name), evaluate, text, out)
    return out


def field_path(field: tuple) -> str:
    """('series', 0, 'values') -> 'series[0].values'."""
    out = ""
    for part in field:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _at_field(field: tuple, compute, *args):
    """compute(*args), an error telling which field of the scenario it is about."""
    try:
        return compute(*args)
    except (ExpressionError, Unadaptable) as exc:
        exc.field = getattr(exc, "field", None) or field
        raise


def switched_off(spec, scenario) -> bool:
    """Whether overrides.scenarios switches `scenario` off: nothing is resolved or rendered from it."""
    override = spec.overrides.scenarios.get(scenario.name)
    return override is not None and not override.enabled


def unmet(config, scenario) -> bool:
    """Whether `scenario` needs an identity dimension (`needs:`) config does not set: nothing is
    resolved or rendered from it."""
    return any(getattr(config, dimension) is None for dimension in scenario.needs)


def unguarded(model, scenario) -> bool:
    """Whether `scenario` proves a guard (`proves:`) that its resolved alert does not have: an
    override of min_traffic to 0 leaves a "too little traffic" scenario silent for want of data, a
    proof of nothing, so nothing is rendered from it."""
    rule = model.alert(scenario.alert)
    return (
        rule is not None and "min_traffic" in scenario.proves and not getattr(rule.spec, "min_traffic", None)
    )


def resolve(model, scenario) -> Resolved:
    """`scenario` with its expressions computed. Raises Unadaptable (the resolved alert leaves the
    expression without a value) or ExpressionError (a mistake); both carry the `field` path."""
    interval = float(seconds(scenario.interval))
    rule = model.alert(scenario.alert)
    base = alert_names(model, rule, interval)
    for name in scenario.let:
        if name in base or name == "span":
            exc = ExpressionError(f"let {name!r} would hide the built-in name {name!r}")
            exc.field = ("let", name)
            raise exc
    # `span` follows from the times, which may use lets: lets that need `span` come after them
    early = _lets(scenario, base, without="span")
    timed = []
    for ei, exp in enumerate(scenario.expect):
        exp_rule = model.alert(exp.alert or scenario.alert)
        if exp_rule is None:  # a disabled alert: nothing to check
            continue
        names = {
            **alert_names(model, exp_rule, interval),
            **{k: early[k] for k in scenario.let if k in early},
        }
        timed.append((_at_field(("expect", ei, "at"), at_seconds, exp.at, names), exp_rule, ei, exp))
    _no_contradictions(timed)
    last = max((at for at, *_ in timed), default=0.0)
    span = float(math.ceil((last + SPAN_MARGIN_S) / interval))
    if span > MAX_SAMPLES:  # every `x${span}` series would be longer than promtool loads
        exc = TooLong(
            f"the last check at {duration_text(last)} needs {span:,.0f} samples every {scenario.interval}; "
            f"promtool loads at most {MAX_SAMPLES:,} per series"
        )
        exc.field = ("interval",)
        raise exc
    own = _lets(scenario, {**base, "span": span})
    lets = {k: own[k] for k in scenario.let}
    series = tuple(
        (
            _at_field(("series", i, "series"), substitute, s.series, own),
            _at_field(("series", i, "values"), lambda v, n: expand(substitute(v, n)), s.values, own),
        )
        for i, s in enumerate(scenario.series)
        if all(getattr(model.config, need) is not None for need in s.needs)
    )
    checks = []
    for at, exp_rule, ei, exp in timed:
        names = {**alert_names(model, exp_rule, interval), **lets, "span": span}
        firing = tuple(
            Expected(
                dict(f.labels), _value(f.value, names, ("expect", ei, "firing", fi, "value")), dict(f.context)
            )
            for fi, f in enumerate(exp.firing)
        )
        checks.append(ScenarioCheck(at, exp_rule, firing))
    return Resolved(scenario, series, tuple(checks))


def _no_contradictions(timed: list) -> None:
    """Two expectations of one alert that the settings put at the same moment must agree: promtool
    passes a test whose checks at one eval_time contradict each other, so servewatch must not write one."""
    seen: dict[tuple[float, str], tuple[int, object]] = {}
    for at, rule, ei, exp in timed:
        first = seen.setdefault((at, rule.alert), (ei, exp.firing))
        if first[1] != exp.firing:
            exc = Unadaptable(
                f"expect[{first[0]}] and expect[{ei}] both check {rule.alert} at {duration(at)} and expect "
                "different alerts: with these settings the two moments coincide"
            )
            exc.field = ("expect", ei, "at")
            raise exc


def _value(value, names: dict, field: tuple) -> float | None:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    return _at_field(field, evaluate, text, names)
