"""The SLO simulator decides most evaluations from running sums, all at once (`_rough_holds`), and
only the searched edges with Prometheus' own summation (`holds`): the proof is only as good as the
two agreeing. On random traffic (calm, bursts of errors, gaps where the engines stop reporting, the
guard's few events), at every evaluation that is no close call, each burn-rate row of each default
SLO must hold on the fast path exactly where it holds on the exact one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from servewatch.slo.simulate import Counters, Timeline
from servewatch.spec.loader import load

REPO = Path(__file__).resolve().parents[1]
STEPS = 6 * 60  # six hours of minutes: every row's long window fills but the 3d and 28d ones
EVERY = (1, 3)  # evaluations every minute, and every 3 minutes as the generated proof evaluates


def _traffic(seed: int) -> tuple[list[float | None], list[float | None]]:
    """Cumulative (good, valid) counters per minute, with stretches of bad and missing samples."""
    rng = random.Random(seed)
    good = valid = 0.0
    goods: list[float | None] = []
    valids: list[float | None] = []
    per_min, bad_share, gap = rng.choice((0.5, 5.0, 300.0)), 0.0, 0
    for _ in range(STEPS):
        if rng.random() < 0.02:  # a new stretch: calm, or burning the budget at some rate
            bad_share = rng.choice((0.0, 0.0, 0.005, 0.02, 0.1, 0.5, 1.0))
        if gap == 0 and rng.random() < 0.01:
            gap = rng.randint(1, 20)
        if gap:
            gap -= 1
            goods.append(None)
            valids.append(None)
            continue
        n = per_min * rng.uniform(0.5, 1.5)
        valid += n
        good += n * (1 - bad_share * rng.uniform(0.8, 1.2))
        goods.append(good)
        valids.append(valid)
    return goods, valids


@pytest.fixture(scope="module")
def slos():
    return load(REPO / "specs").slos


@pytest.mark.parametrize("every", EVERY)
@pytest.mark.parametrize("seed", range(8))
def test_the_fast_path_decides_every_row_as_the_exact_one(slos, seed, every):
    goods, valids = _traffic(seed)
    counters = Counters(good=(("good", tuple(goods)),), valid=(("valid", tuple(valids)),))
    compared = 0
    for slo in slos.values():
        rows = slo.alerting.windows
        timeline = Timeline(slo, slo.objective, counters, STEPS, "5m", every=every)
        rough = timeline._rough_holds(rows)
        for at in range(0, STEPS, every):
            for ri, row in enumerate(rows):
                exact = timeline.holds(at, row)  # notes a close call at `at` when there is one
                if at in timeline.close_calls:
                    continue
                assert rough[ri][at] == exact, f"{slo.name} row {row} at minute {at}"
                compared += 1
    assert compared > 0.9 * len(range(0, STEPS, every)) * sum(len(s.alerting.windows) for s in slos.values())


def test_the_traffic_makes_rows_both_hold_and_not():
    """The comparison above means something only if rows fire on some steps and not on others."""
    slo = load(REPO / "specs").slos["vllm-availability"]
    outcomes = set()
    for seed in range(8):
        goods, valids = _traffic(seed)
        counters = Counters(good=(("good", tuple(goods)),), valid=(("valid", tuple(valids)),))
        timeline = Timeline(slo, slo.objective, counters, STEPS, "5m")
        for held in timeline._rough_holds(slo.alerting.windows).values():
            outcomes |= set(held[60:])
    assert outcomes == {True, False}
