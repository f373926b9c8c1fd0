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
KV 0.45 on decode and 0.1 on prefill, 2 waiting on prefill, 1 deferred on decode, no errors.

``pd_slow_canary``: from step 80 the canary's decode pod decodes 3x slower (ITL p95 0.04875 ->
0.14625 s, past 0.1 s, 3 x the stable's past 1.5 x) and its prefill pod prefills 4x slower
(prefill TTFT p95 0.7 -> 2.8 s, past 2 s, 4 x past 1.5 x); stable unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from .histogram import ITL_BUCKETS, TTFT_BUCKETS, allocate, quantile_of_observations
from .scenario import Scenario
from .scrape import stable_suffix, up
from .series import Series
from .vllm import CHAT_MIX, vllm_engine, vllm_target

STEP, STEPS, INCIDENT_STEP = 30, 120, 80
EVAL_STEP = STEPS - 1
NS, MODEL = "llm-pd", "deepseek-ai/DeepSeek-V3"
ROLE_LABEL, TRACK_LABEL = "llm_d_ai_role", "track"
TRACKS = {"stable": 20, "canary": 20}  # requests per step: a 50/50 canary, the same request mix
PRIOR = 2880

# the prefill leg: max_tokens=1, so one token, no inter-token latency, finished with length
PREFILL_MIX = tuple(
    replace(p, generation_tokens=1, finished_reason="length", cached_tokens=0) for p in CHAT_MIX
)
# the decode leg: its "prefill" is the wait for the KV cache to arrive from the prefill pod
DECODE_MIX = tuple(replace(p, queue_s=0.0, prefill_s=round(min(p.prefill_s, 0.25), 6)) for p in CHAT_MIX)
SLOW_PREFILL = tuple(replace(p, prefill_s=round(p.prefill_s * 4, 6)) for p in PREFILL_MIX)
SLOW_DECODE = tuple(replace(p, itl_s=round(p.itl_s * 3, 6)) for p in DECODE_MIX)


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


def _build(name: str, slow_canary: bool) -> Scenario:
    series: list[Series] = []
    engines = []
    for track, requests in TRACKS.items():
        slow = slow_canary and track == "canary"
        for role in ("prefill", "decode"):
            labels = {ROLE_LABEL: role, TRACK_LABEL: track}
            pod = _pod(track, role)
            target = replace(vllm_target(NS, pod), extra=labels)
            base, worse = (PREFILL_MIX, SLOW_PREFILL) if role == "prefill" else (DECODE_MIX, SLOW_DECODE)
            series.append(up(target, 1, steps=STEPS))
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
                waiting=2 if role == "prefill" else 1,
                waiting_deferred=1 if role == "decode" else 0,
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
    return Scenario(
        name, tuple(series), STEPS, STEP, EVAL_STEP, truth, INCIDENT_STEP if slow_canary else None
    )


def pd_healthy() -> Scenario:
    return _build("pd_healthy", slow_canary=False)


def pd_slow_canary() -> Scenario:
    return _build("pd_slow_canary", slow_canary=True)


__all__ = ["pd_healthy", "pd_slow_canary", "ROLE_LABEL", "TRACK_LABEL", "TRACKS"]
