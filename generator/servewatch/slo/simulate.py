"""What the generated SLO rules answer on a synthetic scenario, computed the way Prometheus 3.5 does,
so the generated promtool tests can state exactly which burn-rate alerts fire, with which value and
which remaining budget in their descriptions.

It follows the rules' semantics from the SLO spec (good and valid event rates per minute, averaged
over each window, burn = error ratio / (1 - objective), the low-traffic guard, `for`), with
Prometheus' own arithmetic where the last digits matter: `rate()`'s extrapolation to the window's
edges (`extrapolated` below), Kahan-compensated `avg_over_time` and `sum`, left-open ranges `(t - w, t]`.
promtool then checks every one of these numbers against the real rules.

Time is in minutes: input sample i is at i minutes, and the rules are evaluated every `every` minutes
on the same grid, from minute 0 (the generated test file sets both): every group the proof loads is
evaluated at each of those steps, so a recorded series has a sample at each and none between.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from ..spec import slos as s
from ..spec.schema import seconds as _seconds
from ..templates import humanize, humanize_percentage

STEP_S = 60  # seconds between two input samples


@functools.cache
def seconds(duration: str) -> float:
    """A window's seconds, parsed once: the timeline asks for the same few windows at every step."""
    return _seconds(duration)


Values = list[float | None]  # one counter sample per minute (None: no sample)


def kahan_inc(inc: float, total: float, c: float) -> tuple[float, float]:
    """One step of the Neumaier-Kahan compensated summation Prometheus uses for sums."""
    t = total + inc
    if math.isinf(t):
        c = 0.0
    elif abs(total) >= abs(inc):
        c += (total - t) + inc
    else:
        c += (inc - t) + total
    return t, c


def kahan_add(values, total: float, c: float) -> tuple[float, float]:
    """kahan_inc over `values` in order, inlined: the simulation's hottest loop (the same operations
    in the same order, so the same bits)."""
    isinf = math.isinf
    for inc in values:
        t = total + inc
        if isinf(t):
            c = 0.0
        elif abs(total) >= abs(inc):
            c += (total - t) + inc
        else:
            c += (inc - t) + total
        total = t
    return total, c


def kahan_sum(values: list[float]) -> float:
    total, c = kahan_add(values, 0.0, 0.0)
    return total + c


def avg_over_time(values: list[float]) -> float:
    """avg_over_time of the samples, as Prometheus 3.5 computes it (first sample pre-set, then Kahan)."""
    total, c = kahan_add(itertools.islice(values, 1, None), values[0], 0.0)
    n = float(len(values))
    return total / n + c / n


def extrapolated(
    values: Values,
    at: int,
    window_s: float,
    step_s: float = STEP_S,
    is_rate: bool = True,
    histogram: bool = False,
) -> float | None:
    """rate() (or increase()) of a float counter sampled every `step_s` (sample i at i * step_s), over
    `(t - window, t]` at step `at`: extrapolated to the window's edges as Prometheus 3.5 does. None
    where Prometheus returns no sample (fewer than two samples in the window). `histogram`: the
    counter is a field of a native histogram (its count, a bucket), which Prometheus 3.5 extrapolates
    without the float counter's stop at zero."""
    return extrapolated_at(values, (at,), window_s, step_s, is_rate, histogram)[0]


def extrapolated_at(
    values: Values,
    steps,
    window_s: float,
    step_s: float = STEP_S,
    is_rate: bool = True,
    histogram: bool = False,
) -> list[float | None]:
    """extrapolated() at each of `steps`, in one loop: a timeline asks for every evaluation."""
    span, floor, last = window_s / step_s, math.floor, len(values) - 1
    out: list[float | None] = []
    for at in steps:
        first_i = max(0, floor(at - span) + 1)  # the first sample in (t - window, t]
        last_i = min(at, last)
        pts = values[first_i : last_i + 1]
        if None in pts:  # the rare series with gaps: the samples there, by minute
            present = [(i, v) for i, v in enumerate(pts, first_i) if v is not None]
            if present:
                first_i, last_i = present[0][0], present[-1][0]
            pts = [v for _, v in present]
        if len(pts) < 2:
            out.append(None)
            continue
        first_v, last_v = pts[0], pts[-1]
        result = last_v - first_v
        prev = first_v
        for v in itertools.islice(pts, 1, None):
            if v < prev:  # a counter reset: the new run started from zero
                result += prev
            prev = v
        to_start = (first_i - at) * step_s + window_s
        to_end = (at - last_i) * step_s
        sampled = (last_i - first_i) * step_s
        average = sampled / (len(pts) - 1)
        threshold = average * 1.1
        if to_start >= threshold:  # the series starts inside the window: extrapolate half an interval
            to_start = average / 2
        if result > 0 and first_v >= 0 and not histogram:  # never extrapolate a counter below zero
            to_start = min(to_start, sampled * (first_v / result))
        if to_end >= threshold:
            to_end = average / 2
        factor = (sampled + to_start + to_end) / sampled
        if is_rate:
            factor /= window_s
        out.append(result * factor)
    return out


def rate(values: Values, at: int, window_s: float, histogram: bool = False) -> float | None:
    """rate(counter[window]) at step `at` of the one-minute grid."""
    return extrapolated(values, at, window_s, histogram=histogram)


def rates(values: Values, steps, window_s: float, histogram: bool = False) -> list[float | None]:
    """rate() at each of `steps`."""
    return extrapolated_at(values, steps, window_s, histogram=histogram)


def avg_with_last(prefix: list[float]):
    """avg_over_time of `prefix` plus one more sample, as a function of that sample: the summation
    of the prefix is done once (Prometheus adds in time order, so the last sample comes last)."""
    if not prefix:
        return lambda last: avg_over_time([last])
    total, c = kahan_add(itertools.islice(prefix, 1, None), prefix[0], 0.0)
    n = float(len(prefix) + 1)

    def avg(last: float) -> float:
        t, cc = kahan_inc(last, total, c)
        return t / n + cc / n

    return avg


@dataclass(frozen=True)
class Counters:
    """The raw counters of one model: those the SLI counts as good and those it counts as valid
    (a counter may be both, e.g. finished_reason="stop"), each with the series of the recorded rate
    it is summed into (its `le` or reason; slo/kinds.py).

    `by_part`: the SLO rules read a recorded rate (per model and part) and sum its parts, so
    Prometheus sums the engines of each part first, then the parts in the order of their label
    values; else they sum the raw counters' rates at once. `absent_good_is_zero`: whether a model
    without a good counter has 0 good events (else its SLI is absent)."""

    good: tuple[tuple[str, Values], ...]
    valid: tuple[tuple[str, Values], ...]
    by_part: bool = False
    absent_good_is_zero: bool = True
    # one native histogram per engine (config.histograms): good[i] and valid[i] are its bucket at the
    # threshold and its count, and the rules count good events as histogram_fraction x histogram_count
    native: bool = False
    # good events are the valid ones less `bad` (a gateway's requests less its errors; slo/kinds.py):
    # `good` is then empty, and a model without a bad counter has no bad events
    bad: tuple[tuple[str, Values], ...] = ()
    subtracts: bool = False


def recorded(counters: Counters, at: int, rate_s: float) -> tuple[float | None, float | None]:
    """The good and valid event rates the rules record at step `at` (None: no sample)."""
    return recorded_at(counters, (at,), rate_s)[0]


Recorded = tuple[float | None, float | None]


def recorded_at(counters: Counters, steps, rate_s: float) -> list[Recorded]:
    """recorded() at each of `steps`: each counter's rates at all of them first, series by series,
    then summed per step in the order the rules sum them."""
    if counters.native:
        return _native_recorded(counters, steps, rate_s)
    valid = _sum_rates(counters.valid, steps, rate_s, counters.by_part)
    if counters.subtracts:  # valid - (bad or 0 * valid), as the good-events rule reads
        bad = _sum_rates(counters.bad, steps, rate_s, counters.by_part)
        return [
            (None if v is None else v - (0 * v if b is None else b), v)
            for v, b in zip(valid, bad, strict=True)
        ]
    good = _sum_rates(counters.good, steps, rate_s, counters.by_part)
    zero = counters.absent_good_is_zero  # the good recording falls back to 0 where there are valid events
    return [
        (0 * v if g is None and v is not None and zero else g, v) for g, v in zip(good, valid, strict=True)
    ]


def _native_recorded(counters: Counters, steps, rate_s: float) -> list[Recorded]:
    """recorded() over native histograms: per engine, good = (g / c) * c as histogram_fraction (the
    buckets up to the threshold over the count) times histogram_count computes it, 0 where the
    engine observed nothing (promql/histograms.py count_below)."""
    valid_rates = [rates(v, steps, rate_s, histogram=True) for _, v in counters.valid]
    good_rates = [rates(g, steps, rate_s, histogram=True) for _, g in counters.good]
    out = []
    for i in range(len(steps)):
        valid, good = [r[i] for r in valid_rates], [r[i] for r in good_rates]
        per_engine = [
            None if g is None or c is None else (g / c) * c if c else 0.0
            for g, c in zip(good, valid, strict=True)
        ]
        valid_sum, good_sum = _sum(valid), _sum(per_engine)
        if good_sum is None and valid_sum is not None and counters.absent_good_is_zero:
            good_sum = 0 * valid_sum
        out.append((good_sum, valid_sum))
    return out


def _sum_rates(series, steps, rate_s: float, by_part: bool) -> list[float | None]:
    if not by_part:
        return _sum_each([rates(v, steps, rate_s) for _, v in series], len(steps))
    parts: dict[str, list[list[float | None]]] = {}
    for part, values in series:
        parts.setdefault(part, []).append(rates(values, steps, rate_s))
    return _sum_each([_sum_each(parts[p], len(steps)) for p in sorted(parts)], len(steps))


def _sum_each(columns: list[list[float | None]], steps: int) -> list[float | None]:
    """_sum at each step of `columns` (a list per series, a value per step)."""
    if len(columns) == 1:  # the usual one engine: _sum of one value, v + 0.0
        return [None if v is None else v + 0.0 for v in columns[0]]
    return [_sum(at) for at in zip(*columns, strict=True)] if columns else [None] * steps


@dataclass(frozen=True)
class Firing:
    """One firing burn-rate alert at an evaluation."""

    row: s.BurnWindow
    value: float  # the burn rate over the long window
    remaining: float | None  # slo:period_error_budget_remaining:ratio at that evaluation


# How close (relative) a value may come to a threshold or a rounding edge before the step counts as
# a close call: far above float noise, far below anything a scenario means.
CLOSE = 1e-9


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= CLOSE * max(abs(a), abs(b), 1e-300)


def _near_range(b: float) -> tuple[float, float]:
    """Bounds that hold every finite `a` with _near(a, b) (for a finite b), with room to spare (there
    |a - b| <= CLOSE * |b| * (1 + 2 * CLOSE), or CLOSE * 1e-300): a comparison that rules out almost
    every value before _near runs. _near also holds for an infinite `a` (_INFINITE)."""
    margin = abs(b) * 1e-6 + 1e-290
    return b - margin, b + margin


_INFINITE = (math.inf, -math.inf)


def _text_is_stable(value: float, fmt) -> bool:
    """Whether float noise in `value` could change how a template prints it."""
    return fmt(value * (1 + CLOSE)) == fmt(value) == fmt(value * (1 - CLOSE))


class Timeline:
    """One model's SLO rules evaluated every `every` minutes over minutes 0..steps-1; between two
    evaluations the alerts stay as the last one left them (what promtool checks there).

    The recorded event rates are exact. Window averages are kept as running sums, which is fast and
    exact to float noise: enough to decide, at every step, which rows hold (a comparison within that
    noise is a close call). `firing(at)` recomputes a step with Prometheus' own summation, for the
    values the generated test prints.
    """

    def __init__(
        self,
        slo: s.SLO,
        objective: float,
        counters: Counters,
        steps: int,
        rate_window: str,
        exact_steps: frozenset[int] = frozenset(),
        every: int = 1,
    ):
        self.slo, self.rate_window, self.every = slo, rate_window, every
        self.budget = 1 - objective  # the rules compute 1 - slo:objective:ratio, and 0 * x + o is o
        # steps whose inputs were searched to sit on an edge (edges.py): decided with Prometheus'
        # own sums, and an edge met there is the point, not a close call
        self.exact_steps = exact_steps
        rate_s = seconds(rate_window)
        self.valid: list[float | None] = [None] * steps
        self.good: list[float | None] = [None] * steps
        evaluations = range(0, steps, every)
        for at, (good, valid) in zip(evaluations, recorded_at(counters, evaluations, rate_s), strict=True):
            self.good[at], self.valid[at] = good, valid
        self._running = {"valid": _running(self.valid), "good": _running(self.good)}
        self.close_calls: set[int] = set()
        self._exact: dict[tuple[str, int, float], float | None] = {}
        self._rough: list[list[s.BurnWindow]] = []
        self._rough_avg: dict[tuple[str, str], tuple[range, list[float | None]]] = {}
        self._firsts: dict[str, list[int]] = {}
        self._decide(steps)

    def evaluated(self, at: int) -> bool:
        """Whether the rules are evaluated at minute `at`."""
        return at % self.every == 0

    # -- window averages ----------------------------------------------------------------------------
    def _avg(self, which: str, at: int, window_s: float) -> float | None:
        """avg_over_time of the recorded `which` over the window, with Prometheus' own sums."""
        key = (which, at, window_s)
        if key not in self._exact:  # the same steps are asked for again and again (checks, text)
            first = max(0, math.floor(at - window_s / STEP_S) + 1)
            values = [v for v in getattr(self, which)[first : at + 1] if v is not None]
            self._exact[key] = avg_over_time(values) if values else None
        return self._exact[key]

    def error(self, at: int, window: str) -> float | None:
        """slo:sli_error:ratio_rate<window> at step `at` (None: no sample)."""
        if window == self.rate_window:
            good, valid = self.good[at], self.valid[at]
        else:
            good = self._avg("good", at, seconds(window))
            valid = self._avg("valid", at, seconds(window))
        if good is None or valid is None or not valid > 0:
            return None
        return 1 - good / valid

    def remaining(self, at: int) -> float | None:
        """slo:period_error_budget_remaining:ratio at step `at`."""
        err = self.error(at, self.slo.window)
        return None if err is None else 1 - err / self.budget

    def holds(self, at: int, row: s.BurnWindow) -> bool:
        """Whether the row's condition holds at `at`, with Prometheus' own sums; a comparison within
        float noise is a close call (every evaluation at once from the running sums: _rough_holds)."""
        held = True
        for w in (row.long, row.short):
            err = self.error(at, w)
            if err is None:
                return False
            burn = err / self.budget
            if _near(burn, row.burn_rate) and at not in self.exact_steps:
                self.close_calls.add(at)
            held = held and burn > row.burn_rate
        guard = self.slo.alerting.min_events
        if guard:
            rate_ = self._avg("valid", at, seconds(row.long))
            if rate_ is None:
                return False
            events = rate_ * seconds(row.long)
            if _near(events, guard) and at not in self.exact_steps:
                self.close_calls.add(at)
            held = held and events >= guard
        return held

    def _rough_burns(self, window: str) -> list[float | None]:
        """burn(at, window) from the running sums at every evaluation, at once: what holds() computes
        per row and step (the same operations), for the windows the rows share."""
        burns: list[float | None] = [None] * len(self.valid)
        budget = self.budget
        if window == self.rate_window:
            pairs = ((at, self.good[at], self.valid[at]) for at in range(0, len(burns), self.every))
        else:
            pairs = zip(*self._rough_avgs("good", window), self._rough_avgs("valid", window)[1], strict=True)
        for at, good, valid in pairs:
            if good is not None and valid is not None and valid > 0:
                burns[at] = (1 - good / valid) / budget
        return burns

    def _rough_avgs(self, which: str, window: str) -> tuple[range, list[float | None]]:
        """The window average of the recorded `which` at every evaluation, from the running sums (once
        per window: the rows' burns and guards share them)."""
        key = (which, window)
        if key not in self._rough_avg:
            self._rough_avg[key] = self._rough_avgs_of(which, window)
        return self._rough_avg[key]

    def _rough_avgs_of(self, which: str, window: str) -> tuple[range, list[float | None]]:
        sums, counts = self._running[which]
        evaluations = range(0, len(self.valid), self.every)
        if window not in self._firsts:  # the window's first minute at each evaluation, as _avg finds it
            span, floor = seconds(window) / STEP_S, math.floor
            self._firsts[window] = [max(0, floor(at - span) + 1) for at in evaluations]
        avgs = [
            (sums[at + 1] - sums[first]) / n if (n := counts[at + 1] - counts[first]) else None
            for at, first in zip(evaluations, self._firsts[window], strict=True)
        ]
        return evaluations, avgs

    def _rough_holds(self, rows) -> dict[int, list[bool]]:
        """holds(at, row) at every evaluation from the running sums, per row index, noting close calls
        the same way (the caller decides the steps in exact_steps exactly, so none of them is needed).
        This loop runs for every row at every step of every timeline: _near only runs in its range."""
        burns = {w: self._rough_burns(w) for row in rows for w in (row.long, row.short)}
        guard = self.slo.alerting.min_events
        events: dict[str, list[float | None]] = {}
        if guard:
            for row in rows:
                if row.long not in events:
                    window_s = seconds(row.long)
                    events[row.long] = [None] * len(self.valid)
                    for at, avg in zip(*self._rough_avgs("valid", row.long), strict=True):
                        if avg is not None:
                            events[row.long][at] = avg * window_s
        close, exact = self.close_calls, self.exact_steps
        guard_lo, guard_hi = _near_range(guard or 0)
        out: dict[int, list[bool]] = {}
        for ri, row in enumerate(rows):
            held_at = out[ri] = [False] * len(self.valid)
            long_, short, threshold = burns[row.long], burns[row.short], row.burn_rate
            lo, hi = _near_range(threshold)
            rows_events = events.get(row.long)
            for at in range(0, len(held_at), self.every):
                burn = long_[at]
                if burn is None or at in exact:
                    continue
                if (lo <= burn <= hi or burn in _INFINITE) and _near(burn, threshold):
                    close.add(at)
                burn_short = short[at]
                if burn_short is None:
                    continue
                if (lo <= burn_short <= hi or burn_short in _INFINITE) and _near(burn_short, threshold):
                    close.add(at)
                held = burn > threshold and burn_short > threshold
                if guard:
                    n = rows_events[at]
                    if n is None:
                        continue
                    if (guard_lo <= n <= guard_hi or n in _INFINITE) and _near(n, guard):
                        close.add(at)
                    held = held and n >= guard
                held_at[at] = held
        return out

    # -- alert states ---------------------------------------------------------------------------------
    def _decide(self, steps: int) -> None:
        """Which rows fire at each step: held for `for` (Prometheus: firing once now - active >= for)."""
        since: dict[int, int] = {}
        for_s = seconds(self.slo.alerting.for_)
        rows = self.slo.alerting.windows
        rough = self._rough_holds(rows)
        for at in range(steps):
            if not self.evaluated(at):
                self._rough.append(self._rough[-1])
                continue
            now = []
            exact = at in self.exact_steps
            for ri, row in enumerate(rows):
                if not (self.holds(at, row) if exact else rough[ri][at]):
                    since.pop(ri, None)
                    continue
                if (at - since.setdefault(ri, at)) * STEP_S >= for_s:
                    now.append(row)
            self._rough.append(now)

    def fires(self, at: int) -> bool:
        return bool(self._rough[at])

    def fires_row(self, at: int, row: s.BurnWindow) -> bool:
        return row in self._rough[at]

    def events(self, at: int, window: str) -> float | None:
        """What a row's low-traffic guard compares with min_events: the valid events over `window`."""
        rate_ = self._avg("valid", at, seconds(window))
        return None if rate_ is None else rate_ * seconds(window)

    def burn(self, at: int, window: str) -> float | None:
        """The burn rate over `window` at `at` (the SLI error ratio over the budget)."""
        err = self.error(at, window)
        return None if err is None else err / self.budget

    def pages(self, at: int) -> bool:
        return any(row.tier == "page" for row in self._rough[at])

    def firing(self, at: int) -> list[Firing]:
        """The firing rows at evaluation `at`, with the burn rate and remaining budget Prometheus
        computes."""
        assert self.evaluated(at), f"minute {at} is no evaluation"
        out = []
        remaining = self.remaining(at)
        for row in self._rough[at]:
            if not self.holds(at, row):
                self.close_calls.add(at)  # the running sums and Prometheus' sums disagree here
                continue
            value = self.error(at, row.long) / self.budget
            out.append(Firing(row, value, remaining))
            stable = _text_is_stable(value, humanize)
            if remaining is not None:
                stable = stable and _text_is_stable(remaining, humanize_percentage)
            if not stable:
                self.close_calls.add(at)
        return out


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    if len(present) == 1:  # the usual one engine: kahan_sum of one value is 0.0 + v, nothing to compensate
        return present[0] + 0.0
    return kahan_sum(present) if present else None


def _running(series: list[float | None]) -> tuple[list[float], list[int]]:
    """Running sums and counts of the present samples, for window averages in O(1)."""
    sums, counts = [0.0], [0]
    for v in series:
        sums.append(sums[-1] + (v or 0.0))
        counts.append(counts[-1] + (v is not None))
    return sums, counts
