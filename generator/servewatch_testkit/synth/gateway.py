"""A gateway in front of vLLM: llm-d's endpoint picker (EPP) routing two models in namespace ``llm``.

Each model has one vLLM engine (``vllm:num_requests_running``, 20 requests finished per step, its
own TTFT histogram: every first token at 0.3 s on the engine). Two EPP pods route
``deepseek-ai/DeepSeek-V3``, each for two flows (``fairness_id`` team-a and team-b), 5 first tokens
per step per pod and flow: 20 per 30 s step, 0.667 per second in all; every request streams 50 tokens
0.04 s apart, at the gateway as on the engine. Healthy, every first token reaches the client at
0.6 s; ``moonshotai/Kimi-K2`` is routed the same way. Each EPP pod also passes 5 non-streaming
requests per step and model (flow ``batch``, ``streaming="false"``), whose "first token" the EPP
times as the whole 20 s response: a client-side TTFT that read them would page on a healthy fleet.
Half an hour at 30 s (60 steps), evaluated at the last step.

Each EPP pod and flow counts its requests (``llm_d_epp_request_total``, one per first token); the
healthy fleet has no error series at all. In ``gateway_incident`` the EPP also fails every team-b
request of DeepSeek-V3 from step 20 (``llm_d_epp_request_error_total``, ``error_code="503"``, created
then), half its requests, while its engine finishes all it sees without an error.

``gateway_incident``: from step 20 team-a's first tokens reach the client at 3.0 s on both EPP pods
(10 of 20 per step: the p95 lies in 2-3 s, past the 2 s threshold) and its tokens 0.2 s apart
(half the gaps the gateway sees) while the engines stay at 0.3 s and 0.04 s (the time is spent
outside them); the EPP reports no Kimi-K2 at all (its engine serves on); and one EPP pod still
exports the endpoint picker's older name (``llm_d_router_epp_*``) beside the new one. Each EPP
histogram has the bucket bounds the catalog lists for it (the endpoint picker's code fixes them).

Both EPP pods (job ``epp``, an instance each) also report each model's InferencePool (``POOLS``): 2
ready pods, KV cache 0.45 and a queue of 1 on average. In ``gateway_incident`` Kimi-K2's pool has no
ready pod from step 20 on, ``epp-1`` reports no pool at all (its pool gauges dropped), and a third pool
(``LOST_POOL``) that ``epp-0`` reported until step 20 is reported by no EPP pod from then on, while both
EPP targets stay up (``up{job="epp"}``: the endpoint picker lost its InferencePool).
"""

from __future__ import annotations

from servewatch import catalog

from .histogram import ITL_BUCKETS, TTFT_BUCKETS, histogram_series
from .scenario import Scenario
from .series import Series

STEP, STEPS, INCIDENT_STEP = 30, 60, 20
EVAL_STEP = STEPS - 1
NS = "llm"
MODELS = ("deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2")
EPP_PODS, FLOWS = ("epp-0", "epp-1"), ("team-a", "team-b")
PER_FLOW = 5  # first tokens per step, per EPP pod and flow
TTFT = "llm_d_epp_request_ttft_seconds"
ITL = "llm_d_epp_request_streaming_itl_seconds"
ITL_S, TOKENS = 0.04, 50  # every inter-token gap, at the gateway and on the engine; gaps per first token
SLOW_ITL_S = 0.2  # gateway_incident: the slow flow's inter-token gaps at the gateway from INCIDENT_STEP
SLOW_FLOW = FLOWS[0]  # gateway_incident: the flow whose first tokens and tokens reach the client late
OLD_TTFT = "llm_d_router_epp_request_ttft_seconds"
ENGINE_TTFT_S, CLIENT_TTFT_S, SLOW_TTFT_S = 0.3, 0.6, 3.0
NON_STREAMING_S, BATCH_FLOW = 20.0, "batch"  # a non-streaming flow: the EPP's "TTFT" is the whole response
POOLS = {MODELS[0]: "deepseek-v3-pool", MODELS[1]: "kimi-k2-pool"}  # each model's InferencePool
POOL_VALUES = {"ready_pods": 2.0, "kv_cache": 0.45, "queue": 1.0}  # a healthy pool's gauges
FAILING_FLOW, ERROR_CODE = "team-b", "503"  # gateway_incident: the EPP fails this flow's requests
LOST_POOL = "glm-5-pool"  # gateway_incident: reported by epp-0 until INCIDENT_STEP, then by no EPP pod


def _engine(model: str, pod: str) -> list[Series]:
    labels = {"namespace": NS, "pod": pod, "model_name": model, "engine": "0"}
    running = Series("vllm:num_requests_running", labels, [2.0] * STEPS)
    ttft = histogram_series(
        "vllm:time_to_first_token_seconds", labels, TTFT_BUCKETS, [[(ENGINE_TTFT_S, 20)]] * STEPS
    )
    itl = histogram_series(
        "vllm:inter_token_latency_seconds", labels, ITL_BUCKETS, [[(ITL_S, 20 * TOKENS)]] * STEPS
    )
    finished = Series(
        "vllm:request_success_total",
        {**labels, "finished_reason": "stop"},
        [20.0 * i for i in range(STEPS)],
        kind="counter",
    )
    return [running, finished, *ttft, *itl]


def _epp(name: str, model: str, pod: str, flow: str, slow: bool) -> list[Series]:
    """The EPP's TTFT histogram of one pod and streaming flow: every first token at CLIENT_TTFT_S, at
    SLOW_TTFT_S from INCIDENT_STEP where the flow is slow."""
    labels = {
        "namespace": NS,
        "pod": pod,
        **_target(pod),
        "model_name": model,
        "target_model_name": model,
        "fairness_id": flow,
        "priority": "0",
        "streaming": "true",
    }
    per_step = [
        [(SLOW_TTFT_S if slow and i >= INCIDENT_STEP else CLIENT_TTFT_S, PER_FLOW)] for i in range(STEPS)
    ]
    # the older name (OLD_TTFT) is a twin of the new one: its bounds are the new name's
    return histogram_series(name, labels, catalog.load().test_buckets(TTFT), per_step)


def _whole_responses(model: str, pod: str) -> list[Series]:
    """The EPP's TTFT histogram of one pod's non-streaming requests (streaming="false"): each one's
    whole response, NON_STREAMING_S, no first token of any client; healthy and incident alike."""
    labels = {"namespace": NS, "pod": pod, **_target(pod), "model_name": model, "target_model_name": model}
    labels |= {"fairness_id": BATCH_FLOW, "priority": "0", "streaming": "false"}
    per_step = [[(NON_STREAMING_S, PER_FLOW)]] * STEPS
    return histogram_series(TTFT, labels, catalog.load().test_buckets(TTFT), per_step)


def _requests(model: str, pod: str, flow: str, failing: bool) -> list[Series]:
    """The EPP's request counter of one pod and flow (one request per first token) and, where the
    gateway fails the flow's requests from INCIDENT_STEP on, its error counter, created then."""
    source = catalog.load().clients["llm-d-epp"]
    labels = {"namespace": NS, "pod": pod, **_target(pod), "model_name": model, "target_model_name": model}
    labels |= {"fairness_id": flow, "priority": "0"}
    out = [Series(source.metric("requests"), labels, [PER_FLOW * (i + 1.0) for i in range(STEPS)])]
    if failing:
        errors = [None if i < INCIDENT_STEP else PER_FLOW * (i - INCIDENT_STEP + 1.0) for i in range(STEPS)]
        out.append(Series(source.metric("errors"), {**labels, "error_code": ERROR_CODE}, errors))
    return out


def _itl(model: str, pod: str, flow: str, slow: bool) -> list[Series]:
    labels = {"namespace": NS, "pod": pod, **_target(pod), "model_name": model, "target_model_name": model}
    labels |= {"fairness_id": flow, "priority": "0"}
    per_step = [
        [(SLOW_ITL_S if slow and i >= INCIDENT_STEP else ITL_S, PER_FLOW * TOKENS)] for i in range(STEPS)
    ]
    return histogram_series(ITL, labels, catalog.load().test_buckets(ITL), per_step)


def _target(pod: str) -> dict[str, str]:
    """The scrape labels of an EPP pod's series: the job and one instance per pod."""
    return {"job": "epp", "instance": f"10.2.0.{EPP_PODS.index(pod) + 1}:9090"}


def _pools(incident: bool) -> list[Series]:
    """Each model's pool gauges, from both EPP pods (the names of llm-d's endpoint picker)."""
    source = catalog.load().clients["llm-d-epp"]
    out = []
    for model, pool in POOLS.items():
        empty = incident and model == MODELS[1]
        for quantity, metric in source.pool:
            value = POOL_VALUES[quantity]
            values = [
                0.0 if empty and quantity == "ready_pods" and i >= INCIDENT_STEP else value
                for i in range(STEPS)
            ]
            pods = EPP_PODS[:1] if incident else EPP_PODS  # the incident's second pod lost its pool gauges
            out += [
                Series(metric, {"namespace": NS, "pod": pod, **_target(pod), "name": pool}, values)
                for pod in pods
            ]
    if incident:
        pod = EPP_PODS[0]
        for quantity, metric in source.pool:
            until = [POOL_VALUES[quantity] if i < INCIDENT_STEP else None for i in range(STEPS)]
            out.append(
                Series(metric, {"namespace": NS, "pod": pod, **_target(pod), "name": LOST_POOL}, until)
            )
    return out


def _up() -> list[Series]:
    """Both EPP targets, up throughout."""
    return [Series("up", {"namespace": NS, "pod": pod, **_target(pod)}, [1.0] * STEPS) for pod in EPP_PODS]


def _build(name: str, incident: bool) -> Scenario:
    series: list[Series] = []
    for i, model in enumerate(MODELS):
        series += _engine(model, f"model-{i}-0")
    routed = MODELS[:1] if incident else MODELS
    for model in routed:
        for pod in EPP_PODS:
            for flow in FLOWS:
                series += _epp(TTFT, model, pod, flow, incident and flow == SLOW_FLOW)
                series += _itl(model, pod, flow, incident and flow == SLOW_FLOW)
                series += _requests(model, pod, flow, incident and flow == FAILING_FLOW)
            series += _whole_responses(model, pod)
    if incident:
        series += _epp(OLD_TTFT, MODELS[0], EPP_PODS[0], FLOWS[0], True)
    series += _pools(incident) + _up()
    truth = {
        "client_first_tokens_per_s": len(EPP_PODS) * len(FLOWS) * PER_FLOW / STEP,
        "client_token_gaps_per_s": len(EPP_PODS) * len(FLOWS) * PER_FLOW * TOKENS / STEP,
        # the share of the slow model's inter-token gaps that reach the client late from INCIDENT_STEP
        "slow_gap_ratio": 1 / len(FLOWS) if incident else 0.0,
        "slow_model": MODELS[0] if incident else None,
        # the share of the slow model's requests the gateway fails from INCIDENT_STEP (no engine sees them)
        "gateway_error_ratio": 1 / len(FLOWS) if incident else 0.0,
        "unrouted_model": MODELS[1] if incident else None,
        "empty_pool": POOLS[MODELS[1]] if incident else None,
        "poolless_pod": EPP_PODS[1] if incident else None,
        "lost_pool": LOST_POOL if incident else None,
        "pools": dict(POOL_VALUES),
    }
    return Scenario(
        name,
        tuple(series),
        STEPS,
        STEP,
        EVAL_STEP,
        truth,
        INCIDENT_STEP if incident else None,
    )


def gateway_healthy() -> Scenario:
    return _build("gateway-healthy", incident=False)


def gateway_incident() -> Scenario:
    return _build("gateway-incident", incident=True)


__all__ = ["gateway_healthy", "gateway_incident", "MODELS", "POOLS", "TTFT", "ITL", "ITL_S", "SLOW_ITL_S"]
