"""From load steps to proposals: the sustainable step, then per alert and SLO a threshold and a
`for`, each with its evidence and the rule it followed, or the reason the data cannot give one.

The rules (the load-test reference, "How thresholds follow from a sweep"):
- sustainable load: the highest step of the unbroken run of steps, from the lowest load, that met
  every target (a step above a broken one does not count: the sweep was noisy there);
- a latency or error alert (its signal is what a target measures): halfway between the value at the
  sustainable step and the target;
- a saturation alert (KV cache, queue, preemptions, FB): a margin below the value at the first step
  that broke a target, halfway down to the sustainable step's value, so that the alert (`>`) fires
  at the broken load and not at the sustainable one; none where the two values are the same;
- `for`: at least the longest run above the threshold at sustainable load (a whole minute up), at
  most the long window of the fastest page row of the SLOs (2% of the budget); the current `for`
  where it already lies between, else the nearer bound;
- an SLO: slo_proposals.py (a latency SLO's threshold as a bucket bound; whether each objective
  holds at the sustainable step, and whether the data can show it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..spec.schema import seconds
from .measures import ERRORS, FINISHED, Measure, for_histogram, signal_alerts
from .proposal import MIN_TAIL, Proposal, duration, sig
from .slo_proposals import SloProposer
from .steps import LoadStep
from .targets import CalibrateError, Goal, show


@dataclass(frozen=True)
class Sweep:
    """One source's steps in load order, and where it breaks."""

    name: str  # bench | prometheus
    steps: list[LoadStep]
    sustainable: int  # index of the sustainable step
    broken: dict[int, list[str]]  # step index -> the targets it broke


@dataclass
class CalibrateResult:
    targets: list[Goal]
    sweeps: list[Sweep]
    sustainable: int
    proposals: list[Proposal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slos_file: str = "specs/slos.yaml"  # where the SLOs' own targets are said to come from
    served: str | None = None  # --model: the model_name the load test served


def needed_requests(targets: list[Goal], floor: int) -> int:
    tails = [math.ceil(MIN_TAIL / (1 - t.measure.quantile)) for t in targets if t.measure.quantile]
    return max([floor, *tails])


def check_steps(name: str, steps: list[LoadStep], targets: list[Goal], floor: int) -> None:
    """Refuse what cannot support a number: a target the data does not measure, a step too small."""
    if not steps:
        raise CalibrateError(f"{name}: no load step to calibrate from")
    least = needed_requests(targets, floor)
    for s in steps:
        missing = [t for t in targets if t.measure.key not in s.measures]
        if missing:
            why = s.unmeasured.get(missing[0].measure.key, "")
            raise CalibrateError(
                f"{s.source}: step {s.label} does not measure {missing[0].measure.key} "
                f"(target from {missing[0].origin}){': ' + why if why else ''}"
            )
        if s.requests < least:
            raise CalibrateError(
                f"{s.source}: step {s.label} has {s.requests} finished request(s); the targets need at "
                f"least {least} per step (--min-requests, and {MIN_TAIL} beyond the highest percentile) "
                "for a percentile to mean anything: run the step longer or drop it"
            )


def sweep(name: str, steps: list[LoadStep], targets: list[Goal]) -> Sweep:
    ordered = sorted(steps, key=lambda s: s.load)
    broken = {
        i: [_broke(t, s.measures[t.measure.key]) for t in targets if not t.met(s.measures[t.measure.key])]
        for i, s in enumerate(ordered)
    }
    broken = {i: b for i, b in broken.items() if b}
    first = min(broken, default=len(ordered))
    if first == 0:
        lowest = ordered[0]
        raise CalibrateError(
            f"{name}: no step met every target, not even the lowest load ({lowest.label} in {lowest.source}: "
            f"{'; '.join(broken[0])}); nothing to calibrate from: test lower loads or revisit the targets"
        )
    return Sweep(name, ordered, first - 1, broken)


def _broke(t: Goal, value: float) -> str:
    return f"{t.measure.key} {show(value, t.measure.unit)} > {show(t.limit, t.measure.unit)}"


def mismatched_loads(sweeps: list[Sweep], tolerance: float = 0.25) -> list[str]:
    """Paired steps whose loads differ by more than `tolerance` (bench request rate vs the rate the
    server finished): perhaps not the same run, or the range is off."""
    if len(sweeps) < 2:
        return []
    out = []
    for a, b in zip(sweeps[0].steps, sweeps[1].steps, strict=True):
        if math.isfinite(a.load) and abs(a.load - b.load) > tolerance * max(a.load, b.load, 1e-9):
            out.append(
                f"step {a.label} ({sweeps[0].name}) is paired with {b.label} ({sweeps[1].name}): "
                "are they the same run?"
            )
    return out


def combine(sweeps: list[Sweep]) -> int:
    """Both sources: steps pair by load order; the sustainable step is the lower of the two."""
    counts = {s.name: len(s.steps) for s in sweeps}
    if len(set(counts.values())) > 1:
        raise CalibrateError(
            f"the sources have different numbers of steps ({counts}); give one bench file per step of "
            "the Prometheus range (--step-every or --steps)"
        )
    return min(s.sustainable for s in sweeps)


class Proposer:
    def __init__(self, model, result: CalibrateResult):
        self.model = model
        self.result = result
        self.targets = {t.measure.key: t for t in result.targets}
        self.k = result.sustainable
        self.prom = next((s for s in result.sweeps if s.name == "prometheus"), None)
        self.bench = next((s for s in result.sweeps if s.name == "bench"), None)

    def alerts(self):
        return signal_alerts(self.model)

    def broken(self, i: int) -> list[str]:
        """What step i broke, in any source (with both, the first broken step may be one source's)."""
        many = len(self.result.sweeps) > 1
        return [
            f"{why} ({sw.name})" if many else why for sw in self.result.sweeps for why in sw.broken.get(i, [])
        ]

    def run(self) -> list[Proposal]:
        out: list[Proposal] = []
        for alert in self.alerts():
            if alert.spec.op in ("<", "<="):
                why = (
                    f"it fires below its threshold ({alert.spec.op}): a load test shows where a signal "
                    "rises with load, not where it falls"
                )
                out += [
                    Proposal(alert.alert, "threshold", f"{alert.spec.threshold:g}", None, reason=why),
                    Proposal(alert.alert, "for", alert.for_, None, reason=why),
                ]
                continue
            threshold = self.threshold(alert)
            out.append(threshold)
            out.append(self.for_(alert, threshold))
        out.extend(self.slos())
        return out

    # -- what an alert watches ------------------------------------------------------------------
    def measure_of(self, alert) -> Measure | None:
        signal = self.model.signal(alert.spec.signal)
        if signal.kind == "quantile":
            return for_histogram(signal.metric, alert.spec.quantile)
        if signal.kind == "counter_ratio" and signal.metric == FINISHED:
            return Measure(ERRORS)
        return None

    def observed(self, alert, i: int, measure: Measure | None) -> tuple[float | None, LoadStep]:
        """The alert's own signal at step i (Prometheus), else the bench measure it corresponds to."""
        if self.prom is not None and alert.alert in self.prom.steps[i].observed:
            return self.prom.steps[i].observed[alert.alert], self.prom.steps[i]
        step = self.bench.steps[i] if self.bench else self.prom.steps[i]
        return (step.measures.get(measure.key) if measure else None), step

    # -- thresholds -----------------------------------------------------------------------------
    def threshold(self, alert) -> Proposal:
        spec = alert.spec
        current = f"{spec.threshold:g}"
        measure = self.measure_of(alert)
        if measure is not None:
            return self._towards_target(alert, measure, current)
        return self._saturation(alert, current)

    def _towards_target(self, alert, measure: Measure, current: str) -> Proposal:
        target = self.targets.get(measure.key)
        if target is None:
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason=f"no target for {measure.key}, which it watches: give --target "
                f"{measure.key}=... (or an SLO on it) to say what is too slow",
            )
        value, step = self.observed(alert, self.k, measure)
        if value is None:
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason=f"{step.source}: step {step.label} has no value of {measure.key}",
            )
        proposed = sig(value + (target.limit - value) / 2)
        unit = measure.unit
        # the alert's own signal may read another side than the step's measure (per role, say)
        step_value = step.measures.get(measure.key, value)
        seen = f"{measure.key} {show(value, unit)}"
        if not math.isclose(step_value, value, rel_tol=1e-6):
            seen = (
                f"{alert.spec.signal} {show(value, unit)} (its own signal; the step's {measure.key} "
                f"{show(step_value, unit)})"
            )
        return Proposal(
            alert.alert,
            "threshold",
            current,
            f"{proposed:g}",
            evidence=f"{step.source}, sustainable step {step.label}: {seen}, "
            f"target {show(target.limit, unit)} ({target.origin}); "
            f"margin {show(proposed - value, unit)} above sustainable load",
            rule="halfway between the sustainable step's value and the target",
            value=proposed,
        )

    def _saturation(self, alert, current: str) -> Proposal:
        name = alert.spec.signal
        if self.prom is None:
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason=f"bench results do not measure {name}: add --prometheus with the run's range",
            )
        if self.k + 1 >= len(self.prom.steps):
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason="every step met the targets: the sweep never reached the load where "
                f"{name} matters; extend it past the knee",
            )
        at, broke = self.prom.steps[self.k], self.prom.steps[self.k + 1]
        ok, bad = at.observed.get(alert.alert), broke.observed.get(alert.alert)
        if bad is None or ok is None:
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason=f"{self.prom.steps[0].source.split()[0]} has no {name} in the steps",
            )
        proposed = sig(ok + (bad - ok) / 2)
        if not ok < proposed < bad:
            return Proposal(
                alert.alert,
                "threshold",
                current,
                None,
                reason=f"{name} does not tell the steps apart: {ok:.3g} at sustainable step "
                f"{at.label}, {bad:.3g} at the first broken step {broke.label}",
            )
        worst = broke.traces[alert.alert].worst_labels if alert.alert in broke.traces else {}
        who = ", ".join(f"{k}={v}" for k, v in sorted(worst.items()) if k in self._identity(alert))
        return Proposal(
            alert.alert,
            "threshold",
            current,
            f"{proposed:g}",
            evidence=f"{broke.source}, first broken step {broke.label} "
            f"({'; '.join(self.broken(self.k + 1))}): "
            f"{name} {bad:.3g}{' on ' + who if who else ''}; sustainable step {at.label}: {ok:.3g}; "
            f"margin {proposed - ok:.3g} above sustainable load, {bad - proposed:.3g} below the broken",
            rule="halfway between the sustainable step's value and the first broken step's",
            value=proposed,
        )

    def _identity(self, alert) -> list[str]:
        return self.model.builder.labels.identity(self.model.signal(alert.spec.signal).level)

    # -- for ------------------------------------------------------------------------------------
    def cap(self) -> tuple[float | None, str]:
        """The longest `for` worth having: the long window of the fastest page row of the SLOs, in
        which that row spends 2% of the budget (the workbook's table); None without SLOs."""
        pages = [r for slo in self.model.slos.slos.values() for r in slo.alerting.windows if r.tier == "page"]
        if not pages:
            return None, ""
        fastest = max(pages, key=lambda r: (r.burn_rate, -seconds(r.long)))
        return seconds(fastest.long), "the long window of the fastest SLO page row"

    def for_(self, alert, threshold: Proposal) -> Proposal:
        current = alert.for_
        if self.prom is None:
            return Proposal(
                alert.alert,
                "for",
                current,
                None,
                reason="bench results have no time series to measure bursts: add --prometheus",
            )
        # no threshold proposed: the bursts are measured against the one the alert has now
        against = float(threshold.value if threshold.value is not None else alert.spec.threshold)
        which = "" if threshold.value is not None else "the current "
        step = self.prom.steps[self.k]
        trace = step.traces.get(alert.alert)
        if trace is None or not trace.values:
            return Proposal(
                alert.alert, "for", current, None, reason=f"no {alert.spec.signal} at step {step.label}"
            )
        burst = trace.longest_above(against)
        need = math.ceil(burst / 60) * 60
        cap, why = self.cap()
        if cap is not None and need > cap:
            return Proposal(
                alert.alert,
                "for",
                current,
                None,
                reason=f"at sustainable load {alert.spec.signal} stayed above {which}{against:g} "
                f"for {duration(burst)}, longer than {why} ({duration(cap)}): the threshold is too low",
            )
        now = seconds(current)
        proposed = max(now, need) if cap is None else min(max(now, need), cap)
        bound = f"[{duration(need) if need else '0s'}, {duration(cap) if cap else 'no bound'}]"
        shown = current if proposed == now else duration(proposed) if proposed else "0s"  # 600s stays 600s
        return Proposal(
            alert.alert,
            "for",
            current,
            shown,
            evidence=f"{step.source}, sustainable step {step.label}: longest run above {which}{against:g} "
            f"{duration(burst) if burst else 'none'} ({len(trace.values)} evaluations every "
            f"{duration(trace.interval_s)}); allowed {bound}{', ' + why if cap else ''}",
            rule="at least the longest burst at sustainable load, at most the fastest page row's long "
            "window; the current for where it lies between",
            value=shown,
        )

    # -- SLOs ------------------------------------------------------------------------------------
    def slos(self) -> list[Proposal]:
        """From the server's view where there is one (the histogram the SLI counts), else the bench."""
        steps = (self.prom or self.bench).steps
        return SloProposer(
            self.model, steps, self.k, self.targets, self.result.slos_file, self.result.served
        ).run()
