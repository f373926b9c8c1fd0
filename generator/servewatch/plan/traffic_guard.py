"""Boundary tests of an alert's `min_traffic` guard (a counter ratio evaluated only while its model
finishes at least `min_traffic` events per second), part of promtool/<family>.boundaries.test.yaml:

- timing: traffic just past the guard, from a standing start; the guard holds once its rate window
  has filled far enough, and the alert fires exactly `for` after that, not one evaluation earlier;
- who: models that differ in one model label (one past the guard, one short of it), an engine scraped
  twice (its traffic counts once), and a model whose two engines, differing in one engine label, are
  each short of the guard but past it together: the guard adds a model's engines and nothing else;
- exactly at the guard, where the rates come out exact: the guard includes it (`>=`), so it fires.

A track_ratio's guard (the other track's observations a second) gets the timing test, one just
short of the guard, steady, that stays silent, and the one exactly at it, each with the canary past
the threshold beside its stable twin.

Every rate is worked out as Prometheus 3.5 computes it (plan/synthetic.py, rate_at), so the
evaluation times follow any rate window, scrape interval, `for` or `min_traffic`.
"""

from __future__ import annotations

import math

from .. import scenarios
from ..spec.schema import seconds
from .synthetic import MARGIN_S, Synth, deployment_apart, matcher_split

STEP = 0.1  # past / short of the guard by this share: well inside what a moved guard would change
SHARES = (0.5, 1.0)  # error shares tried first: their ratio is exact whatever the traffic


def guard_tests(model, alert, names: dict, expected, test) -> list[dict]:
    """The guard's tests for `alert`; `expected(labels, value)` is the alert as promtool must see it and
    `test(name, series, **checks)` one promtool test. [] without a guard or inputs servewatch can write."""
    signal = model.signal(alert.spec.signal)
    guard = float(alert.spec.min_traffic or 0)
    if signal.kind == "track_ratio":
        past = names["above"] if alert.spec.op in (">", ">=") else names["below"]
        if guard <= 0 or past is None:
            return []
        plan = _Plan(model, signal, guard)
        tests = [plan.timing(alert, past, expected, test), plan.short(alert, past, test)]
        return [t for t in (*tests, plan.exact(alert, [past], expected, test)) if t is not None]
    split = matcher_split(signal.matchers) if signal.kind == "counter_ratio" else None
    shares = _shares(alert, names)
    if guard <= 0 or split is None or not shares:
        return []
    plan = _Plan(model, signal, guard)
    tests = [plan.timing(alert, shares[0], expected, test), plan.who(alert, shares[0], expected, test)]
    exact = plan.exact(alert, shares, expected, test)
    return [t for t in (*tests, exact) if t is not None]


def _shares(alert, names: dict) -> list[float]:
    """Error shares on the firing side of the ratio's threshold, best first: 0.5 and 1 where they are
    (their ratios come out exact whatever the traffic), else the boundary tests' value just past it."""
    t, op = alert.spec.threshold, alert.spec.op
    fires = {">": t.__lt__, ">=": t.__le__, "<": t.__gt__, "<=": t.__ge__}.get(op) if t is not None else None
    if fires is None:
        return []
    out = [share for share in SHARES if fires(share)]
    past = names["just_above"] if op in (">", ">=") else names["just_below"]
    if not out and past is not None and 0 < past <= 1:
        out.append(past)
    return out


class _Plan:
    """Inputs for one guard: counters of a thing's finished events, split by the ratio's matchers
    (Synth.counter_ratio), and the guard's value on them."""

    def __init__(self, model, signal, guard: float):
        self.model, self.signal, self.guard = model, signal, guard
        self.interval = float(seconds(model.config.scrape_interval))
        self.window = float(seconds(model.config.rate_window))
        self.step = float(seconds(scenarios.EVAL_INTERVAL))

    def synth(self, until_s: float) -> Synth:
        return Synth(self.model, self.interval, math.ceil((until_s + MARGIN_S) / self.interval))

    def traffic_at(self, synth: Synth, per_second: float, share: float, at_s: float) -> float | None:
        """The guard's value at `at_s` for one thing: its counters' rates, added (a track_ratio's:
        the rate of the other track's observations)."""
        if self.signal.kind == "track_ratio":
            return synth.rate_at(per_second * self.interval, at_s, self.window)
        rates = synth.counter_ratio_rates(share, per_second, at_s, self.window)
        return None if rates is None else rates[0] + rates[1]

    def inputs(self, synth: Synth, share: float, labels: dict, per_second: float) -> list | None:
        """The series of one thing at `per_second` events, `share` the signal's value (a track_ratio's
        thing is a canary, beside its stable twin)."""
        if self.signal.kind == "track_ratio":
            return synth.track_ratio(self.signal, share, labels, per_second * self.interval)
        return synth.counter_ratio(self.signal, share, labels, per_second)

    def labels(self, synth: Synth) -> dict:
        labels = synth.identity("model")
        return synth.other_track(labels) if self.signal.kind == "track_ratio" else labels

    def settled(self, for_s: float) -> float:
        """An evaluation time by which every window is full and every steady guard held for `for`."""
        return math.ceil((self.window + self.interval + for_s) / self.step) * self.step + self.step

    # -- the tests -------------------------------------------------------------------------------
    def timing(self, alert, share: float, expected, test) -> dict | None:
        for_s = float(seconds(alert.for_))
        traffic = self.guard * (1 + STEP)
        synth = self.synth(self.settled(for_s))
        labels = self.labels(synth)
        onset = None
        for i in range(1, int(self.settled(0) // self.step) + 1):
            value = self.traffic_at(synth, traffic, share, i * self.step)
            if value is not None and value >= self.guard:
                onset = i * self.step
                break
        if onset is None:
            return None
        fires_at = onset + for_s
        checks = [self.check(alert, fires_at - self.step, [])]
        checks.append(self.check(alert, fires_at, [expected(labels, share)]))
        inputs = self.inputs(synth, share, labels, traffic)
        if inputs is None:
            return None
        return test(
            f"boundary: {alert.alert} fires `for` after its traffic passes min_traffic",
            inputs,
            alert_rule_test=checks,
        )

    def short(self, alert, share: float, test) -> dict | None:
        """Traffic just short of the guard, steady: silent once every window is full and `for` past."""
        at_s = self.settled(float(seconds(alert.for_)))
        synth = self.synth(at_s)
        inputs = self.inputs(synth, share, self.labels(synth), self.guard * (1 - STEP))
        if inputs is None:
            return None
        return test(
            f"boundary: {alert.alert} stays silent with traffic just short of min_traffic",
            inputs,
            alert_rule_test=[self.check(alert, at_s, [])],
        )

    def who(self, alert, share: float, expected, test) -> dict | None:
        at_s = self.settled(float(seconds(alert.for_)))
        synth = self.synth(at_s)
        lb = self.model.builder.labels
        pinned = synth.pinned("vllm")
        model_labels = [x for x in lb.identity("model") if x not in pinned]
        engine_labels = [x for x in lb.identity("engine") if x not in [*lb.identity("model"), *pinned]]
        past, short, together = (self.guard * k for k in (1 + STEP, 1 - STEP, (1 + STEP) / 2))
        series, firing, keys = [], [], []

        def add(labels: dict, per_second: float, fires: bool) -> None:
            series.extend(synth.counter_ratio(self.signal, share, labels, per_second))
            keys.append(tuple(sorted(synth.key("model", labels).items())))
            if fires:
                firing.append(expected(labels, share))

        add(synth.identity("model"), past, True)
        for label in model_labels:  # another model, short of the guard: the guard is per model
            add(synth.identity("model", change=label), short, False)
        for label, value in deployment_apart(self.model, self.signal)[0]:  # its other roles, a canary
            add({**synth.identity("model"), label: value}, short, False)
        duplicate = synth.identity("model", variant="dup")  # one engine scraped twice
        add(duplicate, short, False)
        series.extend(
            synth.counter_ratio(self.signal, share, {**duplicate, "instance": "second-scrape"}, short)
        )
        for label in engine_labels:  # two engines apart in `label`, each short, together past
            first = synth.identity("model", variant=f"sum-{label.lower()}")
            second = {**first, label: f"{label.lower()}-second"}
            add(first, together, True)
            series.extend(synth.counter_ratio(self.signal, share, second, together))
        if len(set(keys)) != len(keys) or "instance" in lb.identity("engine"):
            return None  # the selectors pin the labels that would tell the models apart
        firing.sort(key=lambda alert_: sorted(alert_["exp_labels"].items()))
        return test(
            f"boundary: {alert.alert} adds up a model's engines against min_traffic, and nothing else",
            series,
            alert_rule_test=[self.check(alert, at_s, firing)],
        )

    def exact(self, alert, shares: list[float], expected, test) -> dict | None:
        """Traffic whose guard value is exactly `min_traffic` at every evaluation of the `for` before
        the check, where servewatch finds one; None otherwise."""
        for_s = float(seconds(alert.for_))
        first = self.settled(for_s)
        synth = self.synth(first + self.window)
        for share in shares:
            for at_s in (first + i * self.step for i in range(int(self.window // self.step) + 1)):
                span = [at_s - for_s + i * self.step for i in range(int(for_s // self.step) + 1)]
                if all(self.traffic_at(synth, self.guard, share, t) == self.guard for t in span):
                    labels = self.labels(synth)
                    inputs = self.inputs(synth, share, labels, self.guard)
                    if inputs is None:
                        return None
                    return test(
                        f"boundary: {alert.alert} traffic of exactly min_traffic is enough",
                        inputs,
                        alert_rule_test=[self.check(alert, at_s, [expected(labels, share)])],
                    )
        return None

    @staticmethod
    def check(alert, at_s: float, firing: list) -> dict:
        return {"eval_time": scenarios.duration(at_s), "alertname": alert.alert, "exp_alerts": firing}
