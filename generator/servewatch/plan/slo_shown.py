"""What one SLO's proof shows, as plain data that outlives the simulation (plan/slo_proofs.py).

slo/scenarios.py designs a proof by simulating weeks of traffic: timelines, scenarios and the
closures that check their claims. The tests written from it need far less: each batch's models
(their input series, by the config-free tokens the proof names them with), the minutes it checks,
and the burn-rate alerts firing at each, with the values Prometheus computes. That is what this
module keeps, in a form that goes to JSON and back unchanged (floats as Python writes them), so a
proof is made once per SLO design and kept in the process and on disk (diskcache.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

from ..slo.scenarios import Batch, Proof


@dataclass(frozen=True)
class RunShown:
    """One synthetic model of a batch."""

    model: str
    outside: bool  # outside the SLO's scope: its series are there, the rules count none
    series: tuple[tuple[str, tuple[float, ...]], ...]  # (token, a value per minute)
    decoys: tuple[float, ...]  # bucket bounds it exports besides its own
    param: float | None  # its latency threshold, for a latency SLI
    good_missing: bool  # its good-events input is not scraped


@dataclass(frozen=True)
class FiringShown:
    """A burn-rate alert firing for a model at a check."""

    run: int  # index into the batch's runs
    long: str  # the row's windows, which name its rule
    short: str
    value: float  # the burn rate over the long window
    remaining: float | None  # the error budget left at that evaluation


@dataclass(frozen=True)
class ScenarioShown:
    key: str
    claim: str
    why: str
    checks: tuple[int, ...]
    runs: tuple[int, ...]  # indices into the batch's runs


@dataclass(frozen=True)
class BatchShown:
    """One promtool test: its scenarios side by side, checked at `checks`."""

    scenarios: tuple[ScenarioShown, ...]
    runs: tuple[RunShown, ...]
    checks: tuple[int, ...]
    firing: tuple[tuple[FiringShown, ...], ...]  # per check, in order


@dataclass(frozen=True)
class ProofShown:
    batches: tuple[BatchShown, ...]

    @property
    def scenarios(self) -> list[tuple[BatchShown, ScenarioShown]]:
        return [(b, sc) for b in self.batches for sc in b.scenarios]

    def to_json(self) -> str:
        return as_json(self, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> ProofShown:
        data = json.loads(text)
        return ProofShown(tuple(_batch(b) for b in data["batches"]))


def as_json(data, **options) -> str:
    """json.dumps(dataclasses.asdict(data)), the same text without asdict's deep copy of every
    float of every series: json writes the tuples and lists itself, and asks for the dataclasses'
    fields (in their order, as asdict gives them)."""
    return json.dumps(data, default=_fields, **options)


def _fields(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def shown(proof: Proof) -> ProofShown:
    return ProofShown(tuple(_shown_batch(b) for b in proof.batches))


def _shown_batch(batch: Batch) -> BatchShown:
    runs = batch.runs
    index = {id(r): i for i, r in enumerate(runs)}
    scenarios = tuple(
        ScenarioShown(sc.key, sc.claim, sc.why, tuple(sc.checks), tuple(index[id(r)] for r in sc.runs))
        for sc in batch.scenarios
    )
    firing = tuple(
        tuple(
            FiringShown(index[id(r)], f.row.long, f.row.short, f.value, f.remaining)
            for r, f in batch.firing(at)
        )
        for at in batch.checks
    )
    return BatchShown(
        scenarios,
        tuple(
            RunShown(
                r.traffic.model,
                r.outside,
                tuple((x.series, tuple(x.values)) for x in r.series),
                tuple(r.decoys),
                r.param,
                r.good_missing,
            )
            for r in runs
        ),
        tuple(batch.checks),
        firing,
    )


def _batch(data: dict) -> BatchShown:
    return BatchShown(
        tuple(
            ScenarioShown(s["key"], s["claim"], s["why"], tuple(s["checks"]), tuple(s["runs"]))
            for s in data["scenarios"]
        ),
        tuple(
            RunShown(
                r["model"],
                r["outside"],
                tuple((token, tuple(values)) for token, values in r["series"]),
                tuple(r["decoys"]),
                r["param"],
                r["good_missing"],
            )
            for r in data["runs"]
        ),
        tuple(data["checks"]),
        tuple(tuple(FiringShown(**f) for f in at) for at in data["firing"]),
    )
