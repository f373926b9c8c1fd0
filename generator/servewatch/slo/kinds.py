"""SLI kinds: which counters count good events and which count valid ones, per kind.

A kind turns its spec (spec/slos.py) into two raw counter selectors, or two selectors of the rule
set's own recorded rate of those counters where one is recorded (`recorded_events`: the raw series
are then read once per evaluation, by that record); everything after that (rates per model,
windows, budgets, burn-rate alerts, tests) is shared. A new kind (say, a ratio of two counters) is a
schema class in spec/slos.py and a class here with `events`, `recorded_events` and `synthetic`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

from ..catalog import ClientOutcome
from ..promql import builders as b
from ..signals import SignalBuilder
from ..spec import slos as s


@dataclass(frozen=True)
class Events:
    """Counter selectors of an SLI. `keep`: labels that tell apart several counters of one engine
    (summed per engine, not deduplicated away)."""

    good: str
    valid: str
    keep: tuple[str, ...] = ()
    # a counter of bad events among the valid ones: good events are then valid less bad (the good
    # selector is the valid one), and a model without a bad series has none
    bad: str = ""


@dataclass(frozen=True)
class SyntheticSeries:
    """One input series of a generated promtool test, and whether the SLI counts it as good, valid."""

    series: str
    values: list[float]
    good: bool = False
    valid: bool = False
    part: str = ""  # the series of the recorded rate it is summed into (its `le` or reason)
    bad: bool = False  # counted as bad events, which a kind that reads them takes from the valid ones


Synthetic = list[SyntheticSeries]
SeriesName = Callable[[str, dict[str, str]], str]  # (metric, extra labels) -> series selector


def _record(sb: SignalBuilder, kind: str, metric: str, keep: tuple[str, ...], window: str) -> str | None:
    """The name of the rule set's record of `metric`'s rates (`kind`) per model and `keep`, if one
    is recorded over `window`."""
    rec = sb.recorded_source(kind, metric, "model", keep, window)
    return rec.record if rec is not None else None


def le_value(bound: float) -> str:
    """A bucket bound as vLLM's prometheus_client exposes it (Python float text: 2.5, 5.0)."""
    return repr(float(bound))


def le_matcher(bound: float) -> str:
    """Matches a bucket bound however it was ingested: `5.0` as exposed, or `5` from a normaliser."""
    text = le_value(bound)
    if text.endswith(".0"):
        short = text[:-2]
        return f'le=~"{short}|{short}\\\\.0"'
    return f'le="{text}"'


class LatencyKind:
    """Good: observations at or below the threshold bucket; valid: every observation.

    A histogram exposes every bucket as soon as it exists, so a model with a count but no bucket at
    the threshold has lost that bucket to a relabelling: its good events are unknown, not zero, and
    the SLI is absent (a companion alert names the bucket), never 100% bad."""

    name: ClassVar[str] = "latency"
    param: ClassVar[str | None] = "threshold"  # what a per-model override may change
    absent_good_is_zero: ClassVar[bool] = False
    counts_aborts: ClassVar[bool] = False
    subtracts: ClassVar[bool] = False  # whether good events are valid less bad ones (Events.bad)

    def events(self, sb: SignalBuilder, sli: s.LatencySLI, threshold: float, *matchers: str) -> Events:
        # a client-side SLI reads its record; validation (slo_checks.py) refuses a spec without it,
        # whose model is still built first: the gateway's raw series, unread
        h = sb.metric_name(sli.reads)
        good = sb.select(f"{h}_bucket", le_matcher(threshold), *matchers)
        return Events(good=good, valid=sb.select(f"{h}_count", *matchers))

    def recording(self, sb: SignalBuilder, sli: s.LatencySLI, window: str) -> str | None:
        """The rule set's record of the histogram's bucket rates per model, if there is one. With
        native histograms (config.histograms) that record holds histograms, not one series per `le`:
        the SLO then reads the raw histogram, in its native form (promql/histograms.py)."""
        if sb.histograms.native:
            return None
        return _record(sb, "bucket_rate", sli.reads, (), window)

    def recorded_events(self, record: str, sli: s.LatencySLI, threshold: float, *matchers: str) -> Events:
        """From the bucket-rate record: the bucket at the threshold, and +Inf (which is _count)."""
        return Events(
            good=b.selector(record, le_matcher(threshold), *matchers),
            valid=b.selector(record, 'le="+Inf"', *matchers),
        )

    def missing(
        self, sb: SignalBuilder, sli: s.LatencySLI, threshold: float, *matchers: str
    ) -> tuple[str, dict]:
        """The series that shows a model is served (its histogram's count, an instant read), and the
        labels naming the input its good events need: the bucket and its metric. None with native
        histograms: one series holds every bucket, so none can be lost on its own."""
        if sb.histograms.native:
            return None
        if sli.side == "client":  # a gateway's model seen at all: its record's +Inf bucket
            labels = {"metric": sb.metric_name(sli.reads) + "_bucket", "le": le_value(threshold)}
            record = self.recording(sb, sli, sb.config.rate_window)
            return b.selector(record, 'le="+Inf"', *matchers), labels
        labels = {"metric": sb.metric_name(f"{sli.histogram}_bucket"), "le": le_value(threshold)}
        return sb.select(f"{sli.histogram}_count", *matchers), labels

    def synthetic(
        self,
        series: SeriesName,
        sli: s.LatencySLI,
        threshold: float,
        good: list[float] | None,
        valid: list[float],
        decoys: tuple[float, ...] = (),
        aborted: float = 0.0,
    ) -> Synthetic:
        """The bucket at `threshold` counts the good events; a decoy bound below it counts none and
        one above it counts all, so reading the wrong bucket gives a different answer."""
        h, le = sli.reads, le_value(threshold)
        out = []
        if good is not None:  # None: the bucket is not scraped (a relabelling dropped it)
            out.append(SyntheticSeries(series(f"{h}_bucket", {"le": le}), good, good=True, part=le))
        for bound in decoys:
            values = [0.0] * len(valid) if bound < threshold else valid
            out.append(SyntheticSeries(series(f"{h}_bucket", {"le": le_value(bound)}), values))
        out.append(SyntheticSeries(series(f"{h}_bucket", {"le": "+Inf"}), valid))
        out.append(SyntheticSeries(series(f"{h}_count", {}), valid, valid=True, part="+Inf"))
        return out


ABORT = "abort"  # vLLM's finished_reason of a request its client cancelled


class AvailabilityKind:
    """Good: finished requests whose reason is not a failure; valid: every finished request."""

    name: ClassVar[str] = "availability"
    param: ClassVar[str | None] = None
    # vLLM creates a reason's counter at its first request: a model that failed every request has
    # no good counter at all, and 0 good events
    absent_good_is_zero: ClassVar[bool] = True
    counts_aborts: ClassVar[bool] = True  # whether the SLI sees client aborts at all
    subtracts: ClassVar[bool] = False

    def events(self, sb: SignalBuilder, sli: s.AvailabilitySLI, _param: None, *matchers: str) -> Events:
        bad = "|".join(sli.bad)
        good = sb.select(sli.metric, f'{sli.label}!~"{bad}"', *matchers)
        return Events(good=good, valid=sb.select(sli.metric, *matchers), keep=(sli.label,))

    def recording(self, sb: SignalBuilder, sli: s.AvailabilitySLI, window: str) -> str | None:
        """The rule set's record of the counter's rate per model and reason, if there is one."""
        return _record(sb, "rate", sli.metric, (sli.label,), window)

    def recorded_events(self, record: str, sli: s.AvailabilitySLI, _param: None, *matchers: str) -> Events:
        bad = "|".join(sli.bad)
        good = b.selector(record, f'{sli.label}!~"{bad}"', *matchers)
        return Events(good=good, valid=b.selector(record, *matchers))

    def missing(self, sb, sli, _param, *matchers):
        return None

    def synthetic(
        self,
        series: SeriesName,
        sli: s.AvailabilitySLI,
        _param: None,
        good: list[float],
        valid: list[float],
        decoys: tuple[float, ...] = (),
        aborted: float = 0.0,
    ) -> Synthetic:
        """Good requests finish with `stop`; the failed ones are split evenly over the bad reasons, so
        leaving any of them out of the failures changes the answer. `aborted`: the share of every
        finished request its client aborted, where aborts are not bad (counted good, as finished)."""
        share = [(v - g) / len(sli.bad) for g, v in zip(good, valid, strict=True)]
        stop = series(sli.metric, {sli.label: "stop"})
        if aborted and ABORT not in sli.bad:
            aborts = [v * aborted for v in valid]
            stops = [g - a for g, a in zip(good, aborts, strict=True)]
            abort = series(sli.metric, {sli.label: ABORT})
            out = [
                SyntheticSeries(abort, aborts, good=True, valid=True, part=ABORT),
                SyntheticSeries(stop, stops, good=True, valid=True, part="stop"),
            ]
        else:
            out = [SyntheticSeries(stop, good, good=True, valid=True, part="stop")]
        out += [
            SyntheticSeries(series(sli.metric, {sli.label: r}), share, valid=True, part=r) for r in sli.bad
        ]
        return out


@dataclass(frozen=True)
class ClientAvailabilityKind:
    """At the client (sli.side: client): good events are the gateway's requests less those it
    failed, valid events its requests but those of a cause the source's outcome excludes (the
    client's own doing); both read from the client-errors group's records (the raw series need the
    gateway's deduplication and model label, which those records do once).

    A gateway creates an error series at its first failure: a model it never failed has none, and
    no failure (not an absent SLI)."""

    # how the source counts (catalog/gateway.yaml `outcome:`): the generated tests' series; None
    # where no test series are made (the rules read it through the signal builder)
    outcome: ClientOutcome | None = None

    name: ClassVar[str] = "availability"
    param: ClassVar[str | None] = None
    absent_good_is_zero: ClassVar[bool] = True  # absent errors: every request good
    counts_aborts: ClassVar[bool] = False  # the gateway counts no client abort
    subtracts: ClassVar[bool] = True

    def events(self, sb: SignalBuilder, sli: s.AvailabilitySLI, _param: None, *matchers: str) -> Events:
        # the raw series, unread: validation (slo_checks.py) refuses a spec without the records
        valid = sb.select(sli.reads, *matchers)
        return Events(good=valid, valid=valid, bad=sb.select(sli.errors, *matchers))

    def recording(self, sb: SignalBuilder, sli: s.AvailabilitySLI, window: str) -> str | None:
        """The record of the source's requests per model (the errors' is `bad_recording`)."""
        return _record(sb, "rate", sli.reads, (), window)

    def bad_recording(self, sb: SignalBuilder, sli: s.AvailabilitySLI, window: str) -> str | None:
        return _record(sb, "rate", sli.errors, (), window)

    def records(self, sb: SignalBuilder, sli: s.AvailabilitySLI, window: str) -> tuple[str, ...]:
        found = (self.recording(sb, sli, window), self.bad_recording(sb, sli, window))
        return found if all(found) else ()

    def recorded_events(
        self, record: str, sli: s.AvailabilitySLI, _param: None, *matchers: str, bad_record: str = ""
    ) -> Events:
        valid = b.selector(record, *matchers)
        return Events(good=valid, valid=valid, bad=b.selector(bad_record, *matchers))

    def missing(self, sb, sli, _param, *matchers):
        return None

    def synthetic(
        self,
        series: SeriesName,
        sli: s.AvailabilitySLI,
        _param: None,
        good: list[float],
        valid: list[float],
        decoys: tuple[float, ...] = (),
        aborted: float = 0.0,
    ) -> Synthetic:
        """Every valid request counted; the failed ones split evenly over the outcome's test causes,
        so reading one of them (or none) changes the answer. A model never failed has no error
        series at all, as a gateway exports none before its first failure. Where one counter tells
        the outcome by its labels (Dynamo's status), the successes are their own series, and the
        requests of each excluded cause (the client's own doing) are there too, counted nowhere, so
        counting them changes the answer."""
        o = self.outcome
        if o is None:
            raise ValueError("the generated tests of a client-side SLI need the source's outcome")
        failed = [v - g for g, v in zip(good, valid, strict=True)]
        share = [f / len(o.test_causes) for f in failed]
        errors = [
            SyntheticSeries(series(sli.errors, {**dict(o.failed), o.cause: c}), share, bad=True, part=c)
            for c in o.test_causes
        ]
        if not o.failed:  # a counter of its own for failures (llm-d): every request on the other
            every = SyntheticSeries(series(sli.reads, {}), valid, valid=True)
            return [every] + (errors if any(failed) else [])
        own = [v * CLIENTS_OWN / max(1, len(o.excluded)) for v in valid]
        return (
            [SyntheticSeries(series(sli.reads, dict(o.succeeded)), good, valid=True, part="")]
            + [replace(e, valid=True) for e in errors if any(failed)]
            + [SyntheticSeries(series(sli.errors, {**dict(o.failed), o.cause: c}), own) for c in o.excluded]
        )


# the requests of the client's own doing (cancelled, invalid) in the generated tests, as a share of
# the valid ones, split over the excluded causes: enough that counting them moves every answer
CLIENTS_OWN = 0.5

KINDS = {k.name: k for k in (LatencyKind(), AvailabilityKind())}


def kind_of(
    sli, outcome: ClientOutcome | None = None
) -> LatencyKind | AvailabilityKind | ClientAvailabilityKind:
    """The kind of an SLI; an availability SLI at the client has its own (the gateway's counters,
    counted as `outcome` says where its generated tests are designed)."""
    if sli.side == "client" and sli.kind == ClientAvailabilityKind.name:
        return ClientAvailabilityKind(outcome)
    return KINDS[sli.kind]
