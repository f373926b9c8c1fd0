"""An incident that ends: a scenario followed by the healthy fleet, so alerts fire *and* resolve.

``recovered(incident, healthy, steps)`` appends ``steps`` steps after the incident's last one, in which
every series behaves as in ``healthy`` (the same deployment without the incident): a gauge takes the
healthy value, a counter or histogram part goes on from where it was by the healthy per-step
increase (no reset), a series only the incident has ends, one only the healthy fleet has comes back.
The healthy scenario is stationary, so its last step is its value for every step after.
"""

from __future__ import annotations

from dataclasses import replace

from .scenario import Scenario
from .series import Series

_MONOTONIC = ("counter", "histogram")


def recovered(incident: Scenario, healthy: Scenario, steps: int) -> Scenario:
    if incident.step != healthy.step:
        raise ValueError("the incident and the healthy scenario must share one step")
    ok = {(s.name, s.labels): s for s in healthy.series}
    seen = set()
    out = []
    for s in incident.series:
        h = ok.get((s.name, s.labels))
        seen.add((s.name, s.labels))
        out.append(Series(s.name, s.labels, s.values + _after(s, h, steps), s.kind, s.family))
    for key, h in ok.items():
        if key not in seen:  # absent during the incident (a renamed or dropped metric): back again
            values = (None,) * incident.steps + tuple(h.values[-1] for _ in range(steps))
            out.append(Series(h.name, h.labels, values, h.kind, h.family))
    return replace(
        incident,
        name=f"{incident.name}_recovered",
        series=tuple(out),
        steps=incident.steps + steps,
        truth={**incident.truth, "recovered_step": incident.steps},
    )


def _after(s: Series, h: Series | None, steps: int) -> tuple:
    if h is None or h.values[-1] is None:
        return (None,) * steps
    if s.kind not in _MONOTONIC:
        return (h.values[-1],) * steps
    inc = h.values[-1] - h.values[-2]
    last = next((v for v in reversed(s.values) if v is not None), h.values[-1])
    return tuple(last + inc * (k + 1) for k in range(steps))
