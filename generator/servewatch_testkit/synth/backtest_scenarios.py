"""Incidents for the alerts INCIDENTS never fires, so that the back-test is compared on every alert.

Same deployment as incidents.py (its builder): errors on every engine (the error-rate alert and the
availability SLO), one overloaded engine (waiting, preemptions, slow decode: the e2e latency alert),
and a dcgm-exporter whose scrapes fail (up 0).
"""

from __future__ import annotations

from dataclasses import replace

from .dcgm import dcgm_target
from .incidents import HOSTS, INCIDENT_STEP, STEPS, _after, _build
from .series import Series, step_fn
from .vllm import CHAT_MIX

ERROR_MIX = tuple(replace(p, finished_reason="error") if i % 2 == 0 else p for i, p in enumerate(CHAT_MIX))
SLOW_DECODE = tuple(replace(p, itl_s=round(p.itl_s * 8, 6)) for p in CHAT_MIX)


def engine_errors():
    """From step 80 every engine ends the requests of CHAT_MIX's first and third profile in error."""
    return _build(
        "engine_errors", engine_kw=lambda p, e: dict(profiles=lambda i: ERROR_MIX if _after(i) else CHAT_MIX)
    )


def engine_overload():
    """POD_1 engine 0 from step 80: 60 waiting, 40 preemptions a step, decode 8x slower."""

    def kw(p, e):
        if (p, e) != (1, 0):
            return {}
        return dict(
            waiting=step_fn(0, {INCIDENT_STEP: 60}),
            preemptions=step_fn(0, {INCIDENT_STEP: 40}),
            profiles=lambda i: SLOW_DECODE if _after(i) else CHAT_MIX,
        )

    return _build("engine_overload", engine_kw=kw)


def dcgm_exporter_down():
    """gpu-node-b's dcgm-exporter fails its scrapes from step 80: up 0, none of its GPU series."""
    down = dcgm_target(HOSTS[1])

    def targets(p):
        return [(dcgm_target(HOSTS[p]), {"active": (0, INCIDENT_STEP)} if p == 1 else {})]

    sc = _build("dcgm_exporter_down", dcgm_targets=targets)
    failing = dict(down.labels())

    def scraped(s: Series) -> Series:
        if s.name != "up" or s.labelmap != failing:
            return s
        return Series(s.name, s.labels, [1 if i < INCIDENT_STEP else 0 for i in range(STEPS)], s.kind)

    return replace(sc, series=tuple(scraped(s) for s in sc.series), truth={**sc.truth, "bad": [failing]})


EXTRA = {
    "engine_errors": engine_errors,
    "engine_overload": engine_overload,
    "dcgm_exporter_down": dcgm_exporter_down,
}
