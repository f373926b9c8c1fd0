"""Per SLO: what a load test can say about it, and what it cannot.

A latency SLO ("99% of first tokens within 2.5 s") holds where the percentile matching its
objective (p99) is at or under its threshold, so that percentile at the sustainable step is its
evidence. Its threshold must be a bucket bound of the histogram (the SLI counts `le="T"`), so the
proposal is the smallest bound at or above halfway between that percentile and the team's target
(the alerts' margin rule, rounded up to what the histogram can count), never past the target.

An objective is the team's promise, not something a load test measures: calibrate checks whether
it holds at the sustainable step and proposes none. An error ratio of a 0.5% budget is only shown
to be kept by enough requests: the one-sided 95% upper bound on the failure ratio (Clopper-Pearson)
must be within the budget; with no failure at all that takes about ln(20) / budget requests (the
"rule of three": 598 for 99.5%, whatever the result of a 200-request run).
"""

from __future__ import annotations

import math

from ..slo.exprs import MODEL
from ..spec.slos import AvailabilitySLI, LatencySLI
from .measures import Measure, for_slo, percentile_word
from .proposal import MIN_TAIL, Proposal, sig
from .targets import Goal, show

CONFIDENCE = 0.95  # how sure a kept error budget must be
BURN_FOR = (
    "burn-rate rows need no `for`: a row fires only while its short window burns too, which rides out "
    "a burst and resets soon after it"
)


def error_upper_bound(failed: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper confidence bound on a failure ratio after `failed` of `n` (Clopper-Pearson):
    the ratio p at which seeing `failed` or fewer would happen only 1 - confidence of the time."""
    if failed >= n:
        return 1.0
    alpha = 1 - confidence
    if failed == 0:
        return 1 - alpha ** (1 / n)
    lo, hi = failed / n, 1.0
    for _ in range(60):  # bisection: P(X <= failed | p) falls as p grows
        mid = (lo + hi) / 2
        if _binomial_cdf(failed, n, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def _binomial_cdf(k: int, n: int, p: float) -> float:
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    return sum(
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(k + 1)
    )


def requests_needed(ratio: float, budget: float, limit: int = 10**9) -> int | None:
    """The fewest requests that, failing at `ratio`, would show the failure ratio within `budget` at
    CONFIDENCE; None where no number of requests could (the ratio is at or over the budget)."""
    if ratio >= budget:
        return None
    if ratio == 0:
        return math.ceil(math.log(1 - CONFIDENCE) / math.log1p(-budget))

    def enough(n: int) -> bool:
        return error_upper_bound(math.ceil(ratio * n), n) <= budget

    hi = 1
    while not enough(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _pct(ratio: float) -> str:
    return f"{ratio * 100:.3g}%"


class SloProposer:
    """The SLO rows of the proposals, from the steps of one source at the sustainable step `k`."""

    def __init__(self, model, steps: list, k: int, targets: dict[str, Goal], where: str, served=None):
        self.model = model
        self.steps = steps
        self.k = k
        self.targets = targets  # measure key -> the team's target
        self.where = where  # the SLOs' file as the targets name it
        self.served = served  # --model: the one model the load test served

    def entry(self, slo) -> str:
        """The model whose per_model entry a proposal for `slo` goes to ("": the SLO's own fields).
        A load test of one model (--model) speaks for that model only, so it gets its own entry,
        unless the SLO covers that model alone (or cannot tell models apart: no model_name)."""
        if not self.served or MODEL not in self.model.config.identity.model:
            return ""
        if self.served not in slo.per_model and slo.scope and slo.scope.models == (self.served,):
            return ""
        return self.served

    def run(self) -> list[Proposal]:
        out: list[Proposal] = []
        for name, slo in sorted(self.model.slos.slos.items()):
            if self.served and not slo.covers_model(self.served):
                why = f"its scope ({slo.scope.text}) leaves out the load test's model {self.served!r}"
                out.append(
                    Proposal(f"SLO {name}", "objective", f"{slo.objective:g}", None, reason=why, slo=name)
                )
                continue
            if isinstance(slo.sli, LatencySLI):
                out += self.latency(name, slo)
            elif isinstance(slo.sli, AvailabilitySLI):
                out.append(self.availability(name, slo))
            out.append(
                Proposal(f"SLO {name}", "for", slo.alerting.for_, slo.alerting.for_, rule=BURN_FOR, slo=name)
            )
        return out

    def _where_it_breaks(self, key: str, limit: float) -> str:
        """Where the SLO stops holding above the sustainable step (a load to stay under)."""
        broke = next((s for s in self.steps[self.k + 1 :] if s.measures.get(key, math.inf) > limit), None)
        return f"; broken from {broke.label}" if broke else "; held at every step"

    # -- latency ---------------------------------------------------------------------------------
    def latency(self, name: str, slo) -> list[Proposal]:
        entry = self.entry(slo)
        subject, threshold = self.subject(name, entry), float(slo.threshold_of(self.served))
        current = f"{threshold:g}"
        promised = slo.objective_of(self.served)
        objective = f"{promised:g}"
        measure = for_slo(slo.sli, promised, self.model.config.client_side)
        if measure is None:
            why = f"{slo.sli.histogram} is not measured by a load test"
            return [
                Proposal(subject, "threshold", current, None, reason=why, slo=name, model=entry),
                Proposal(subject, "objective", objective, None, reason=why, slo=name, model=entry),
            ]
        step = self.steps[self.k]
        value = step.measures.get(measure.key)
        need = math.ceil(MIN_TAIL / (1 - measure.quantile))
        why = ""
        if value is None or math.isnan(value):
            why = f"{step.source}: step {step.label} has no {measure.key}"
        elif step.requests < need:
            why = (
                f"too few requests: the sustainable step {step.label} has {step.requests}; "
                f"{measure.key} needs at least {need} ({MIN_TAIL} beyond it) to say anything about "
                f"{promised * 100:g}% of requests: run that step longer"
            )
        if why:
            return [
                Proposal(subject, "threshold", current, None, reason=why, slo=name, model=entry),
                Proposal(subject, "objective", objective, None, reason=why, slo=name, model=entry),
            ]
        unit = measure.unit
        seen = (
            f"{step.source}, sustainable step {step.label} ({step.requests} requests): "
            f"{measure.key} {show(value, unit)}"
        )
        held = value <= threshold
        verdict = Proposal(
            subject,
            "objective",
            objective,
            objective if held else None,
            evidence=f"{seen} vs {measure.key} <= {show(threshold, unit)}"
            + self._where_it_breaks(measure.key, threshold),
            rule="kept: it holds at sustainable load (an objective is a promise; a load test checks it)",
            reason=""
            if held
            else f"NOT MET at sustainable load: {measure.key} {show(value, unit)} > "
            f"{show(threshold, unit)}, so the SLO would burn its budget there",
            slo=name,
            model=entry,
        )
        return [self._threshold(name, slo, measure, value, seen, step), verdict]

    def subject(self, name: str, entry: str) -> str:
        return f"SLO {name}" + (f" [{entry}]" if entry else "")

    def _threshold(self, name: str, slo, measure: Measure, value: float, seen: str, step) -> Proposal:
        entry, threshold = self.entry(slo), float(slo.threshold_of(self.served))
        subject, current = self.subject(name, entry), f"{threshold:g}"
        where = f"{self.where}: {name}" + (f" per_model {entry!r}" if entry in slo.per_model else "")
        own = Goal(measure, threshold, where)
        target = self.targets.get(measure.key) or own  # a --target is the team's newer word
        unit, limit = measure.unit, target.limit
        bounds, histogram = self._bounds(slo, measure, step), self.model.builder.metric_name(slo.sli.reads)
        if not bounds:
            why = (
                f"the bucket bounds of {histogram} (at the client) are not documented and the "
                "sustainable step's history does not show them: add --prometheus with the run's range"
            )
            return Proposal(subject, "threshold", current, None, reason=why, slo=name, model=entry)
        room = [b for b in bounds if value < b <= limit]
        if not room:
            met = next((b for b in bounds if b > value), None)
            hint = f"; the smallest bucket bound above it is {met:g}" if met is not None else ""
            return Proposal(
                subject,
                "threshold",
                current,
                None,
                reason=f"no bucket bound of {histogram} lies above the sustainable step's "
                f"{measure.key} ({show(value, unit)}) and within the target {show(limit, unit)} "
                f"({target.origin}){hint}: a looser SLO is the team's call, not the load test's",
                slo=name,
                model=entry,
            )
        halfway = value + (limit - value) / 2
        above = [b for b in room if b >= halfway]
        proposed = above[0] if above else room[-1]
        rule = (
            "the smallest bucket bound at or above halfway between the sustainable step's percentile "
            "and the target"
            if above
            else "the largest bucket bound within the target (none lies between halfway and it: "
            "less margin than halfway)"
        )
        p, promised = percentile_word(measure.percentile), slo.objective_of(self.served)
        return Proposal(
            subject,
            "threshold",
            current,
            f"{proposed:g}",
            evidence=f"{seen} (p{p}: {promised * 100:g}% of requests within the threshold holds "
            f"where the {p}th percentile is at or under it), target {show(limit, unit)} "
            f"({target.origin}); halfway {show(halfway, unit)}; margin {show(proposed - value, unit)} "
            "above sustainable load",
            rule=rule,
            value=sig(proposed, 6),
            slo=name,
            model=entry,
        )

    def _bounds(self, slo, measure: Measure, step) -> list[float]:
        """The bucket bounds the SLI counts `le` of: the catalog's for the engines' histogram; for a
        gateway's, the ones the history shows, else the catalog's where the source's code fixes
        them (catalog/gateway.yaml `buckets:`), so bench files alone can propose one."""
        cat = self.model.builder.catalog
        if slo.side == "client":
            client = self.model.config.client_side
            twin = cat.lookup(client.metric(cat.client_quantity(slo.sli.histogram)) or "")
            return sorted(step.bounds.get(measure.key) or (twin.buckets if twin else None) or ())
        return sorted(cat.lookup(slo.sli.histogram).buckets)

    # -- availability ----------------------------------------------------------------------------
    def availability(self, name: str, slo) -> Proposal:
        entry, promised = self.entry(slo), slo.objective_of(self.served)
        subject, objective = self.subject(name, entry), f"{promised:g}"
        budget = round(1 - promised, 9)
        step = self.steps[self.k]
        key = for_slo(slo.sli, promised, self.model.config.client_side).key  # on the SLI's side
        ratio = step.measures.get(key)
        if ratio is None or math.isnan(ratio):
            why = f"step {step.label} has no {key}"
            if key in step.unmeasured:  # a bench file judging the engines' side, say
                why = f"cannot judge it: {step.unmeasured[key]}"
            return Proposal(subject, "objective", objective, None, reason=why, slo=name, model=entry)
        n = step.totals.get(key, step.requests)  # at the client: the requests the gateway counted
        failed = round(ratio * n)
        upper = error_upper_bound(failed, n)
        seen = (
            f"{step.source}, sustainable step {step.label}: {key} {_pct(ratio)} ({failed} of {n} "
            f"requests), at most {_pct(upper)} at {CONFIDENCE:.0%} confidence; budget {_pct(budget)}"
            + self._where_it_breaks(key, budget)
        )
        need = requests_needed(ratio, budget)
        if ratio > budget:
            reason = f"NOT MET at sustainable load: {key} {_pct(ratio)} > the {_pct(budget)} budget"
        elif upper > budget:
            least = requests_needed(0.0, budget)
            reason = (
                f"cannot be established from {n} requests: {failed} failed, and the failure ratio "
                f"could still be {_pct(upper)} ({CONFIDENCE:.0%} confidence) against a {_pct(budget)} "
                f"budget; {promised * 100:g}% needs at least {least} requests with no failure"
                + (f", {need} at the observed ratio" if need and failed else "")
                + " at the sustainable step"
            )
        else:
            reason = ""
        return Proposal(
            subject,
            "objective",
            objective,
            None if reason else objective,
            evidence=seen,
            rule="kept: the failure ratio's 95% upper bound is within the budget (an objective is a "
            "promise; a load test checks it)",
            reason=reason,
            slo=name,
            model=entry,
        )
