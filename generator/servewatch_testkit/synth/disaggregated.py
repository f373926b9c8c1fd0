"""A prefill/decode (P/D) deployment with a canary track, the way llm-d runs one.

``deepseek-ai/DeepSeek-V3`` in namespace ``llm-pd``: per track (``stable``, ``canary``) one prefill
pod and one decode pod, one engine each, the role in ``llm_d_ai_role`` and the track in ``track``
(pod labels a PodMonitor's ``podTargetLabels`` brings in: on every series of the target, ``up``
included). One hour at 30 s (120 steps), the incident from ``INCIDENT_STEP`` (80), evaluated at the
last step.

The router sends each request's prefill leg with ``max_tokens=1`` to the prefill pod and the whole
request to the decode pod, so each request finishes once on each: on prefill with ``length`` and no
inter-token latency, on decode with the chat mix's reasons. Stable serves 20 requests per step,
canary as many (0.67/s each: past the canary alerts' traffic guard of 0.1/s). Healthy, per track: prefill TTFT
p95 0.7 s (queue + prefill), decode TTFT p95 0.285 s (the KV transfer wait only), ITL p95 0.04875 s,
KV 0.45 on decode and 0.1 on prefill, 2 waiting on prefill, 1 deferred on decode, no errors. Both
roles run vLLM's NIXL connector and export its series (``fleet.nixl_engine``): each decode engine
pulls its 20 requests' KV caches per step in (0.025, 0.05] s with no failure; each prefill engine
pulls nothing (an empty transfer-time histogram) and frees no block unpulled. Decode drafts with
speculative decoding (3 tokens, 60% accepted). Each pod runs on a host of its own with 2 GPUs,
dcgm-exporter mapping them to the pod (``exported_pod``): 52,000 MiB used on prefill, 71,000 MiB on
decode, so the boards' framebuffer and cost panels have a deployment to show.

``pd_slow_canary``: from step 80 the canary's decode pod decodes 3x slower (ITL p95 0.04875 ->
0.14625 s, past 0.1 s, 3 x the stable's past 1.5 x) and its prefill pod prefills 4x slower
(prefill TTFT p95 0.7 -> 2.8 s, past 2 s, 4 x past 1.5 x); stable unchanged.

``pd_kv_failure``: from step 80 the stable decode pool's transfer path degrades: its engine fails 3
NIXL transfers and 3 notifications per step (0.1/s each, past 0.05/s), every pull takes (0.3, 0.5] s
(transfer p95 past 0.25 s) and the requests it defers until their KV cache arrives pile up from 1 to
30 (past 20); the stable prefill engine, never told its blocks were pulled, frees 3 requests' blocks
unpulled per step (0.1/s, past 0.05/s). Latency histograms and the canary unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from .fleet import NIXL_FAILURES, nixl_engine
from .histogram import ITL_BUCKETS, TTFT_BUCKETS, allocate, quantile_of_observations
from .scenario import Scenario
from .dcgm import dcgm_gpu, dcgm_target
from .scaled_identity import decode_leg, prefill_leg
from .scrape import stable_suffix, stable_uuid, up
from .series import Series
from .vllm import CHAT_MIX, SpecDecode, vllm_engine, vllm_target

STEP, STEPS, INCIDENT_STEP = 30, 120, 80
EVAL_STEP = STEPS - 1
NS, MODEL = "llm-pd", "deepseek-ai/DeepSeek-V3"
ROLE_LABEL, TRACK_LABEL = "llm_d_ai_role", "track"
TRACKS = {"stable": 20, "canary": 20}  # requests per step: a 50/50 canary, the same request mix
PRIOR = 2880
KV_FAILURE_TRACK = "stable"  # pd_kv_failure: the track whose transfer path degrades
DEFERRED_PILED_UP = 30  # pd_kv_failure: requests the failing decode engine defers
# the NIXL counters each role counts (fleet.NIXL_FAILURES): decode pulls and notifies, prefill expires
NIXL_COUNTED = {"decode": NIXL_FAILURES[:2], "prefill": NIXL_FAILURES[2:]}

PREFILL_MIX, DECODE_MIX = prefill_leg(CHAT_MIX), decode_leg(CHAT_MIX)
SLOW_PREFILL = tuple(replace(p, prefill_s=round(p.prefill_s * 4, 6)) for p in PREFILL_MIX)
SLOW_DECODE = tuple(replace(p, itl_s=round(p.itl_s * 3, 6)) for p in DECODE_MIX)


# each pod's GPUs (one host per pod, dcgm-exporter mapping them to it): prefill holds a smaller KV
# cache than decode; what the MoE board's framebuffer and cost panels read
GPUS_PER_POD = 2
FB_USED_MIB = {"prefill": 52000, "decode": 71000}
FB_TOTAL_MIB = 81559


def _gpus(pod: str, role: str) -> list[Series]:
    host = f"node-{pod}"
    target = dcgm_target(host)
    out = [up(target, 1, steps=STEPS)]
    for idx in range(GPUS_PER_POD):
        used = FB_USED_MIB[role]
        out += dcgm_gpu(
            host,
            idx,
            stable_uuid("pd", host, str(idx)),
            used,
            FB_TOTAL_MIB - used,
            steps=STEPS,
            step=STEP,
            util=0.9,
            pod=pod,
            namespace=NS,
            targets=[target],
        )
    return out


def _pod(track: str, role: str) -> str:
    return f"deepseek-v3-{role}-{track}-{stable_suffix('pd', track, role)}"


def _p(profiles, attr: str, bounds, per_token: bool = False) -> float:
    """p95 of one engine's stationary step (every track serves the same mix)."""
    counts = allocate(TRACKS["stable"], [p.weight for p in profiles])
    obs = [
        (getattr(p, attr), c * ((p.generation_tokens - 1) if per_token else 1))
        for p, c in zip(profiles, counts, strict=True)
    ]
    return quantile_of_observations(0.95, [(v, n) for v, n in obs if n], bounds)


def _tokens_per_s(profiles) -> float:
    """Generated tokens per second of one engine serving every track's requests of `profiles`."""
    counts = [allocate(n, [p.weight for p in profiles]) for n in TRACKS.values()]
    return sum(p.generation_tokens * c for each in counts for p, c in zip(profiles, each, strict=True)) / STEP


def _after_incident(healthy, incident):
    """A per-step value: `healthy` before INCIDENT_STEP, `incident` from it on."""
    return lambda i: incident if i >= INCIDENT_STEP else healthy


def _build(name: str, incident: str | None = None) -> Scenario:
    series: list[Series] = []
    engines = []
    for track, requests in TRACKS.items():
        slow = incident == "slow_canary" and track == "canary"
        kv_failing = incident == "kv_failure" and track == KV_FAILURE_TRACK
        for role in ("prefill", "decode"):
            labels = {ROLE_LABEL: role, TRACK_LABEL: track}
            pod = _pod(track, role)
            target = replace(vllm_target(NS, pod), extra=labels)
            base, worse = (PREFILL_MIX, SLOW_PREFILL) if role == "prefill" else (DECODE_MIX, SLOW_DECODE)
            series.append(up(target, 1, steps=STEPS))
            series += _gpus(pod, role)
            deferred = _after_incident(1, DEFERRED_PILED_UP) if kv_failing else 1
            series += nixl_engine(
                target.labels(),
                MODEL,
                0,
                STEPS,
                pulls=requests if role == "decode" else 0,
                failing_from=INCIDENT_STEP if kv_failing else None,
                failing=NIXL_COUNTED[role],
            )
            series += vllm_engine(
                NS,
                pod,
                MODEL,
                0,
                steps=STEPS,
                step=STEP,
                requests=requests,
                profiles=(lambda i, b=base, w=worse: w if i >= INCIDENT_STEP else b) if slow else base,
                kv_usage=0.45 if role == "decode" else 0.1,
                running=10 if role == "decode" else 2,
                waiting=2 if role == "prefill" else deferred,  # decode waits only for its transfers
                waiting_deferred=deferred if role == "decode" else 0,
                # decode drafts ahead (EAGLE-style heads are common on MoE decode pools)
                spec_decode=SpecDecode() if role == "decode" else None,
                prior_steps=PRIOR,
                target=target,
            )
            engines.append({"namespace": NS, "pod": pod, "model_name": MODEL, "engine": "0", **labels})
    truth = {
        "namespace": NS,
        "model_name": MODEL,
        "engines": engines,
        "prefill_ttft_p95": _p(PREFILL_MIX, "ttft_s", TTFT_BUCKETS),
        "decode_ttft_p95": _p(DECODE_MIX, "ttft_s", TTFT_BUCKETS),
        "itl_p95": _p(DECODE_MIX, "itl_s", ITL_BUCKETS, per_token=True),
        "slow_prefill_ttft_p95": _p(SLOW_PREFILL, "ttft_s", TTFT_BUCKETS),
        "slow_itl_p95": _p(SLOW_DECODE, "itl_s", ITL_BUCKETS, per_token=True),
        "requests_per_s": sum(TRACKS.values()) / STEP,  # once per user request
        # each output token once, on decode; the prefill legs' one token each is not output
        "generated_tokens_per_s": _tokens_per_s(DECODE_MIX),
        "prefill_tokens_per_s": _tokens_per_s(PREFILL_MIX),
    }
    return Scenario(name, tuple(series), STEPS, STEP, EVAL_STEP, truth, INCIDENT_STEP if incident else None)


def pd_healthy() -> Scenario:
    return _build("pd_healthy")


def pd_slow_canary() -> Scenario:
    return _build("pd_slow_canary", "slow_canary")


def pd_kv_failure() -> Scenario:
    return _build("pd_kv_failure", "kv_failure")


__all__ = [
    "pd_healthy",
    "pd_slow_canary",
    "pd_kv_failure",
    "ROLE_LABEL",
    "TRACK_LABEL",
    "TRACKS",
    "KV_FAILURE_TRACK",
]
