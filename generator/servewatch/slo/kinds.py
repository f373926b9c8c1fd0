"""SLI kinds: which counters count good events and which count valid ones, per kind.

A kind turns its spec (spec/slos.py) into two raw counter selectors; everything after that (rates
per model, windows, budgets, burn-rate alerts, tests) is shared. A new kind (say, a ratio of two
counters) is a schema class in spec/slos.py and a class here with `events` and `synthetic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

from ..signals import SignalBuilder
from ..spec import slos as s


@dataclass(frozen=True)
class Events:
    """Counter selectors of an SLI. `keep`: labels that tell apart several counters of one engine
    (summed per engine, not deduplicated away)."""

    good: str
    valid: str
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class SyntheticSeries:
    """One input series of a generated promtool test, and whether the SLI counts it as good, valid."""

    series: str
    values: list[float]
    good: bool = False
    valid: bool = False


Synthetic = list[SyntheticSeries]
SeriesName = Callable[[str, dict[str, str]], str]  # (metric, extra labels) -> series selector


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
    """Good: observations at or below the threshold bucket; valid: every observation."""

    name: ClassVar[str] = "latency"
    param: ClassVar[str | None] = "threshold"  # what a per-model override may change

    def events(self, sb: SignalBuilder, sli: s.LatencySLI, threshold: float, *matchers: str) -> Events:
        good = sb.select(f"{sli.histogram}_bucket", le_matcher(threshold), *matchers)
        return Events(good=good, valid=sb.select(f"{sli.histogram}_count", *matchers))

    def synthetic(
        self,
        series: SeriesName,
        sli: s.LatencySLI,
        threshold: float,
        good: list[float],
        valid: list[float],
        decoys: tuple[float, ...] = (),
    ) -> Synthetic:
        """The bucket at `threshold` counts the good events; a decoy bound below it counts none and
        one above it counts all, so reading the wrong bucket gives a different answer."""
        h = sli.histogram
        out = [SyntheticSeries(series(f"{h}_bucket", {"le": le_value(threshold)}), good, good=True)]
        for bound in decoys:
            values = [0.0] * len(valid) if bound < threshold else valid
            out.append(SyntheticSeries(series(f"{h}_bucket", {"le": le_value(bound)}), values))
        out.append(SyntheticSeries(series(f"{h}_bucket", {"le": "+Inf"}), valid))
        out.append(SyntheticSeries(series(f"{h}_count", {}), valid, valid=True))
        return out


class AvailabilityKind:
    """Good: finished requests whose reason is not a failure; valid: every finished request."""

    name: ClassVar[str] = "availability"
    param: ClassVar[str | None] = None

    def events(self, sb: SignalBuilder, sli: s.AvailabilitySLI, _param: None, *matchers: str) -> Events:
        bad = "|".join(sli.bad)
        good = sb.select(sli.metric, f'{sli.label}!~"{bad}"', *matchers)
        return Events(good=good, valid=sb.select(sli.metric, *matchers), keep=(sli.label,))

    def synthetic(
        self,
        series: SeriesName,
        sli: s.AvailabilitySLI,
        _param: None,
        good: list[float],
        valid: list[float],
        decoys: tuple[float, ...] = (),
    ) -> Synthetic:
        """Good requests finish with `stop`; the failed ones are split evenly over the bad reasons, so
        leaving any of them out of the failures changes the answer."""
        share = [(v - g) / len(sli.bad) for g, v in zip(good, valid, strict=True)]
        out = [SyntheticSeries(series(sli.metric, {sli.label: "stop"}), good, good=True, valid=True)]
        out += [SyntheticSeries(series(sli.metric, {sli.label: r}), share, valid=True) for r in sli.bad]
        return out


KINDS = {k.name: k for k in (LatencyKind(), AvailabilityKind())}


def kind_of(sli) -> LatencyKind | AvailabilityKind:
    return KINDS[sli.kind]
