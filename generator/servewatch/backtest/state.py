"""Prometheus's alerting state machine (rules/alerting.go) over a series of evaluations.

At every evaluation, per label set: a new result is *pending* from that evaluation (its activeAt);
a pending alert fires at the first evaluation at least ``for`` after activeAt (at once with no
``for``); a pending alert without a result is dropped; a firing alert without a result keeps firing
until ``keep_firing_for`` has passed since the first evaluation without one, and is resolved at the
evaluation after that (at once without keep_firing_for). A result that comes back while the alert
keeps firing keeps it firing; one that comes back after the resolution starts a new pending period.
An episode is one firing stretch: from the evaluation that fired it to the one that resolved it
(Prometheus's ALERTS{alertstate="firing"} has samples on every evaluation in between).
"""

from __future__ import annotations

from dataclasses import dataclass

from .evaluate import Labels


@dataclass(frozen=True)
class Episode:
    labels: Labels  # the alert's labels: the result's, the rule's, alertname
    active_at: float  # the first true evaluation (pending from then)
    start: float  # the evaluation that fired it
    end: float | None  # the evaluation that resolved it; None: still firing at the range's end
    peak: float  # the most extreme value of the expression while pending or firing

    def duration(self, range_end: float) -> float:
        return (self.end if self.end is not None else range_end) - self.start


@dataclass
class SeriesOutcome:
    """What the state machine made of one label set's evaluations."""

    episodes: list[Episode]
    never_fired: int  # pending stretches that ended before `for` (near misses)


def alert_labels(result: Labels, rule_labels: Labels, name: str) -> Labels:
    merged = {k: v for k, v in result if k != "__name__"}
    merged.update(dict(rule_labels))
    merged["alertname"] = name
    return tuple(sorted(merged.items()))


def run(
    points: list[float],
    values: dict[float, float],
    for_s: float,
    keep_firing_for_s: float,
    labels: Labels,
    lower_is_worse: bool = False,
) -> SeriesOutcome:
    """The episodes of one label set, given its expression's values on the evaluation grid `points`."""
    worse = min if lower_is_worse else max
    episodes: list[Episode] = []
    near = 0
    state, active_at, fired_at, keep_since, peak = "inactive", 0.0, 0.0, None, 0.0
    for ts in points:
        v = values.get(ts)
        if v is not None:
            if state == "inactive":
                state, active_at, peak = "pending", ts, v
            else:
                peak = worse(peak, v)
            keep_since = None
        elif state == "inactive":
            continue
        else:
            if state == "firing" and keep_firing_for_s > 0:
                keep_since = ts if keep_since is None else keep_since
                if ts - keep_since < keep_firing_for_s:
                    continue
            if state == "firing":
                episodes.append(Episode(labels, active_at, fired_at, ts, peak))
            else:
                near += 1
            state, keep_since = "inactive", None
            continue
        if state == "pending" and ts - active_at >= for_s:
            state, fired_at = "firing", ts
    if state == "firing":
        episodes.append(Episode(labels, active_at, fired_at, None, peak))
    return SeriesOutcome(episodes, near)
