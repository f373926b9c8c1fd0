"""One back-test: every alert of a rule set over [start, end] of one Prometheus's history."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..promapi import Client, PromApiError
from . import evaluate, inline, signal, state
from .evaluate import BacktestError, QueryBounds
from .rules import BacktestAlertRule, Record, RuleSet

PLOT_POINTS = 600  # points of a plot's signal line


@dataclass
class AlertResult:
    rule: BacktestAlertRule
    episodes: list[state.Episode]
    never_fired: int
    inlined: list[str]  # records written out in place (absent from the history)
    signal: signal.BacktestSignal | None
    plot: list[tuple[float, float]] = field(default_factory=list)  # the signal's worst value over time

    def firing_s(self, range_end: float) -> float:
        return sum(e.duration(range_end) for e in self.episodes)


@dataclass
class BacktestResult:
    name: str  # the spec set
    start: float
    end: float
    alerts: list[AlertResult]
    history: dict[str, bool]  # record -> read from the history (True) or evaluated in place


class BacktestHistory:
    """Which records the history holds over the whole range, asked once per record: it must answer
    at the range's end and two of its evaluations after the start (a rule writes at its group's phase,
    up to one interval after a grid point)."""

    def __init__(self, client: Client, start: float, end: float, records: dict[str, tuple[Record, ...]]):
        self.client, self.start, self.end, self.records = client, start, end, records
        self.known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self.known:
            first = min(self.end, self.start + 2 * max(r.interval for r in self.records[name]))
            try:
                self.known[name] = all(self.client.query(f"count({name})", t) for t in (first, self.end))
            except PromApiError as exc:
                raise BacktestError(f"cannot ask the history for {name}: {exc}") from None
        return self.known[name]


def run(
    client: Client,
    rules: RuleSet,
    start: float,
    end: float,
    *,
    name: str = "specs",
    bounds: QueryBounds | None = None,
    history: BacktestHistory | None = None,
    evaluate_records: bool = False,
    differs: set[str] = frozenset(),
    plots: bool = False,
    progress: Callable[[str], None] = lambda line: None,
) -> BacktestResult:
    """Back-test every alert of `rules`. Records in `differs` (defined otherwise than in the deployed
    set) and all of them with `evaluate_records` are written out in place even where stored."""
    if end <= start:
        raise BacktestError("the range is empty: its end is not after its start")
    bounds = bounds or QueryBounds()
    history = history or BacktestHistory(client, start, end, rules.records)
    stored = lambda rec: not evaluate_records and rec not in differs and history(rec)  # noqa: E731
    results = []
    for n, rule in enumerate(rules.alerts, 1):
        inliner = inline.Inliner(rules.records, stored)
        expr = inliner.expand(rule.expr)
        sig = signal.of(rule.expr)
        # evaluate from `for` (and keep_firing_for) before the start: an alert already true then is
        # firing at the start, as it would be on the server
        warm = rule.for_s + rule.keep_firing_for_s
        points = evaluate.grid(start - warm, end, rule.interval)
        what = f"{rule.key} ({n}/{len(rules.alerts)})"

        def tick(i: int, total: int, what=what) -> None:
            if total > 1 and i < total:
                progress(f"{name}: {what}: chunk {i + 1}/{total}")

        progress(f"{name}: {what}")
        samples = evaluate.range_samples(client, expr, points, rule.interval, bounds, what, tick)
        episodes, near = [], 0
        by_alert: dict[tuple, dict[float, float]] = {}
        for labels, values in samples.items():
            by_alert.setdefault(state.alert_labels(labels, rule.labels, rule.name), {}).update(values)
        for labels in sorted(by_alert):
            out = state.run(
                points,
                by_alert[labels],
                rule.for_s,
                rule.keep_firing_for_s,
                labels,
                lower_is_worse=bool(sig and sig.lower_is_worse),
            )
            episodes += [e for e in out.episodes if e.end is None or e.end > start]
            near += out.never_fired
        episodes.sort(key=lambda e: (e.start, e.labels))
        result = AlertResult(rule, episodes, near, sorted(inliner.inlined), sig)
        if plots and sig is not None:
            result.plot = _plot(client, rules.records, stored, sig, rule, start, end, bounds, what)
        results.append(result)
    return BacktestResult(name, start, end, results, {rec: stored(rec) for rec in sorted(history.known)})


def _plot(client, records: dict[str, tuple[Record, ...]], stored, sig, rule, start, end, bounds, what):
    """The signal's worst value across its series over the range, at most PLOT_POINTS points."""
    step = max(rule.interval, math.ceil((end - start) / PLOT_POINTS / rule.interval) * rule.interval)
    agg = "min" if sig.lower_is_worse else "max"
    expr = f"{agg}({inline.Inliner(records, stored).expand(sig.expr)})"
    samples = evaluate.range_samples(client, expr, evaluate.grid(start, end, step), step, bounds, what)
    return sorted(v for values in samples.values() for v in values)
