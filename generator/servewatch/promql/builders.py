"""PromQL builders. Every binary operation between two vectors goes through here, so label
matching, deduplication and division guards are decided once (DESIGN.md invariants 1-4).

Builders return plain strings; `servewatch.lint.engine` parses them in tests and in `lint`.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Callable, Iterable, Sequence

MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


def labels(names: Iterable[str]) -> str:
    return ", ".join(names)


def parse_matchers(text: str) -> list[tuple[str, str, str]]:
    """Split `a="x", b=~"y"` into (label, op, value); raise ValueError on anything else."""
    return list(_parsed_matchers(text))


@functools.lru_cache(maxsize=4096)  # a build reads the same few matcher sets ~20,000 times
def _parsed_matchers(text: str) -> tuple[tuple[str, str, str], ...]:
    out, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = MATCHER_RE.match(text, pos)
        if not m:
            raise ValueError(f"cannot read label matchers {text!r} near {text[pos:]!r}")
        out.append((m.group(1), m.group(2), m.group(3)))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise ValueError(f"expected ',' between label matchers in {text!r}")
            pos += 1
    return tuple(out)


def selector(metric: str, *matcher_sets: str) -> str:
    """`metric{m1, m2}` with empty matcher sets dropped."""
    parts = [m.strip().strip(",") for m in matcher_sets if m and m.strip()]
    return f"{metric}{{{', '.join(parts)}}}" if parts else metric


def agg(op: str, by: Sequence[str], expr: str) -> str:
    """An aggregation per `by`; over everything (`max(x)`) when `by` is empty."""
    return f"{op} by ({labels(by)}) ({expr})" if by else f"{op}({expr})"


def rate(series: str, window: str) -> str:
    return f"rate({series}[{window}])"


def dedup(series: str, identity: Sequence[str]) -> str:
    """One series per identity: the same target scraped by two jobs must not double up."""
    return agg("max", identity, series)


def guarded_div(numerator: str, denominator: str, on: Sequence[str], many_left: bool = False) -> str:
    """numerator / denominator where the denominator is > 0; 0/0 and x/0 give no result. With
    `many_left` the result keeps the numerator's labels (group_left), not only the `on` labels."""
    # "()": a bare group_left would read the "(" that follows as its label list
    group = " group_left ()" if many_left else ""
    return f"(\n  {numerator}\n/ on ({labels(on)}){group}\n  ({denominator} > 0)\n)"


def matched_ratio(part: str, rest: str, identity: Sequence[str]) -> str:
    """part / (part + rest) per identity, both sides deduplicated to the identity first."""
    p = dedup(part, identity)
    r = dedup(rest, identity)
    return guarded_div(p, f"({p} + on ({labels(identity)}) {r})", identity)


def matched_ratio_with_context(
    part: str,
    rest: str,
    identity: Sequence[str],
    context: Sequence[str],
    describe: Callable[[str], str] | None = None,
) -> str:
    """part / (part + rest) per identity, carrying descriptive labels (host, GPU index, pod) of
    `part`, and those `describe` derives from them (e.g. one host label from its spellings).

    The numerator is `part` cut to one series per identity: topk 1 of its maximum per identity
    and context, whose value is the identity's maximum. So the context labels cost no read of their
    own, and a label that changed between scrapes cannot cause a many-to-many error. `describe`
    runs on that one series per identity, not on every raw series: it can then never make two
    series alike, and it costs one label set per identity, not one per series read.
    """
    if not context:
        return matched_ratio(part, rest, identity)
    p = f"topk by ({labels(identity)}) (1, {dedup(part, [*identity, *context])})"
    p = describe(p) if describe else p
    whole = f"({dedup(part, identity)} + on ({labels(identity)}) {dedup(rest, identity)})"
    return guarded_div(p, whole, identity, many_left=True)


def with_context(expr: str, series: str, identity: Sequence[str], context: Sequence[str]) -> str:
    """Attach descriptive labels (host, GPU index, pod) to a per-identity result.

    The context vector is cut to one series per identity (topk 1 of a 1-valued group), so a
    label that changed between scrapes cannot cause a many-to-many error.
    """
    if not context:
        return expr
    info = f"topk by ({labels(identity)}) (1, group by ({labels([*identity, *context])}) ({series}))"
    return f"{expr}\n* on ({labels(identity)}) group_left ({labels(context)})\n  {info}"


def product(factors: Sequence[str], on: Sequence[str]) -> str:
    """The factors multiplied series by series, matched one-to-one on `on`."""
    return f"\n* on ({labels(on)})\n".join(f"(\n  {f}\n)" for f in factors)


def string(value: str) -> str:
    """`value` as a PromQL string literal (double quotes; JSON's escapes are PromQL's)."""
    return json.dumps(value)


def copy_label(expr: str, src: str, dst: str) -> str:
    """`expr` with label `dst` set to the value of `src`, so two sources that name the same thing
    differently (vLLM's `pod`, DCGM's `exported_pod`) can be matched with on(dst)."""
    if src == dst:
        return expr
    return f'label_replace({expr}, "{dst}", "$1", "{src}", "(.*)")'


def quantile(q: float, bucket_rate_by_le: str) -> str:
    return f"histogram_quantile({q:g}, {bucket_rate_by_le})"


def only_where(expr: str, condition: str, on: Sequence[str]) -> str:
    return f"(\n  {expr}\nand on ({labels(on)})\n  {condition}\n)"


def unless(left: str, right: str, on: Sequence[str]) -> str:
    return f"(\n  {left}\nunless on ({labels(on)})\n  {right}\n)"


def otherwise(expr: str, fallback: str, on: Sequence[str]) -> str:
    """`expr`, and `fallback` for each identity (`on`) that `expr` has no series for."""
    return f"(\n  {expr}\nor on ({labels(on)})\n  {fallback}\n)"


def less(expr: str, part: str, on: Sequence[str]) -> str:
    """`expr` less `part` per identity (`on`); where `part` has no series it counts as 0."""
    return f"{expr}\n- on ({labels(on)})\n{otherwise(part, f'0 * {expr}', on)}"


def any_of(*exprs: str) -> str:
    return "\n or\n".join(exprs)


def total(exprs: Sequence[str], on: Sequence[str]) -> str:
    """The sum of several per-`on` vectors (a series missing on one side drops out)."""
    return exprs[0] if len(exprs) == 1 else f"({f' + on ({labels(on)}) '.join(exprs)})"


def compare(expr: str, op: str, threshold: float) -> str:
    return f"{expr} {op} {threshold:g}"


def join(expr: str, info: str, on: Sequence[str], attach: Sequence[str]) -> str:
    """`expr` with the labels `attach` copied from the one-per-`on` series of `info` (value 1); only
    where `info` has a series (see `left_join`)."""
    return f"({expr})\n* on ({labels(on)}) group_left ({labels(attach)})\n  {info}"


def left_join(expr: str, info: str, on: Sequence[str], attach: Sequence[str], cover: str) -> str:
    """`join`, and `expr` as it is where `info` has no series, so missing context never drops a result.

    `cover` holds one 1-valued series per `on` for every `on` that `expr` can have a series for:
    `expr` is joined with `info`, or with `cover` (no `attach` labels) where `info` has no series.
    So `expr` is written once; Prometheus shares no subexpression, and `join(...) or expr` would
    evaluate it twice."""
    return join(expr, f"({info}\nor on ({labels(on)})\n  {cover})", on, attach)


def with_label(expr: str, label: str, value: str) -> str:
    """`expr` with a constant `label="value"` on every series."""
    return f'label_replace({expr}, "{label}", "{value}", "", "")'


def fill_label(expr: str, src: str, dst: str) -> str:
    """`expr` with label `dst` set from `src` where `src` is not empty (unlike `copy_label`, an empty
    `src` leaves `dst` alone, so several spellings of one label fold into one: Hostname, hostname)."""
    return f'label_replace({expr}, "{dst}", "$1", "{src}", "(.+)")'


def seen_at(series: str, by: Sequence[str]) -> str:
    """When each `by` combination is present: evaluation time as the value. time(), not timestamp():
    MetricsQL's timestamp() of an expression that is not a plain selector gives nothing, so vmalert
    would remember nothing."""
    return f"{agg('group', by, series)} * time()"


# How long a memory survives a stop of rule evaluation (a Prometheus restart): the range it reads of
# its own previous value. Prometheus' lookback: 10 samples at a 30 s interval, not a window's 120 or 1,440.
MEMORY_GAP = "5m"


def remember(series: str, by: Sequence[str], record: str, window_s: float) -> str:
    """An incremental memory, the expression of recording rule `record` (docs/scale.md, "Memories"):
    per `by` combination, when it was last present, for `window_s` seconds after.

    It reads what is present now and its own previous value (`last_over_time` over MEMORY_GAP), never
    the window: a window of 12 h at 30 s would be 1,440 samples per series, every evaluation. The
    result is the one `max_over_time(seen[window])` of a `seen_at` record gives, as long as rule
    evaluation has not stopped for longer than MEMORY_GAP."""
    previous = f"last_over_time({record}[{MEMORY_GAP}]) > time() - {window_s:g}"
    return f"max by ({labels(by)}) (\n  {seen_at(series, by)}\nor\n  {previous}\n)"


# `remember`'s shape, as written or as a rule file's formatter re-indents it
_REMEMBERED = re.compile(
    r"^\s*max by \((?P<by>[^()]*)\)\s*\((?P<now>.*)\sor\s+"
    r"last_over_time\((?P<record>[a-zA-Z_:][a-zA-Z0-9_:]*)\[[^\]]+\]\)\s*>\s*time\(\)\s*-\s*(?P<window>[0-9.e+]+)\s*\)\s*$",
    re.S,
)


def unrolled(record: str, expr: str, step: str = "") -> str | None:
    """A `remember` expression of `record` with the window read in place of its own previous value
    (a subquery at `step`, or at the default resolution), for a reader that has no previous value:
    a backfill, a back-test. None if `expr` is no memory of `record`."""
    m = _REMEMBERED.match(expr)
    if m is None or m["record"] != record:
        return None
    return f"max by ({m['by']}) (max_over_time(({m['now'].strip()})[{m['window']}s:{step}]))"


def recall(record: str, key: Sequence[str]) -> str:
    """Per `key`, the series of a `remember` record seen most recently: what was there last, even if
    it is gone now (a dropped mapping, a vanished target). Value 1; one sample per series read."""
    return f"group without () (topk by ({labels(key)}) (1, {record}))"


def gone(record: str, by: Sequence[str], window: str) -> str:
    """The `by` combinations a record had within `window` and has no longer."""
    return unless(f"max_over_time({record}[{window}])", record, by)


def started_within(series: str, key: Sequence[str], window: str) -> str:
    """Series of `key` that have never been 1 within `window` and did not exist `window` ago: things
    that are still starting up (a new pod loading its model), not things that went down."""
    never_up = f"{agg('max', key, f'max_over_time({series}[{window}])')} == 0"
    return unless(never_up, agg("group", key, f"{series} offset {window}"), key)
