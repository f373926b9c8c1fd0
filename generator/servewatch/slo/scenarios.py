"""The scenarios that prove an SLO's burn-rate alerts, designed from the SLO itself: every burn rate is
relative to the objective and the alert rows, every time relative to the windows, so tuning an
objective, a threshold or the rows changes the scenarios with them and never breaks them.

Each scenario is one model's traffic (the model is named after it) and a claim: a 15x burn pages
within the workbook's bound, a 2x burn never pages, ... The claim is checked here on the simulation
of the rules (simulate.py) at every evaluation, and gives the times promtool checks. All scenarios
of an SLO run side by side in one promtool test, one model each, because promtool's cost is per
evaluation step, not per series; at each check time the test lists every alert of every model.
The rules are evaluated every `every` minutes (plan/slo_proofs.py), and every check, edge and
searched sample is at one of those evaluations.
A claim that the SLO's own settings make impossible is a spec error naming the SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from ..catalog import ClientOutcome
from ..errors import SpecError
from ..spec import slos as s
from ..spec.schema import seconds
from .kinds import ABORT, Synthetic, kind_of
from .plan import INPUTS_ALERT, INPUTS_FOR
from .edges import Edge, EdgeProbe, on_edge, secant
from .simulate import Counters, Firing, Timeline, avg_over_time, rate

SCENARIO_PREFIX = "slo-test/"  # model names of the scenarios' synthetic engines
# Every scenario is quiet until this minute (clean history first), so the checks up to it prove that
# nothing fires for any model: each SLO alert has silent checks besides its firing ones.
QUIET_UNTIL = 60
IDLE = "idle"  # the scenario with no traffic, whose records the generated test checks too
INPUT_MISSING = "bucket-missing"  # the scenario whose good-events input is not scraped
IDLE_CHECK = 120  # slo-test/idle, well past every short window: the generated test checks its records
OUTSIDE = "out-of-scope"  # the scenarios of models outside an SLO's scope (plan/slo_engines.py)


def scenario_model(key: str) -> str:
    return SCENARIO_PREFIX + key


def is_outside(model: str) -> bool:
    """Whether a synthetic model is one of the out-of-scope scenario's, which the scope refuses."""
    return model.startswith(scenario_model(OUTSIDE))


def minutes(duration: str) -> int:
    return math.ceil(seconds(duration) / 60)


@dataclass
class Traffic:
    """One model's requests, minute by minute: how many finish, and which share of them is bad."""

    model: str
    valid_per_min: list[float] = field(default_factory=list)
    error_ratio: list[float] = field(default_factory=list)
    resets: tuple[int, ...] = ()  # minutes at which the engine restarts (counters start over)
    # sample -> (good, valid) counts set exactly there (edges.py); later minutes count on from them
    pinned: dict[int, tuple[float, float]] = field(default_factory=dict)

    def add(self, length: int, per_min: float, error_ratio: float) -> "Traffic":
        self.valid_per_min += [per_min] * length
        self.error_ratio += [error_ratio] * length
        return self

    def until(self, steps: int) -> "Traffic":
        """Keep the last minute's traffic up to `steps` samples."""
        return self.add(steps - 1 - len(self.valid_per_min), self.valid_per_min[-1], self.error_ratio[-1])

    def counters(self) -> tuple[list[float], list[float]]:
        """Cumulative good and valid counters (sample i at minute i, starting at 0)."""
        good, valid = [0.0], [0.0]
        for i, (n, e) in enumerate(zip(self.valid_per_min, self.error_ratio, strict=True), 1):
            if i in self.resets:
                good.append(0.0)
                valid.append(0.0)
                continue
            good.append(good[-1] + n * (1 - e))
            valid.append(valid[-1] + n)
            if i in self.pinned:
                good[-1], valid[-1] = self.pinned[i]
        return good, valid


@dataclass
class ModelRun:
    traffic: Traffic
    objective: float
    param: float | None  # the kind's per-model parameter (a latency threshold)
    decoys: tuple[float, ...] = ()
    series: Synthetic = field(default_factory=list)
    timeline: Timeline | None = None
    exact_steps: frozenset[int] = frozenset()  # steps whose inputs sit exactly on an edge (edges.py)
    good_missing: bool = False  # its good-events input is not scraped (a dropped bucket)
    aborted: float = 0.0  # the share of its requests that the clients abort

    @property
    def outside(self) -> bool:
        """Outside the SLO's scope: its series are there, and the rules count none of them."""
        return is_outside(self.traffic.model)


@dataclass
class SloScenario:
    """A claim about one SLO's alerts, shown on one or two models' traffic.

    `prove` checks the claim on the simulated timelines and returns the minutes promtool checks."""

    key: str  # names the scenario's model: slo-test/<key>
    claim: str
    why: str
    steps: int  # minutes the claim needs
    runs: list[ModelRun]
    prove: Callable[["SloScenario"], list[int] | None]
    checks: list[int] = field(default_factory=list)
    # a boundary case some settings cannot show (a `for` as long as the window, a row no failure
    # ratio reaches): left out then, instead of refusing the spec
    optional: bool = False

    def fires(self, at: int, run: int | None = None) -> bool:
        runs = self.runs if run is None else [self.runs[run]]
        return any(r.timeline.fires(at) for r in runs)

    def pages(self, at: int) -> bool:
        return any(r.timeline.pages(at) for r in self.runs)

    def first_page(self, start: int) -> int | None:
        return next((at for at in range(start, self.steps) if self.pages(at)), None)


@dataclass
class Batch:
    """Scenarios proven side by side in one promtool test, over their longest one's minutes: at each
    of `checks` the test lists every alert of every model in it."""

    scenarios: list[SloScenario]
    checks: list[int] = field(default_factory=list)

    @property
    def runs(self) -> list[ModelRun]:
        return [r for sc in self.scenarios for r in sc.runs]

    def firing(self, at: int) -> list[tuple[ModelRun, Firing]]:
        """Every alert firing at `at`, with the values Prometheus computes."""
        return [(r, f) for r in self.runs for f in r.timeline.firing(at)]


@dataclass
class Proof:
    """All scenarios of one SLO, simulated over `steps` minutes and proven in batches."""

    batches: list[Batch]
    steps: int

    @property
    def scenarios(self) -> list[SloScenario]:
        return [sc for b in self.batches for sc in b.scenarios]

    @property
    def runs(self) -> list[ModelRun]:
        return [r for b in self.batches for r in b.runs]


# promtool's cost of a test, measured on the default SLOs: each evaluation costs about as much as this
# many input series evaluated once (the rules' fixed work against the range reads).
MINUTE_COST_IN_SERIES = 8


def batched(scenarios: list[SloScenario], every: int = 1) -> list[list[SloScenario]]:
    """The scenarios in the batches promtool proves fastest: by length, each batch a run of similar
    lengths (a short claim in a long test pays for minutes it does not need, and every test pays each
    of its minutes once)."""
    ordered = sorted(scenarios, key=lambda sc: (max(sc.checks), sc.key))
    best, cut = [0.0] + [math.inf] * len(ordered), [0] * (len(ordered) + 1)
    for j in range(1, len(ordered) + 1):
        series = 0
        for i in range(j - 1, -1, -1):
            series += sum(len(r.series) for r in ordered[i].runs)
            evaluations = max(ordered[j - 1].checks) // every + 1
            cost = best[i] + (MINUTE_COST_IN_SERIES + series) * evaluations
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out, j = [], len(ordered)
    while j:
        out.append(ordered[cut[j] : j])
        j = cut[j]
    return out[::-1]


# (model_name, metric, extra labels) -> the selector of one input series of that model
SeriesName = Callable[[str, str, dict[str, str]], str]


class Designer:
    """The scenarios of one SLO."""

    def __init__(
        self,
        name: str,
        slo: s.SLO,
        rate_window: str,
        series_name: SeriesName,
        where,
        by_part: bool = False,
        native: bool = False,
        also_read: tuple[float, ...] = (),
        solo: bool = False,
        outcome: ClientOutcome | None = None,
        every: int = 1,
    ):
        self.name, self.slo, self.rate_window = name, slo, rate_window
        self.every = every  # minutes between two evaluations of the rules
        # the SLI's kind; at the client, counting as the source's outcome says (catalog/gateway.yaml)
        self.kind = kind_of(slo.sli, outcome)
        # the scope selects one deployment (plan/slo_engines.py): every engine in it has the same
        # labels, so each scenario is proven in its own test, with one in-scope engine
        self.solo = solo
        # bucket bounds other SLOs read from the same histogram: every engine exports them, as a real
        # one does, so those SLOs see their inputs here (no SLOInputsMissing of theirs in this test)
        self.also_read = also_read
        self.by_part = by_part  # the rules read a recorded rate per part (simulate.Counters)
        # the rules read native histograms (config.histograms): a latency SLI's arithmetic differs
        self.native = native and self.kind.param == "threshold"
        self.series_name = series_name
        self.where = where  # the SLO's location, for errors
        self.budget = 1 - slo.objective
        rows = slo.alerting.windows
        self.pages = [r for r in rows if r.tier == "page"]
        self.tickets = [r for r in rows if r.tier == "ticket"]
        self.for_min = minutes(slo.alerting.for_)
        self.rate_min = minutes(rate_window)
        # enough traffic that the guard never matters unless a scenario wants it to
        self.per_min = float(max(60, math.ceil(slo.alerting.min_events / 6)))

    # -- the proof ----------------------------------------------------------------------------------
    def proof(self) -> Proof:
        designs = [self.steady_burn(), self.slow_burn(), self.burst(), self.idle(), self.counter_reset()]
        designs += [self.good_input_missing(), self.client_aborts(), self.out_of_scope()]
        designs += [self.tiny()] + [self.override(m) for m in sorted(self.slo.per_model)]
        for i, row in enumerate(self.slo.alerting.windows, 1):
            designs += [self.guard_edge(i, row), self.short_edge(i, row), self.long_edge(i, row)]
            designs += [self.exact_long(i, row), self.exact_short(i, row), self.exact_guard(i, row)]
        scenarios = [sc for sc in designs if sc is not None]
        steps = max(sc.steps for sc in scenarios)
        kind = self.kind
        for sc in scenarios:
            for r in sc.runs:
                self._simulate(kind, r.traffic.until(steps), r, steps)
            checks = sc.prove(sc)
            if checks is None and sc.optional:
                continue
            if checks is None:
                raise SpecError(
                    f"the generated SLO tests cannot show that {sc.claim} with these settings", self.where
                )
            sc.checks = sorted(set(checks))
        scenarios = [sc for sc in scenarios if sc.checks or not sc.optional]
        late = [at for sc in scenarios for at in sc.checks if at % self.every]
        assert not late, f"checks {late} are between two evaluations"  # a design's bug, not the spec's
        if self.solo:
            batches = [[part] for part in _one_engine_each(scenarios)]
        else:
            batches = batched(scenarios, self.every)
        proof = Proof([Batch(b) for b in batches], steps)
        if any(r.timeline.fires(QUIET_UNTIL) for r in proof.runs):
            raise SpecError(
                f"the generated SLO tests need minute {QUIET_UNTIL} quiet for every model", self.where
            )
        for batch in proof.batches:  # the list grows: a clash's scenario is proven in a test of its own
            batch.scenarios, apart = _without_clashes(batch)
            proof.batches += [Batch([sc]) for sc in apart]
            batch.checks = sorted(
                {self._steady(batch, steps, at) for sc in batch.scenarios for at in sc.checks}
            )
        proof.batches = [b for b in proof.batches if b.scenarios]
        return proof

    def _simulate(self, kind, traffic: Traffic, run: ModelRun, steps: int) -> None:
        """Build the model's input series, then evaluate the rules on them."""
        good, valid = traffic.counters()
        name = lambda metric, extra: self.series_name(traffic.model, metric, extra)  # noqa: E731
        run.series = kind.synthetic(
            name, self.slo.sli, run.param, None if run.good_missing else good, valid, run.decoys, run.aborted
        )
        counters = self.counters([] if run.outside else run.series)
        run.timeline = Timeline(
            self.slo, run.objective, counters, steps, self.rate_window, run.exact_steps, self.every
        )

    def _steady(self, batch: Batch, steps: int, at: int) -> int:
        """`at`, or the next evaluation whose outcome float noise cannot flip for any model of the
        batch. An evaluation where a model sits exactly on an edge stays: it was searched for, and is
        decided exactly."""
        if any(at in r.exact_steps for r in batch.runs):
            return at
        while at + self.every < steps:
            batch.firing(at)  # computes the step exactly, noting close calls
            if not any(at in r.timeline.close_calls for r in batch.runs):
                break
            at += self.every
        return at

    # -- helpers --------------------------------------------------------------------------------
    def step_down(self, minute: int) -> int:
        """The last evaluation at or before `minute`: what promtool checks there."""
        return minute - minute % self.every

    def step_up(self, minute: int) -> int:
        """The first evaluation at or after `minute`."""
        return -(-minute // self.every) * self.every

    def wait(self, minute: int) -> int:
        """The minutes from `minute` to the first evaluation at or after it."""
        return self.step_up(minute) - minute

    def counters(self, series: Synthetic) -> Counters:
        return Counters(
            good=tuple((x.part, x.values) for x in series if x.good),
            valid=tuple((x.part, x.values) for x in series if x.valid),
            by_part=self.by_part,
            absent_good_is_zero=self.kind.absent_good_is_zero,
            native=self.native,
            bad=tuple((x.part, x.values) for x in series if x.bad),
            subtracts=self.kind.subtracts,
        )

    def error_ratio(self, b: float, budget: float | None = None) -> float:
        """The error ratio of burn rate `b` (no more than 1: every request failing)."""
        return min(b * (budget or self.budget), 1.0)

    def feasible(self, b: float, budget: float | None = None) -> float:
        """`b`, or halfway from the highest alert rate to the most this budget can burn."""
        top = 1 / (budget or self.budget)
        return b if b < top else (max(r.burn_rate for r in self.slo.alerting.windows) + top) / 2

    def run(self, model: str, objective: float | None = None, param=None, decoys=(), resets=()) -> ModelRun:
        kind = self.kind
        default = getattr(self.slo.sli, kind.param) if kind.param else None
        param = default if param is None else param
        decoys = tuple(sorted((set(decoys) | set(self.also_read)) - {param}))
        traffic = Traffic(model, resets=resets)
        return ModelRun(traffic, objective or self.slo.objective, param, decoys)

    # -- the scenarios --------------------------------------------------------------------------
    def steady_burn(self) -> SloScenario | None:
        if not self.pages:
            return None
        fast = max(self.pages, key=lambda r: r.burn_rate)
        b = self.feasible(fast.burn_rate * 15 / 14.4)
        bound = minutes(fast.long) * fast.burn_rate / b  # the workbook's detection time
        prefix = max(minutes(r.long) for r in self.pages)  # every page window starts clean
        # the first evaluation once the bound, the rate window and `for` have passed
        due = self.step_up(prefix + math.ceil(bound) + self.rate_min + self.for_min)
        run = self.run(scenario_model("steady-burn"))
        run.traffic.add(prefix, self.per_min, 0.0).add(due + 10 - prefix, self.per_min, self.error_ratio(b))

        def prove(sc: SloScenario) -> list[int] | None:
            early, first = self.step_down(prefix + math.floor(0.9 * bound)), sc.first_page(prefix)
            if first is None or first > due or sc.pages(early):
                return None
            return [early, first - self.every, first, self.step_down(sc.steps - 1)]

        return SloScenario(
            "steady-burn",
            f"a steady {b:g}x burn pages within the workbook's bound",
            f"after {prefix} clean minutes the error ratio jumps to {b:g}x the budget; the {fast.long} row "
            f"pages within {fast.long} x {fast.burn_rate:g} / {b:g} = {bound:.1f} minutes (plus the "
            f"{self.rate_window} rate window, `for` and the wait for the next evaluation), and not at 90% "
            "of that",
            due + 10,
            [run],
            prove,
        )

    def slow_burn(self) -> SloScenario | None:
        if not self.tickets:
            return None
        low_ticket = min(r.burn_rate for r in self.tickets)
        low_page = min((r.burn_rate for r in self.pages), default=math.inf)
        b = self.feasible(2 * low_ticket if 2 * low_ticket < low_page else (low_ticket + low_page) / 2)
        prefix, length = QUIET_UNTIL, 300
        run = self.run(scenario_model("slow-burn"))
        run.traffic.add(prefix, self.per_min, 0.0).add(length, self.per_min, self.error_ratio(b))

        def prove(sc: SloScenario) -> list[int] | None:
            if any(sc.pages(at) for at in range(sc.steps)) or not sc.fires(sc.steps - 1):
                return None
            last = self.step_down(sc.steps - 1)
            return [self.step_down(at) for at in range(prefix + 30, sc.steps, 30)] + [last]

        return SloScenario(
            "slow-burn",
            f"a steady {b:g}x burn opens a ticket and never pages",
            f"{b:g}x is above the lowest ticket rate ({low_ticket:g}x) and below every page rate",
            prefix + length,
            [run],
            prove,
        )

    def burst(self) -> SloScenario | None:
        if not self.pages:
            return None
        fast = max(self.pages, key=lambda r: r.burn_rate)
        b = self.feasible(4 * fast.burn_rate)
        length = math.ceil(1.5 * minutes(fast.long) * fast.burn_rate / b) + self.rate_min + self.for_min
        prefix = max(minutes(r.long) for r in self.pages)
        length = self.step_up(prefix + length) - prefix  # the burst's last minute is an evaluation
        settle = self.step_up(max(minutes(r.short) for r in self.pages) + self.for_min) + 2 * self.every
        end = prefix + length
        run = self.run(scenario_model("burst"))
        run.traffic.add(prefix, self.per_min, 0.0).add(length, self.per_min, self.error_ratio(b))
        run.traffic.add(settle + 5, self.per_min, 0.0)

        def prove(sc: SloScenario) -> list[int] | None:
            if not sc.pages(end) or any(sc.pages(at) for at in range(end + settle, sc.steps)):
                return None
            return [end, end + settle]

        return SloScenario(
            "burst",
            f"a {length}-minute burst at {b:g}x pages, and stops paging once it ends",
            f"the short windows forget the burst: no page {settle} minutes after it ends (the longest "
            "page short window, `for` and two evaluations)",
            end + settle + 5,
            [run],
            prove,
        )

    def idle(self) -> SloScenario:
        run = self.run(scenario_model(IDLE))
        run.traffic.add(180, 0.0, 0.0)

        def prove(sc: SloScenario) -> list[int] | None:
            return (
                None
                if any(sc.fires(at) for at in range(sc.steps))
                else [self.step_down(10), QUIET_UNTIL, IDLE_CHECK, self.step_down(sc.steps - 1)]
            )

        return SloScenario(
            IDLE,
            "no traffic never fires",
            "counters that do not move give no error ratio at all (0/0), not a burn",
            181,
            [run],
            prove,
        )

    def good_input_missing(self) -> SloScenario | None:
        """A model whose good events' input is not scraped (a relabelling dropped the latency
        bucket at the threshold) while its count is: fast, healthy traffic that the old fallback to
        0 good events made 100% bad on every row. Its SLI is absent, nothing burns, and the
        inputs-missing alert names the bucket once its `for` has passed."""
        if self.kind.absent_good_is_zero:
            return None
        if self.native:  # one native histogram holds every bucket: no relabelling drops just one
            return None
        length = max(minutes(r.long) for r in self.pages or self.slo.alerting.windows) + 10
        run = self.run(scenario_model(INPUT_MISSING))
        run.good_missing = True
        run.traffic.add(length, self.per_min, 0.0)
        quiet = never_fires(self.step_down(length))
        # the inputs-missing alert is pending from the first evaluation on or later, so it must not
        # fire yet at the last evaluation before its `for` has passed since the first
        pending = self.step_up(minutes(INPUTS_FOR)) - self.every

        def prove(sc: SloScenario) -> list[int] | None:
            checks = quiet(sc)
            return None if checks is None else [pending, *checks]

        return SloScenario(
            INPUT_MISSING,
            "a model whose good-events bucket is not scraped never burns",
            "every request is fast, but a relabelling dropped the bucket at the threshold: the good "
            "events are unknown, so the SLI is absent rather than 100% bad, and "
            f"{INPUTS_ALERT} names the bucket instead, once its {INPUTS_FOR} `for` has passed",
            length + 1,
            [run],
            prove,
        )

    def out_of_scope(self) -> SloScenario | None:
        """Models just outside the SLO's scope, one failing every request and, for a latency SLI,
        one whose good-events bucket is not scraped: the rules count neither (no record), so neither
        fires a burn-rate or an inputs-missing alert."""
        if self.slo.scope is None:
            return None
        length = max(minutes(r.long) for r in self.pages or self.slo.alerting.windows) + 10
        failing = self.run(scenario_model(OUTSIDE))
        failing.traffic.add(QUIET_UNTIL, self.per_min, 0.0).add(length - QUIET_UNTIL, self.per_min, 1.0)
        runs = [failing]
        if not self.kind.absent_good_is_zero and not self.native:
            dropped = self.run(scenario_model(f"{OUTSIDE}-{INPUT_MISSING}"))
            dropped.good_missing = True
            dropped.traffic.add(length, self.per_min, 0.0)
            runs.append(dropped)
        return SloScenario(
            OUTSIDE,
            "a model outside the scope is never counted",
            f"every request of {runs[0].traffic.model} fails from minute {QUIET_UNTIL}, which would page "
            "on every row, but the scope leaves it out: no record has it and no alert fires for it"
            + (
                f"; {runs[-1].traffic.model} lacks the good-events bucket, and {INPUTS_ALERT} stays quiet"
                if len(runs) > 1
                else ""
            ),
            length + 1,
            runs,
            never_fires(self.step_down(length)),
        )

    def client_aborts(self) -> SloScenario | None:
        """Clients cancelling a share of the requests that would page on every page row were aborts
        errors, with no engine error: an SLI that does not count aborts as bad stays silent."""
        kind = self.kind
        if not kind.counts_aborts or ABORT in self.slo.sli.bad or not self.pages:
            return None
        fast = max(r.burn_rate for r in self.pages)
        share = min(1.5 * fast * self.budget, 0.5)
        length = max(minutes(r.long) for r in self.pages) + 10
        run = self.run(scenario_model("client-aborts"))
        run.aborted = share
        run.traffic.add(length, self.per_min, 0.0)

        return SloScenario(
            "client-aborts",
            f"client aborts of {share:.3g} of the requests and no engine error never fire",
            f"{ABORT} is not in `bad`: counted as failures, these aborts would burn "
            f"{share / self.budget:g}x, "
            "past every page row; clients that give up because the service is slow are the latency "
            "SLO's to catch",
            length + 1,
            [run],
            never_fires(self.step_down(length)),
        )

    def counter_reset(self) -> SloScenario:
        lowest = min(r.burn_rate for r in self.slo.alerting.windows)
        reset = 120
        run = self.run(scenario_model("counter-reset"), resets=(reset,))
        run.traffic.add(240, self.per_min, self.error_ratio(lowest / 2))

        def prove(sc: SloScenario) -> list[int] | None:
            if any(sc.fires(at) for at in range(sc.steps)):
                return None
            # the evaluations whose rate window holds the reset, the first one past it, later, the end
            held = [at for at in range(reset, reset + self.rate_min) if at % self.every == 0]
            after = [self.step_up(reset + self.rate_min), self.step_up(reset + 30)]
            return held + after + [self.step_down(sc.steps - 1)]

        return SloScenario(
            "counter-reset",
            "a counter reset does not fire",
            f"the engine restarts at minute {reset} and its counters start over from 0 while it keeps "
            f"serving at half the lowest alert rate ({lowest / 2:g}x)",
            241,
            [run],
            prove,
        )

    def tiny(self) -> SloScenario | None:
        guard = self.slo.alerting.min_events
        if not guard:
            return None
        longest = max(minutes(r.long) for r in self.slo.alerting.windows)
        length = max(minutes(r.long) for r in self.pages or self.slo.alerting.windows)
        tiny_rate = guard / (2 * longest)  # half the guard over the longest window
        tiny, busy = self.run(scenario_model("tiny-traffic")), self.run(scenario_model("busy-control"))
        tiny.traffic.add(length, tiny_rate, 1.0)
        if self.solo:  # no second engine beside it: steady-burn shows the same failures fire with traffic
            return SloScenario(
                "tiny-traffic",
                f"the low-traffic guard of {guard} events holds",
                f"every request fails, but at {tiny_rate * 60:.3g} requests an hour no window reaches "
                f"min_events ({guard})",
                length + 1,
                [tiny],
                never_fires(self.step_down(length)),
            )
        # the control starts failing after the first checks, which then see no alert of any model
        healthy = QUIET_UNTIL + 10
        busy.traffic.add(healthy, self.per_min, 0.0).add(length - healthy, self.per_min, 1.0)

        def prove(sc: SloScenario) -> list[int] | None:
            if any(sc.fires(at, run=0) for at in range(sc.steps)) or not sc.fires(length, run=1):
                return None
            return [QUIET_UNTIL, self.step_down(length // 2), self.step_down(length)]

        return SloScenario(
            "tiny-traffic",
            f"the low-traffic guard of {guard} events holds",
            f"every request fails, but at {tiny_rate * 60:.3g} requests an hour no window reaches "
            f"min_events ({guard}); slo-test/busy-control fails the same way with real traffic from minute "
            f"{healthy} and fires",
            length + 1,
            [tiny, busy],
            prove,
        )

    def override(self, model: str) -> SloScenario:
        kind = self.kind
        objective = self.slo.objective_of(model)
        param, decoys = None, ()
        if kind.param:  # the other models' values of the parameter, to prove this one is read
            values = {getattr(self.slo.sli, kind.param)}
            values |= {getattr(o, kind.param) for o in self.slo.per_model.values()} - {None}
            param = self.slo.threshold_of(model)
            decoys = tuple(sorted(values - {param}))
        budget = 1 - objective
        fast = max(self.pages or self.slo.alerting.windows, key=lambda r: r.burn_rate)
        b = self.feasible(fast.burn_rate * 15 / 14.4, budget)
        end = QUIET_UNTIL + minutes(fast.long) + self.rate_min + self.for_min + 10
        run = self.run(model, objective, param, decoys)
        run.traffic.add(QUIET_UNTIL, self.per_min, 0.0).add(
            end - QUIET_UNTIL, self.per_min, self.error_ratio(b, budget)
        )

        def prove(sc: SloScenario) -> list[int] | None:
            return [self.step_down(end)] if sc.fires(end) else None

        return SloScenario(
            model,
            f"{model} is held to its own objective and threshold",
            f"a {b:g}x burn of {model}'s own budget ({budget:g}), read from its own bucket, fires",
            end + 1,
            [run],
            prove,
        )

    # -- boundaries of one row: each condition just met, and just missed, with the others holding ----
    def guard_edge(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """Every request fails, at traffic whose events over the row's long window land just past
        (1.1x) and just short (0.9x) of min_events."""
        guard = self.slo.alerting.min_events
        if not guard:
            return None
        long_min = minutes(row.long)
        settle = self.rate_min + self.for_min + 2
        # Traffic starts one long window into the series where the test stays short enough, so the
        # guard over twice the window would see half the events (the series is there, idle, before).
        doubled = long_min <= max((minutes(r.long) for r in self.pages), default=0)
        start = max(QUIET_UNTIL, long_min) if doubled else QUIET_UNTIL
        at = self.step_up(start + (long_min if doubled else 2 * QUIET_UNTIL) + settle)
        unit = self._events_per_request_a_minute(start, at, row.long)
        past = self.run(scenario_model(f"guard-edge-{i}-past"))
        short = self.run(scenario_model(f"guard-edge-{i}-short"))
        for run, share in ((past, 1.1), (short, 0.9)):
            run.traffic.add(start, 0.0, 0.0).add(at - start, share * guard / unit, 1.0)

        def prove(sc: SloScenario) -> list[int] | None:
            p, q = sc.runs[0].timeline, sc.runs[1].timeline
            before = self.step_down(at - self.for_min)
            if not p.fires_row(at, row) or q.fires_row(at, row):
                return None
            if not (guard < p.events(before, row.long) and p.events(at, row.long) < 1.2 * guard):
                return None
            if not (0.8 * guard < q.events(before, row.long) and q.events(at, row.long) < guard):
                return None
            # the guard's average over twice the window, still times the window's seconds
            if doubled and not p.events(at, f"{2 * long_min}m") / 2 < guard:
                return None
            return [at]

        return SloScenario(
            f"guard-edge-{i}",
            f"the {row.long} row's guard fires from {guard} events on",
            f"every request fails from minute {start}; at {at}m the {row.long} window saw 1.1x min_events "
            f"({guard}) on -past, which fires the {row.long}/{row.short} row, and 0.9x on -short, which "
            "does not" + ("; twice the window would halve -past's events" if doubled else ""),
            at + 1,
            [past, short],
            prove,
            optional=True,
        )

    def short_edge(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """The long window burns well past the row's rate, the short one at 0.875x of it: no alert."""
        f, long_min = row.burn_rate, minutes(row.long)
        low, high = 0.875 * f, self.feasible(2.1 * f)  # 2.1x: off every workbook rate (2 x 3 = 6)
        settle = minutes(row.short) + self.rate_min + self.for_min + 2
        # the high burn lasts until the long window, healthy minutes included, burns 1.2x the rate
        burning = next(
            (h for h in range(1, 4 * long_min) if self._long_burn(h, high, settle, low, row) >= 1.2 * f), None
        )
        if burning is None:
            return None
        settle += self.wait(QUIET_UNTIL + burning + settle)
        at = QUIET_UNTIL + burning + settle
        run = self.run(scenario_model(f"short-edge-{i}"))
        run.traffic.add(QUIET_UNTIL, self.per_min, 0.0).add(burning, self.per_min, self.error_ratio(high))
        run.traffic.add(settle, self.per_min, self.error_ratio(low))

        return SloScenario(
            f"short-edge-{i}",
            f"the {row.long}/{row.short} row needs its short window past {f:g}x too",
            f"{high:g}x for {burning} minutes, then {low:g}x for {settle}: at {at}m the {row.long} window "
            f"burns past {f:g}x and the {row.short} window at {low:g}x, so the row holds back",
            at + 1,
            [run],
            self._held_back(at, row, short_of=row.short, past=row.long),
            optional=True,
        )

    def _held_back(self, at: int, row: s.BurnWindow, short_of: str, past: str):
        """A proof that the row stays silent at `at` although window `past` burns beyond its rate: over
        the whole `for` before it, window `short_of` burns at 0.8-0.95x of the rate."""
        f = row.burn_rate

        def prove(sc: SloScenario) -> list[int] | None:
            t = sc.runs[0].timeline
            if t.fires_row(at, row):
                return None
            for m in range(self.step_up(at - self.for_min), at + 1, self.every):
                if not (0.8 * f < t.burn(m, short_of) < 0.95 * f and t.burn(m, past) > 1.05 * f):
                    return None
            return [at]

        return prove

    def long_edge(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """The short window burns past the row's rate, the long one at 0.875x of it: no alert."""
        f, long_min = row.burn_rate, minutes(row.long)
        base = 0.45 * f  # 0.45x: off every workbook rate (0.5 x 6 = 3)
        settle = minutes(row.short) + self.rate_min + self.for_min + 2
        before = min(max(long_min - settle, 1), 2 * QUIET_UNTIL)  # minutes at the base burn
        settle += self.wait(QUIET_UNTIL + before + settle)
        window = min(long_min, QUIET_UNTIL + before + settle)  # the long window's minutes at the end
        base_minutes = min(before, window - settle)
        if base_minutes < 0:
            return None
        # the burst that brings the long window's average to 0.875x the rate
        high = (0.875 * f * window - base * base_minutes) / settle
        if not f < high < 1 / self.budget:
            return None
        at = QUIET_UNTIL + before + settle
        run = self.run(scenario_model(f"long-edge-{i}"))
        run.traffic.add(QUIET_UNTIL, self.per_min, 0.0).add(before, self.per_min, self.error_ratio(base))
        run.traffic.add(settle, self.per_min, self.error_ratio(high))

        return SloScenario(
            f"long-edge-{i}",
            f"the {row.long}/{row.short} row needs its long window past {f:g}x too",
            f"{base:g}x for {before} minutes, then {high:.3g}x for {settle}: at {at}m the {row.short} "
            f"window burns past {f:g}x and the {row.long} window at 0.875x of it, so the row holds back",
            at + 1,
            [run],
            self._held_back(at, row, short_of=row.long, past=row.short),
            optional=True,
        )

    def _long_burn(self, burning: int, high: float, settle: int, low: float, row: s.BurnWindow) -> float:
        """Roughly (by whole minutes) the long window's burn at the end of short_edge's traffic."""
        window = min(minutes(row.long), QUIET_UNTIL + burning + settle)
        if settle >= window:
            return 0.0
        return (high * min(burning, window - settle) + low * settle) / window

    def _events_per_request_a_minute(self, start: int, at: int, window: str) -> float:
        """A row's guard value at evaluation `at` for one request a minute from minute `start` on (0
        before)."""
        _, valid = Traffic("").add(start, 0.0, 0.0).add(at - start, 1.0, 0.0).counters()
        rate_s, window_s = seconds(self.rate_window), seconds(window)
        first = max(0, math.floor(at - window_s / 60) + 1)
        rates = [rate(valid, m, rate_s) for m in range(first, at + 1) if m % self.every == 0]
        return avg_over_time([r for r in rates if r is not None]) * window_s

    # -- exactly on one edge of a row (edges.py): where `>` and `>=` part -----------------------------
    def exact_long(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """The long window burns exactly the row's rate, the short one past it: no alert (a row that
        fired at its rate would)."""
        f, fb = row.burn_rate, row.burn_rate * self.budget
        k = min(1.5, (1 + 1 / fb) / 2)  # the short stretch burns k x the rate, the calm one none
        settle = minutes(row.short) + self.rate_min + 2
        calm = max(1, round(settle * (k - 1)))
        calm += self.wait(QUIET_UNTIL + calm + settle)
        at = QUIET_UNTIL + calm + settle

        def build(model: str, e: float) -> Traffic:
            return (
                Traffic(model)
                .add(QUIET_UNTIL, 0.0, 0.0)
                .add(calm, self.per_min, 0.0)
                .add(settle, self.per_min, e)
            )

        return self._on_edge(
            f"exact-long-{i}",
            row,
            Edge("burn", row.long, f, at),
            build,
            k * fb,
            f"the {row.long}/{row.short} row holds back at exactly {f:g}x over {row.long}",
            f"{calm} healthy minutes, then {settle} at about {k * f:g}x, the last counter samples searched "
            f"so the {row.long} window burns exactly {f:g}x as Prometheus computes it",
            lambda t: t.burn(at, row.short) > 1.01 * f and not t.fires_row(at, row),
        )

    def exact_short(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """The short window burns exactly the row's rate, the long one past it: no alert."""
        f, fb = row.burn_rate, row.burn_rate * self.budget
        hot_ratio = min(2.1 * fb, (1 + fb) / 2)  # 2.1x: off every workbook rate
        settle = minutes(row.short) + self.rate_min + 2
        hot = max(2, settle // 2)
        hot += self.wait(QUIET_UNTIL + hot + settle)
        at = QUIET_UNTIL + hot + settle

        def build(model: str, e: float) -> Traffic:
            # the settling stretch burns a little past the rate and its last minutes bring the short
            # window onto it: a steady stretch at the rate would be a close call at every minute
            traffic = Traffic(model).add(QUIET_UNTIL, 0.0, 0.0).add(hot, self.per_min, hot_ratio)
            traffic.add(settle - self.rate_min, self.per_min, 1.002 * fb)
            return traffic.add(self.rate_min, self.per_min, e)

        return self._on_edge(
            f"exact-short-{i}",
            row,
            Edge("burn", row.short, f, at),
            build,
            fb,
            f"the {row.long}/{row.short} row holds back at exactly {f:g}x over {row.short}",
            f"{hot} minutes at {hot_ratio / self.budget:g}x, then {settle} at about {f:g}x, the last "
            f"{self.rate_min} minutes' error ratio and the last counter samples searched so the "
            f"{row.short} window burns exactly {f:g}x",
            lambda t: t.burn(at, row.long) > 1.01 * f and not t.fires_row(at, row),
        )

    def exact_guard(self, i: int, row: s.BurnWindow) -> SloScenario | None:
        """Exactly min_events in the long window, both windows well past the rate: the row fires (a
        guard that wanted more than min_events would not)."""
        guard = self.slo.alerting.min_events
        f, fb = row.burn_rate, row.burn_rate * self.budget
        if not guard:
            return None
        ratio = min(2.1 * fb, (1 + fb) / 2)
        span = self.step_up(QUIET_UNTIL + minutes(row.short) + self.rate_min + 2) - QUIET_UNTIL
        at = QUIET_UNTIL + span

        def build(model: str, per_min: float) -> Traffic:
            return Traffic(model).add(QUIET_UNTIL, 0.0, 0.0).add(span, per_min, ratio)

        return self._on_edge(
            f"exact-guard-{i}",
            row,
            Edge("events", row.long, float(guard), at),
            build,
            guard / span,
            f"the {row.long} row fires at exactly {guard} events",
            f"{span} minutes at {ratio / self.budget:g}x, the request rate and last samples searched so "
            f"the {row.long} window saw exactly min_events",
            lambda t: (
                t.burn(at, row.long) > 1.01 * f and t.burn(at, row.short) > 1.01 * f and t.fires_row(at, row)
            ),
        )

    def _on_edge(self, key, row, edge: Edge, build, knob, claim, why, also) -> SloScenario | None:
        """A model whose traffic `build(model, knob)` is searched (edges.py) to put `edge` exactly on
        its target at edge.at, healthy afterwards. The claim stands where the search succeeds and
        `also(timeline)` holds; a `for` would need the edge at every evaluation of it: left out."""
        if self.for_min or row.burn_rate * self.budget >= 1:
            return None
        kind, at = self.kind, edge.at
        run = self.run(scenario_model(key))

        def make(good: list[float], valid: list[float]) -> Counters:
            series = kind.synthetic(lambda m, x: m, self.slo.sli, run.param, good, valid, run.decoys)
            return self.counters(series)

        def probe(k: float) -> EdgeProbe:
            return EdgeProbe(
                build(run.traffic.model, k).counters(), make, edge, self.rate_window, self.budget, self.every
            )

        def quantity(k: float) -> float | None:
            p = probe(k)
            return p.value(p.good[at], p.valid[at])

        k = secant(quantity, edge.target, knob, knob * 1.01)
        if k is None:
            return None
        p = probe(k)
        tune = "valid" if edge.what == "events" else "good"
        lo = p.good[at - 1] if tune == "good" else p.valid[at - 1]
        minute = p.valid[at] - p.valid[at - 1]
        found = on_edge(
            p, tune, (p.good[at], p.valid[at]), lo, lo + (minute if tune == "good" else 4 * minute)
        )
        if found is None:
            return None
        run.traffic = build(run.traffic.model, k)
        run.traffic.pinned[at] = found
        run.traffic.add(1, self.per_min, 0.0)
        run.exact_steps = frozenset({at})

        def prove(sc: SloScenario) -> list[int] | None:
            t = sc.runs[0].timeline
            value = t.events(at, edge.window) if edge.what == "events" else t.burn(at, edge.window)
            return [at] if value == edge.target and also(t) else None

        return SloScenario(key, claim, why, at + 1, [run], prove, optional=True)


def never_fires(end: int) -> Callable[[SloScenario], list[int] | None]:
    """A claim that no row fires at any minute, checked after the quiet start and at `end`."""

    def prove(sc: SloScenario) -> list[int] | None:
        return None if any(sc.fires(at) for at in range(sc.steps)) else [QUIET_UNTIL, end]

    return prove


def _one_engine_each(scenarios: list[SloScenario]) -> list[SloScenario]:
    """Each scenario as tests of one engine each (a scope of one deployment, plan/slo_engines.py):
    a claim shown on two engines is checked on each in its own test, by what its timeline fires."""
    out = []
    for sc in sorted(scenarios, key=lambda sc: sc.key):
        if len(sc.runs) == 1:
            out.append(sc)
            continue
        out += [replace(sc, runs=[r], claim=f"{sc.claim} ({r.traffic.model})") for r in sc.runs]
    return out


def _without_clashes(batch: Batch) -> tuple[list[SloScenario], list[SloScenario]]:
    """The batch's scenarios but those whose edge minute (which cannot move) is a close call for
    another model (at every check the test lists every model's alerts, and a close call there is no
    claim), and those: each is proven in a test of its own instead."""
    for at in {at for r in batch.runs for at in r.exact_steps}:
        batch.firing(at)  # notes close calls
    clash = {at for r in batch.runs for at in r.timeline.close_calls if at not in r.exact_steps}
    apart = [sc for sc in batch.scenarios if any(r.exact_steps & clash for r in sc.runs)]
    return [sc for sc in batch.scenarios if sc not in apart], apart
