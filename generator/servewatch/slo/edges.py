"""Counter samples that put one burn-rate row exactly on an edge: a burn rate of exactly the row's
factor, or exactly min_events in its long window, to the last bit of what Prometheus computes. Only
there does a comparison that wrongly includes its edge (`>=` for `>`) or leaves it out (`>` for `>=`)
answer differently, so only there is a test of which one the rules use.

No round numbers get there: the burn rate is an average of extrapolated rates divided by 1 - objective
(1 - 0.99 is not 0.01 in float64). So the edge is searched for, in two stages. A secant search on one
real-valued knob of the traffic's last stretch (its error ratio, or its request rate) comes within
float noise of the edge; then the last counter sample is bisected float by float (positive floats are
ordered like their bit patterns) until the rules land on the edge itself. Where no value of that
sample does, the other counter's last sample moves one float and the bisection runs again.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable

from ..spec.schema import seconds
from .simulate import STEP_S, Counters, avg_with_last, recorded, recorded_at

Lists = tuple[list[float], list[float]]  # cumulative good and valid counts, sample i at minute i
# The edge sits at an evaluation, and the last sample searched is the one taken at that minute.
MakeCounters = Callable[[list[float], list[float]], Counters]  # -> the SLI's input series

SECANT_STEPS = 12
# Near enough for the last sample to finish the job: its float-by-float search spans 1e-9 of it, which
# moves any edge's quantity by far more than this.
CLOSE_ENOUGH = 1e-11
OTHER_SAMPLE_TRIES = 64  # floats the other counter's last sample may move


@dataclass(frozen=True)
class Edge:
    """What sits on the edge at step `at`: the burn rate over `window` ("burn") or the valid events
    over it ("events"), equal to `target`."""

    what: str
    window: str
    target: float
    at: int


class EdgeProbe:
    """The rules' value of an edge's quantity for candidate last samples of the two counters, the
    earlier samples fixed (their recorded rates and window sums are computed once)."""

    def __init__(
        self, lists: Lists, make: MakeCounters, edge: Edge, rate_window: str, budget: float, every: int = 1
    ):
        self.good, self.valid = lists
        self.make, self.edge, self.budget = make, edge, budget
        self.rate_s = seconds(rate_window)
        self.direct = edge.window == rate_window  # the SLI record itself, no window average
        at, counters = edge.at, make(*lists)
        assert at % every == 0, f"the edge at minute {at} is no evaluation"
        first = max(0, math.floor(at - seconds(edge.window) / STEP_S) + 1)
        # the window's earlier records: one per evaluation, every `every` minutes
        before = recorded_at(counters, [m for m in range(first, at) if m % every == 0], self.rate_s)
        self.avg_good = avg_with_last([g for g, _ in before if g is not None])
        self.avg_valid = avg_with_last([v for _, v in before if v is not None])
        self.tail = int(self.rate_s // STEP_S) + 2  # samples one rate window needs

    def value(self, good_last: float, valid_last: float) -> float | None:
        at, k = self.edge.at, self.tail
        good = self.good[at - k : at] + [good_last]
        valid = self.valid[at - k : at] + [valid_last]
        g, v = recorded(self.make(good, valid), k, self.rate_s)
        if g is None or v is None:
            return None
        if not self.direct:
            g, v = self.avg_good(g), self.avg_valid(v)
        if self.edge.what == "events":
            return v * seconds(self.edge.window)
        return None if not v > 0 else (1 - g / v) / self.budget


def secant(quantity: Callable[[float], float | None], target: float, k0: float, k1: float) -> float | None:
    """A knob value whose quantity is the target to within float noise (None: the search strays)."""
    q0, q1 = quantity(k0), quantity(k1)
    for _ in range(SECANT_STEPS):
        if q0 is None or q1 is None:
            return None
        if abs(q1 - target) <= CLOSE_ENOUGH * abs(target):
            return k1
        if q1 == q0:
            return None
        k0, k1, q0 = k1, k1 + (target - q1) * (k1 - k0) / (q1 - q0), q1
        q1 = quantity(k1)
    return None


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def on_edge(
    probe: EdgeProbe, tune: str, around: tuple[float, float], lo: float, hi: float
) -> tuple[float, float] | None:
    """(good, valid) last samples within [lo, hi] for the `tune`d counter ("good" or "valid") that put
    the probe's quantity exactly on the edge; `around` is where the secant search ended."""
    target = probe.edge.target

    def value(x: float, other: float) -> float | None:
        return probe.value(x, other) if tune == "good" else probe.value(other, x)

    start, other0 = around if tune == "good" else (around[1], around[0])
    for step in range(OTHER_SAMPLE_TRIES):
        # 0, +1, -1, +2, ... floats away from where the secant search left the other counter
        other = _float(_bits(other0) + (step + 1) // 2 * (1 if step % 2 else -1)) if step else other0
        a, b = _bits(max(lo, start * (1 - 1e-9))), _bits(min(hi, start * (1 + 1e-9)))
        qa, qb = value(_float(a), other), value(_float(b), other)
        if qa is None or qb is None or (qa - target) * (qb - target) > 0:
            continue  # the edge is not between them
        rising = qb > qa
        while b - a > 1:
            mid = (a + b) // 2
            q = value(_float(mid), other)
            if q is None:
                break
            if (q < target) == rising:
                a = mid
            else:
                b = mid
        for bits in range(a - 2, b + 3):
            x = _float(bits)
            if lo <= x <= hi and value(x, other) == target:
                return (x, other) if tune == "good" else (other, x)
    return None
