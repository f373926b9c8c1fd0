"""Incidents for the alerts INCIDENTS never fires, so that the back-test is compared on every alert.

Same deployment as incidents.py (its builder): errors on every engine (the error-rate alert and the
availability SLO), one overloaded engine (waiting, preemptions, slow decode: the e2e latency alert),
a dcgm-exporter whose scrapes fail (up 0), a GPU reporting XIDs that age out of the exporter's
window, a decode engine whose NIXL KV transfers fail and slow down, and a TTFT histogram that loses
its buckets (the SLO's good events).
"""

from __future__ import annotations

from dataclasses import replace

from .dcgm import dcgm_target
from .fleet import nixl_engine
from .incidents import (
    HOSTS,
    INCIDENT_STEP,
    MODEL,
    NS,
    POD_0,
    STEP,
    STEPS,
    XID_WINDOW_MS,
    _after,
    _build,
    gpu_uuid,
)
from .series import Series, step_fn
from .vllm import CHAT_MIX, vllm_target

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


def gpu_xid_errors():
    """POD_0's GPU 2 reports XID 79 five times, every other step from step 80 on, then no more.
    dcgm-exporter's XID count holds, per code, the XIDs of its last window (XID_WINDOW_MS, 10 steps):
    it rises 1, 2, ... 5 and falls again as each XID ages out, to 0 at step 98; while one is in the
    window the GPU's series of code 79 takes the place of its zero series (no ``xid`` label). The
    alert fires at step 82 and resolves by itself: at step 107, as a backfilled series has no
    staleness marker and stays visible for the 5 m lookback after its last sample (step 97); a
    scraped one would end at step 98."""
    sc = _build("gpu_xid_errors")
    uuid = gpu_uuid(0, 2)
    window = XID_WINDOW_MS // (STEP * 1000)
    arrivals = [INCIDENT_STEP + 2 * k for k in range(5)]
    counts = [sum(a <= i < a + window for a in arrivals) for i in range(STEPS)]
    count = next(s for s in sc.series if s.name == "DCGM_EXP_XID_ERRORS_COUNT" and s.label("UUID") == uuid)

    def zero_unless_counting(s: Series) -> Series:
        if s is not count:
            return s
        return Series(
            s.name, s.labels, [None if n else v for v, n in zip(s.values, counts, strict=True)], s.kind
        )

    xid = Series(
        count.name,
        {**count.labelmap, "xid": "79"},
        [float(n) if n else None for n in counts],
        kind=count.kind,
    )
    series = tuple(zero_unless_counting(s) for s in sc.series)
    return replace(sc, series=(*series, xid), truth={**sc.truth, "bad": [{"UUID": uuid}]})


def nixl_degraded():
    """POD_0 engine 0 decodes with NIXL KV transfers from prefill; from step 80 three transfers,
    notifications and expired requests fail each step and every pull takes 0.3-0.5 s."""
    sc = _build("nixl_degraded")
    nixl = nixl_engine(vllm_target(NS, POD_0).labels(), MODEL, 0, STEPS, failing_from=INCIDENT_STEP)
    return replace(sc, series=(*sc.series, *nixl))


def ttft_buckets_lost():
    """From step 80 no engine exports TTFT buckets (count and sum stay): the TTFT SLO's good events
    cannot be computed, which only SLOInputsMissing says."""
    sc = _build("ttft_buckets_lost")

    def cut(s: Series) -> Series:
        if s.name != "vllm:time_to_first_token_seconds_bucket":
            return s
        return Series(
            s.name, s.labels, [v if i < INCIDENT_STEP else None for i, v in enumerate(s.values)], s.kind
        )

    return replace(sc, series=tuple(cut(s) for s in sc.series))


EXTRA = {
    "engine_errors": engine_errors,
    "engine_overload": engine_overload,
    "dcgm_exporter_down": dcgm_exporter_down,
    "gpu_xid_errors": gpu_xid_errors,
    "nixl_degraded": nixl_degraded,
    "ttft_buckets_lost": ttft_buckets_lost,
}
