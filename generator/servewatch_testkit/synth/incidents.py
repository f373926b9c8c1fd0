"""Named incident scenarios for the on-call ``investigate`` command.

All share one deployment: ``deepseek-ai/DeepSeek-V3`` in namespace ``llm-serving``, two pods
(``POD_0`` on gpu-node-a, ``POD_1`` on gpu-node-b), two data-parallel engines per pod, each pod
holding four H100s (engine e on GPUs 2e and 2e+1). One hour at 30 s (120 steps): healthy until
``INCIDENT_STEP`` (80), the incident from there on, evaluate at ``EVAL_STEP`` (119, the last step;
every window up to 19 min then lies inside the incident, ``offset 30m`` lands in the healthy part).

Healthy baseline, per engine: 20 requests per step of ``CHAT_MIX`` (10/6/3/1 requests of
800/2400/7000/1200 prompt and 200/400/300/256 output tokens), KV cache 0.45, 10 running, 0 waiting,
no preemptions, no aborts or errors; per GPU: FB 48592 used / 32394 free MiB (ratio 0.600005), util
0.85, and the exporters' opt-in XID count enabled (GPUXidErrors reads it) with no XID in its window:
one 0 series per GPU or MIG instance, without an ``xid`` label. Every healthy value keeps a clear
margin below the default alert thresholds: TTFT p95 0.917 s (alert > 2 s), ITL p95 0.04875 s
(> 0.1 s), e2e p95 19.17 s (> 60 s), KV 0.45 (> 0.95), FB 0.6 (> 0.95), waiting 0 (> 50),
preemptions 0/s (> 1/s), error share 0 (> 5%), XIDs in the window 0 (> 0).

Exact per-scenario numbers are in each builder's docstring and in ``Scenario.truth``; quantiles
there are what ``histogram_quantile(q, sum by (le) (rate(x_bucket[5m])))`` returns per engine at
``EVAL_STEP`` (``before`` values: at ``INCIDENT_STEP - 1``); keys ending in ``_model`` are the
model-level quantile the alerts use (buckets summed over the four engines), where it differs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .dcgm import H100, H100_USABLE_MIB, dcgm_gpu, dcgm_target, field_names
from .histogram import (
    ITL_BUCKETS,
    REQ_BUCKETS,
    TTFT_BUCKETS,
    allocate,
    quantile_of_observations,
    token_buckets,
)
from .scenario import Scenario
from .scrape import Target, stable_suffix, stable_uuid, up
from .series import Series, ramp, rename_metric, step_fn
from .vllm import CHAT_MIX, vllm_engine, vllm_target

STEP = 30
STEPS = 120
INCIDENT_STEP = 80
EVAL_STEP = STEPS - 1
NS = "llm-serving"
MODEL = "deepseek-ai/DeepSeek-V3"
MAX_MODEL_LEN = 131072
HOSTS = ("gpu-node-a", "gpu-node-b")
PODS = tuple(f"deepseek-v3-7d9f6c5b8-{stable_suffix('incident', str(p))}" for p in range(2))
POD_0, POD_1 = PODS
# every engine of the deployment, by the labels an alert on one carries (two data-parallel ranks a pod)
ENGINES = tuple(
    {"namespace": NS, "pod": pod, "model_name": MODEL, "engine": str(e)} for pod in PODS for e in range(2)
)
PRIOR = 2880
BASE_REQUESTS = 20
BASE_KV = 0.45
BASE_RUNNING = 10
FB_USED, FB_FREE = 48592, H100_USABLE_MIB - 48592
XID_WINDOW_MS = 300000  # dcgm-exporter's default --xid-count-window-size (5 min)
# vllm_engine's arguments for a healthy engine of the deployment
BASELINE_ENGINE = dict(
    requests=BASE_REQUESTS,
    profiles=CHAT_MIX,
    kv_usage=BASE_KV,
    running=BASE_RUNNING,
    waiting=0,
    prior_steps=PRIOR,
    max_model_len=MAX_MODEL_LEN,
)


def gpu_uuid(pod: int, gpu: int) -> str:
    return stable_uuid("incident", HOSTS[pod], str(gpu))


def _after(i: int) -> bool:
    return i >= INCIDENT_STEP


def _build(
    name: str,
    *,
    engine_kw: Callable[[int, int], dict] = lambda p, e: {},
    gpu_kw: Callable[[int, int], dict] = lambda p, g: {},
    dcgm_targets: Callable[[int], list[tuple[Target, dict]]] | None = None,
    truth: dict | None = None,
    incident: bool = True,
) -> Scenario:
    """The shared deployment, with per-engine / per-GPU keyword overrides."""
    s: list[Series] = []
    for p, pod in enumerate(PODS):
        host = HOSTS[p]
        exporters = dcgm_targets(p) if dcgm_targets else [(dcgm_target(host), {})]
        for tgt, extra in exporters:
            s.append(up(tgt, _exporter_up(extra), steps=STEPS))
        for g in range(4):
            kw = dict(util=0.85, pod=pod, namespace=NS, xid_window_ms=XID_WINDOW_MS)
            kw.update(gpu_kw(p, g))
            for tgt, extra in exporters:
                gk = {**kw, **extra}
                s += dcgm_gpu(
                    host,
                    g,
                    gpu_uuid(p, g),
                    gk.pop("fb_used_mib", FB_USED),
                    gk.pop("fb_free_mib", FB_FREE),
                    steps=STEPS,
                    step=STEP,
                    targets=[tgt],
                    **gk,
                )
        s.append(up(vllm_target(NS, pod), 1, steps=STEPS))
        for e in range(2):
            kw = {**BASELINE_ENGINE, **engine_kw(p, e)}
            s += vllm_engine(NS, pod, MODEL, e, steps=STEPS, step=STEP, **kw)
    base_truth = {
        "model_name": MODEL,
        "namespace": NS,
        "pods": PODS,
        "hosts": HOSTS,
        "engines": list(ENGINES),
        "gpus": [
            {"host": HOSTS[p], "gpu": str(g), "UUID": gpu_uuid(p, g), "pod": PODS[p], "engine": str(g // 2)}
            for p in range(2)
            for g in range(4)
        ],
        "bad": [],
    }
    base_truth.update(truth or {})
    return Scenario(name, tuple(s), STEPS, STEP, EVAL_STEP, base_truth, INCIDENT_STEP if incident else None)


def _exporter_up(extra: dict) -> Callable[[int], int | None]:
    """An exporter target is up while it serves series (its ``active`` range), absent otherwise."""
    lo, hi = extra.get("active", (0, STEPS))
    return lambda i: 1 if lo <= i < hi else None


def _obs(profiles, attr: str, n: int, per_token: bool) -> list[tuple[float, int]]:
    counts = allocate(n, [p.weight for p in profiles])
    if per_token:  # inter-token latency: one observation per output token after the first
        return [
            (getattr(p, attr), c * (p.generation_tokens - 1)) for p, c in zip(profiles, counts, strict=True)
        ]
    return [(float(getattr(p, attr)), c) for p, c in zip(profiles, counts, strict=True)]


def _mean(profiles, attr: str, n: int = BASE_REQUESTS) -> float:
    """The average of ``attr`` over one step's ``n`` requests of ``profiles`` (rate(_sum) / rate(_count))."""
    obs = _obs(profiles, attr, n, per_token=False)
    return sum(v * c for v, c in obs) / sum(c for _, c in obs)


def _p(q: float, profiles, attr: str, bounds, n: int = BASE_REQUESTS, per_token: bool = False) -> float:
    """The quantile a stationary window of ``profiles`` produces for one engine."""
    return quantile_of_observations(q, _obs(profiles, attr, n, per_token), bounds)


def _p_model(q: float, engines, attr: str, bounds, per_token: bool = False) -> float:
    """The model-level quantile (buckets summed over engines) of stationary ``engines``.

    ``engines`` is ``[(profiles, n)]``.
    """
    return quantile_of_observations(
        q, [o for prof, n in engines for o in _obs(prof, attr, n, per_token)], bounds
    )


def healthy() -> Scenario:
    """Everything normal for the whole hour; ``truth["bad"]`` is empty.

    Per engine, and per model (the four engines are identical): TTFT p95 0.916667 s (TTFTs 10 x 0.17,
    6 x 0.45, 1 x 0.30 s at or below 0.5, 3 x 0.90 s in (0.75, 1.0]: rank 19 -> 0.75 + 0.25 * 2/3) and
    p50 0.25 s; ITL p95 0.04875 s (every ITL in (0.025, 0.05]); e2e p95 19.1667 s (e2e 10 x 7.135 s,
    3 x 14.355 and 1 x 13.05 s in (10, 15], 6 x 16.41 s in (15, 20]: rank 19 -> 15 + 5 * 5/6);
    queue-time p95 0.285 s (every queue time in the first REQ bucket (0, 0.3]); prefill p95 0.7 s
    (11 at or below 0.3 s, 6 x 0.35 s, 3 x 0.7 s in (0.5, 0.8]: 0.5 + 0.3 * 2/3); KV 0.45, 10 running,
    0 waiting, preemption rate 0, error share 0 (the 256-token outputs finish with ``length``).
    Per GPU: FB ratio 48592/80986 = 0.600005. No alert fires.
    """
    return _build(
        "healthy",
        incident=False,
        truth={
            "ttft_p95": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
            "ttft_p50": _p(0.50, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
            "itl_p95": _p(0.95, CHAT_MIX, "itl_s", ITL_BUCKETS, per_token=True),
            "e2e_p95": _p(0.95, CHAT_MIX, "e2e_s", REQ_BUCKETS),
            "queue_p95": _p(0.95, CHAT_MIX, "queue_s", REQ_BUCKETS),
            "prefill_p95": _p(0.95, CHAT_MIX, "prefill_s", REQ_BUCKETS),
            "kv_cache_usage_perc": BASE_KV,
            "fb_ratio": FB_USED / (FB_USED + FB_FREE),
            "waiting": 0,
            "preemptions_per_s": 0.0,
            "error_share": 0.0,
        },
    )


SLOW_MIX = tuple(replace(p, itl_s=round(p.itl_s * 3, 6)) for p in CHAT_MIX)  # contended decode batches


def kv_saturation() -> Scenario:
    """KV cache saturated on ONE engine: ``POD_0`` engine "1".

    From step 72 its KV usage ramps 0.45 -> 0.98 (reached at step 80, flat after), preemptions rise
    by 3 per step (rate 0.1/s; other engines 0), running 24 and waiting 6 (others 10 / 0), and its
    inter-token latency triples (every profile's ITL x3: 0.035/0.04/0.045/0.05 s -> 0.105/0.12/0.135/0.15):
    ITL p95 0.04875 s before -> 0.1475 s after (all in (0.1, 0.15]). TTFT and prompt lengths are
    unchanged (TTFT p95 0.916667 s).
    Siblings (``POD_0`` engine 0, ``POD_1`` engines 0 and 1) stay at the baseline. GPUs unchanged
    (vLLM preallocates, so FB does not move with KV usage).
    Per model (what the latency alerts see): a quarter of all ITL observations are now in (0.1, 0.15],
    so the ITL p95 is 0.14 s (rank 0.95 of 4 x 5536 lies 0.8 into that bucket); the e2e p95 is
    45.5556 s (the bad engine's e2e 21.065/48.33/41.265/38.55 s: rank 76 of 80 -> 40 + 10 * 5/9).
    """
    bad = (0, 1)

    def engine_kw(p, e):
        if (p, e) != bad:
            return {}
        return dict(
            kv_usage=ramp(BASE_KV, 0.98, 72, INCIDENT_STEP),
            preemptions=step_fn(0, {INCIDENT_STEP: 3}),
            running=step_fn(BASE_RUNNING, {INCIDENT_STEP: 24}),
            waiting=step_fn(0, {INCIDENT_STEP: 6}),
            profiles=lambda i: SLOW_MIX if _after(i) else CHAT_MIX,
        )

    per_model = [(CHAT_MIX, BASE_REQUESTS)] * 3 + [(SLOW_MIX, BASE_REQUESTS)]
    return _build(
        "kv_saturation",
        engine_kw=engine_kw,
        truth={
            "bad": [{"namespace": NS, "pod": POD_0, "model_name": MODEL, "engine": "1"}],
            "kv_cache_usage_perc": 0.98,
            "kv_cache_usage_perc_others": BASE_KV,
            "preemptions_per_s": 3 / STEP,
            "preemptions_per_s_others": 0.0,
            "running": 24,
            "waiting": 6,
            "itl_p95_before": _p(0.95, CHAT_MIX, "itl_s", ITL_BUCKETS, per_token=True),
            "itl_p95_after": _p(0.95, SLOW_MIX, "itl_s", ITL_BUCKETS, per_token=True),
            "itl_p95_model_after": _p_model(0.95, per_model, "itl_s", ITL_BUCKETS, per_token=True),
            "e2e_p95_model_after": _p_model(0.95, per_model, "e2e_s", REQ_BUCKETS),
            "ttft_p95": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
        },
    )


QUEUED_MIX = tuple(replace(p, queue_s=round(p.queue_s + 4.0, 6)) for p in CHAT_MIX)


def ttft_queueing() -> Scenario:
    """TTFT up on ALL four engines because requests queue (a load surge), prompts unchanged.

    From step 80 every engine finishes 40 requests per step (was 20), every request waits 4 s longer
    in the queue (queue 0.05/0.1/0.2/0.1 s -> 4.05/4.1/4.2/4.1 s), waiting = 18 and running = 16 per
    engine. Per engine: TTFT p95 0.916667 s -> 4.875 s (TTFTs 4.17/4.45/4.9/4.3 s, all 40 in
    (2.5, 5.0]: 2.5 + 2.5 * 0.95), queue-time p95 0.285 -> 4.875 s (all in (2.5, 5.0]); prefill p95
    (0.7 s) and prompt-token p95 (8333.3) unchanged; e2e p95 19.17 -> 28.33 s (12 of 40 requests at
    20.41 s in (20, 30]: 20 + 10 * 10/12). KV 0.45 -> 0.7, no preemptions, GPUs unchanged. Request
    rate 2x the rate 30 minutes earlier (``arrivals_change``).
    """

    def engine_kw(p, e):
        return dict(
            requests=step_fn(BASE_REQUESTS, {INCIDENT_STEP: 40}),
            profiles=lambda i: QUEUED_MIX if _after(i) else CHAT_MIX,
            waiting=step_fn(0, {INCIDENT_STEP: 18}),
            running=step_fn(BASE_RUNNING, {INCIDENT_STEP: 16}),
            kv_usage=step_fn(BASE_KV, {INCIDENT_STEP: 0.7}),
        )

    tok = token_buckets(MAX_MODEL_LEN)
    return _build(
        "ttft_queueing",
        engine_kw=engine_kw,
        truth={
            "bad": list(ENGINES),
            "requests_per_s": 40 / STEP,
            "requests_per_s_before": BASE_REQUESTS / STEP,
            "arrivals_change": 40 / BASE_REQUESTS,  # request rate now / 30 minutes earlier
            "waiting": 18,
            "running": 16,
            "kv_cache_usage_perc": 0.7,
            "ttft_p95_before": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
            "ttft_p95_after": _p(0.95, QUEUED_MIX, "ttft_s", TTFT_BUCKETS, n=40),
            "e2e_p95_after": _p(0.95, QUEUED_MIX, "e2e_s", REQ_BUCKETS, n=40),
            "queue_p95_before": _p(0.95, CHAT_MIX, "queue_s", REQ_BUCKETS),
            "queue_p95_after": _p(0.95, QUEUED_MIX, "queue_s", REQ_BUCKETS, n=40),
            "prefill_p95": _p(0.95, CHAT_MIX, "prefill_s", REQ_BUCKETS),
            "prompt_tokens_p95": _p(0.95, CHAT_MIX, "prompt_tokens", tok),
        },
    )


LONG_MIX = tuple(
    replace(
        p,
        prompt_tokens=p.prompt_tokens * 4,
        cached_tokens=p.cached_tokens,
        prefill_s=round(p.prefill_s * 4, 6),
    )
    for p in CHAT_MIX
)


def ttft_long_prompts() -> Scenario:
    """TTFT up on ALL four engines because prompts got 4x longer; queue time flat.

    From step 80 every profile's prompt is 4x longer (800/2400/7000/1200 -> 3200/9600/28000/4800
    tokens, cached tokens unchanged) and its prefill takes 4x longer (0.12/0.35/0.7/0.2 s ->
    0.48/1.4/2.8/0.8 s). Requests per step, queue time, waiting (0), running (10), KV (0.45) unchanged.
    Per engine: TTFT p95 0.916667 -> 4.167 s (TTFTs 0.53/1.5/3.0/0.9 s: 17 at or below 2.5, 3 in
    (2.5, 5.0]: 2.5 + 2.5 * 2/3), prefill p95 0.7 -> 4.167 s, prompt-token p95 8333.3 -> 40000
    tokens, e2e p95 19.17 -> 19.44 s (9 of 20 in (15, 20]: 15 + 5 * 8/9), queue-time p95 0.285 s
    unchanged; average prompt length 4x (``prompt_length_change``).
    """

    def engine_kw(p, e):
        return dict(profiles=lambda i: LONG_MIX if _after(i) else CHAT_MIX)

    tok = token_buckets(MAX_MODEL_LEN)
    return _build(
        "ttft_long_prompts",
        engine_kw=engine_kw,
        truth={
            "bad": list(ENGINES),
            "ttft_p95_before": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
            "ttft_p95_after": _p(0.95, LONG_MIX, "ttft_s", TTFT_BUCKETS),
            "e2e_p95_after": _p(0.95, LONG_MIX, "e2e_s", REQ_BUCKETS),
            "prefill_p95_before": _p(0.95, CHAT_MIX, "prefill_s", REQ_BUCKETS),
            "prefill_p95_after": _p(0.95, LONG_MIX, "prefill_s", REQ_BUCKETS),
            "prompt_tokens_p95_before": _p(0.95, CHAT_MIX, "prompt_tokens", tok),
            "prompt_tokens_p95_after": _p(0.95, LONG_MIX, "prompt_tokens", tok),
            # average prompt length now / 30 minutes earlier
            "prompt_length_change": _mean(LONG_MIX, "prompt_tokens") / _mean(CHAT_MIX, "prompt_tokens"),
            "queue_p95": _p(0.95, CHAT_MIX, "queue_s", REQ_BUCKETS),
        },
    )


FULL_USED = 78556  # round(0.97 * 80986)


def ep_rank_gpu_full() -> Scenario:
    """One GPU of a pod fills up: ``POD_1``'s GPU 3 (gpu-node-b, engine 1's second GPU).

    Its FB used ramps from 48592 MiB (ratio 0.600005) at step 70 to 78556 MiB (free 2430, ratio
    0.969995) at step 80 and stays; its util stays 0.85. Every sibling GPU (the other three of
    ``POD_1`` and all four of ``POD_0``) stays at 48592/32394 (0.600005). vLLM metrics unchanged:
    nothing on the vLLM side shows it, the per-GPU ratio (not a pod average, 0.6925) must.
    """
    used = ramp(FB_USED, FULL_USED, 70, INCIDENT_STEP)

    def gpu_kw(p, g):
        if (p, g) != (1, 3):
            return {}
        return dict(
            fb_used_mib=lambda i: round(used(i)), fb_free_mib=lambda i: H100_USABLE_MIB - round(used(i))
        )

    return _build(
        "ep_rank_gpu_full",
        gpu_kw=gpu_kw,
        truth={
            "bad": [{"host": HOSTS[1], "gpu": "3", "UUID": gpu_uuid(1, 3), "pod": POD_1, "namespace": NS}],
            "fb_used_mib": FULL_USED,
            "fb_free_mib": H100_USABLE_MIB - FULL_USED,
            "fb_ratio": FULL_USED / H100_USABLE_MIB,
            "fb_ratio_siblings": FB_USED / H100_USABLE_MIB,
            "fb_ratio_pod_mean": (FULL_USED + 3 * FB_USED) / (4 * H100_USABLE_MIB),
        },
    )


def dcgm_renamed() -> Scenario:
    """dcgm-exporter upgraded to 4.9 on both hosts at step 80: the MiB FB names disappear.

    Steps 0-79: exporter 4.5.3-4.8.2 (catalog profile ``mib``: ``DCGM_FI_DEV_FB_USED``/``_FREE`` in
    MiB, label ``Hostname``, ``DCGM_FI_DRIVER_VERSION``), pod ``nvidia-dcgm-exporter-<old>``. From step
    80: a new exporter pod (same job and instance) exposing the profile ``bytes`` names only
    (``DCGM_FI_DEV_FB_USED_BYTES``/``DCGM_FI_DEV_FB_FREE_BYTES``, bytes = MiB x 1048576, same ratio
    0.600005, and every other field under its 4.9 name and unit), label ``hostname`` and
    ``DCGM_FI_SYSTEM_DRIVER_VERSION``. ``up`` of the exporter job stays 1 throughout (old pod's
    target until 79, new pod's from 80). At ``EVAL_STEP`` the MiB names return nothing (last sample
    20 min ago, beyond the 5 m lookback): an FB alert built on them is silently blind.
    ``truth["bad"]`` names both exporter targets (host, job, instance). vLLM unchanged.
    """

    def targets(p):
        old = dcgm_target(HOSTS[p])
        new = Target(
            old.job,
            old.instance,
            old.namespace,
            f"nvidia-dcgm-exporter-{stable_suffix(HOSTS[p], '4.9')}",
            old.container,
        )
        return [
            (old, {"active": (0, INCIDENT_STEP)}),
            (
                new,
                {
                    "active": (INCIDENT_STEP, STEPS),
                    "profile": "bytes",
                    "hostname_label": "hostname",
                },
            ),
        ]

    return _build(
        "dcgm_renamed",
        dcgm_targets=targets,
        truth={
            "bad": [
                {"host": h, "job": "nvidia-dcgm-exporter", "instance": dcgm_target(h).instance} for h in HOSTS
            ],
            "absent_from_step": INCIDENT_STEP,
            "absent_metrics": field_names("mib", "fb_used", "fb_free"),
            "present_metrics": field_names("bytes", "fb_used", "fb_free"),
            "fb_used_bytes": FB_USED * 1048576,
            "fb_free_bytes": FB_FREE * 1048576,
            "fb_ratio": FB_USED / (FB_USED + FB_FREE),
        },
    )


def vllm_stats_missing() -> Scenario:
    """``POD_1`` is restarted with ``--disable-log-stats`` at step 80: target up, no ``vllm:`` series.

    Same pod name and target (``up`` = 1 throughout); every ``vllm:`` series of ``POD_1`` (both
    engines) ends at step 79. ``POD_0`` unchanged. At ``EVAL_STEP`` ``POD_1`` has no vLLM series, so
    an alert on its latency or KV cache cannot fire; only an absence companion can.
    """

    def engine_kw(p, e):
        return dict(active=(0, INCIDENT_STEP)) if p == 1 else {}

    return _build(
        "vllm_stats_missing",
        engine_kw=engine_kw,
        truth={
            "bad": [{"namespace": NS, "pod": POD_1, "model_name": MODEL}],
            "absent_from_step": INCIDENT_STEP,
        },
    )


KV_NAME, KV_OLD_NAME = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"


def _split_at(series: Series, step: int, before: bool) -> Series:
    """The series with its samples from ``step`` on (``before=True``: up to ``step - 1``) removed."""
    vals = [v if (i < step) == before else None for i, v in enumerate(series.values)]
    return Series(series.name, series.labels, vals, series.kind, series.family)


def vllm_kv_renamed() -> Scenario:
    """``POD_1`` is redeployed at step 80 with a vLLM build older than 0.12: it exposes the KV-cache
    gauge under its old name ``vllm:gpu_cache_usage_perc`` instead of ``vllm:kv_cache_usage_perc``.

    Everything else is the healthy baseline: the target stays up (``up`` = 1), both of ``POD_1``'s
    engines keep every other ``vllm:`` series (``vllm:num_requests_running`` included) and the KV value
    itself (0.45) is unchanged, only its name moves: ``vllm:kv_cache_usage_perc`` of ``POD_1`` ends at
    step 79 and ``vllm:gpu_cache_usage_perc`` carries the same values from step 80. ``POD_0`` unchanged.
    At ``EVAL_STEP`` the KV alert is blind for ``POD_1`` (not firing: 0.45 is far below 0.95); the
    absence companion VLLMSignalMetricsMissing fires for ``POD_1``'s target with
    ``metric="vllm:kv_cache_usage_perc"``, and no other vLLM input is missing.
    """
    base = healthy()
    out: list[Series] = []
    for s in base.series:
        if s.name == KV_NAME and s.label("pod") == POD_1:
            out.append(_split_at(s, INCIDENT_STEP, before=True))
            out += rename_metric([_split_at(s, INCIDENT_STEP, before=False)], KV_NAME, KV_OLD_NAME)
        else:
            out.append(s)
    target = vllm_target(NS, POD_1)
    truth = {
        **base.truth,
        "bad": [
            {"job": target.job, "instance": target.instance, "namespace": NS, "pod": POD_1, "metric": KV_NAME}
        ],
        "missing_metric": KV_NAME,
        "present_instead": KV_OLD_NAME,
        "absent_from_step": INCIDENT_STEP,
    }
    return Scenario(
        "vllm_kv_renamed", tuple(out), base.steps, base.step, base.eval_step, truth, INCIDENT_STEP
    )


def wedged_engine() -> Scenario:
    """``POD_1`` engine "0" wedges at step 80 (a hang in the expert-parallel all-to-all): the server
    keeps answering scrapes, but the engine finishes no request and computes no token.

    From step 80 its requests per step are 0, so every counter and histogram of it stays at its last
    value, while its gauges freeze at their last values: running 10, waiting 0, KV 0.45. The other
    three engines stay at the baseline, so the model's latency, error and throughput signals (from
    finished requests) stay healthy. The 5 m rates of the engine are 0 from step 89 (the window
    (step 79, step 89] holds no increment); VLLMEngineStalled holds from then on, and at ``EVAL_STEP``
    has held for 15 min, beyond its `for`.
    """
    bad = (1, 0)

    def engine_kw(p, e):
        if (p, e) != bad:
            return {}
        return dict(requests=step_fn(BASE_REQUESTS, {INCIDENT_STEP: 0}))

    return _build(
        "wedged_engine",
        engine_kw=engine_kw,
        truth={
            "bad": [{"namespace": NS, "pod": POD_1, "model_name": MODEL, "engine": "0"}],
            "in_flight": BASE_RUNNING,
            "stalled_from_step": INCIDENT_STEP + 9,
            "ttft_p95": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
            "error_share": 0.0,
        },
    )


FLAP_STEPS = 12  # the pod mapping of the flapping GPU: there for 6 minutes, gone for 6 minutes


def gpu_pod_label_flap() -> Scenario:
    """``POD_0``'s GPU 1 (gpu-node-a) is full from step 80 (FB 78556/80986 MiB, ratio 0.969995) while
    dcgm-exporter's pod mapping for it comes and goes (a pod-resources call that fails for minutes
    at a time): from step 80 its series carry ``exported_pod``/``exported_namespace`` for
    ``FLAP_STEPS`` steps, then none for as many, and so on. Every other GPU stays at 0.600005 with its
    mapping. The GPU alert is keyed by the GPU alone (its workload is text in the description), so its
    labels stay the same through every flip and it fires; with the pod or namespace in its labels it
    would start over at each flip. vLLM unchanged.
    """
    bad = (0, 1)

    def gpu_kw(p, g):
        if (p, g) != bad:
            return {}
        mapped = lambda i: i < INCIDENT_STEP or ((i - INCIDENT_STEP) // FLAP_STEPS) % 2 == 0  # noqa: E731
        return dict(
            fb_used_mib=lambda i: FULL_USED if _after(i) else FB_USED,
            fb_free_mib=lambda i: H100_USABLE_MIB - (FULL_USED if _after(i) else FB_USED),
            pod=lambda i: POD_0 if mapped(i) else None,
            namespace=lambda i: NS if mapped(i) else None,
        )

    return _build(
        "gpu_pod_label_flap",
        gpu_kw=gpu_kw,
        truth={
            "bad": [{"host": HOSTS[0], "gpu": "1", "UUID": gpu_uuid(0, 1), "pod": POD_0, "namespace": NS}],
            "fb_ratio": FULL_USED / H100_USABLE_MIB,
            "flap_steps": FLAP_STEPS,
        },
    )


CHAT_NS, CHAT_POD, CHAT_MODEL = "chat-serving", "qwen3-chat-0", "Qwen/Qwen3-32B"


def vllm_scrape_gone() -> Scenario:
    """Every vLLM target of ``NS`` vanishes at step 80 (a ServiceMonitor no longer selected): from then
    on neither pod has an ``up`` series or any series with job ``vllm``; nothing fails, the targets
    are just gone, so every vLLM rule of ``NS`` has no result. A second deployment, ``CHAT_MODEL`` in
    ``CHAT_NS`` (one engine, the healthy baseline), keeps its target throughout, so vLLM is not absent
    as a whole. GPUs unchanged. VLLMMetricsAbsent fires for ``NS`` alone (label ``namespace``).
    """
    base = _build("vllm_scrape_gone", truth={})
    kept = [_split_at(x, INCIDENT_STEP, before=True) if x.label("job") == "vllm" else x for x in base.series]
    chat = vllm_engine(CHAT_NS, CHAT_POD, CHAT_MODEL, 0, steps=STEPS, step=STEP, **BASELINE_ENGINE)
    chat.append(up(vllm_target(CHAT_NS, CHAT_POD), 1, steps=STEPS))
    truth = {**base.truth, "bad": [{"namespace": NS}], "gone_from_step": INCIDENT_STEP, "kept": CHAT_NS}
    return Scenario(
        "vllm_scrape_gone", tuple(kept + chat), base.steps, base.step, base.eval_step, truth, INCIDENT_STEP
    )


MIG_PROFILE = "3g.40gb"


def mig_without_fb() -> Scenario:
    """``POD_1``'s GPU 3 (gpu-node-b) is split into two MIG instances at step 80, and, a known
    dcgm-exporter gap on H100, the instances export their other fields (temperatures, power, clocks,
    profiling ratios) but no FB_USED, FB_FREE or FB_RESERVED, while the same exporter keeps exporting
    them for its three other GPUs. The whole-GPU series of GPU 3 end at step 79. GPUFramebufferUsageHigh
    cannot see the instances; GPUFramebufferMetricsMissing fires once per instance (``GPU_I_ID`` 1 and
    2) with ``metric`` naming both FB fields. vLLM unchanged.
    """
    base = _build(
        "mig_without_fb", gpu_kw=lambda p, g: dict(active=(0, INCIDENT_STEP)) if (p, g) == (1, 3) else {}
    )
    instances = [
        x
        for gi in (1, 2)
        for x in dcgm_gpu(
            HOSTS[1],
            3,
            gpu_uuid(1, 3),
            0,
            0,
            steps=STEPS,
            step=STEP,
            util=0.85,
            mig_instance=(gi, MIG_PROFILE),
            pod=POD_1,
            namespace=NS,
            xid_window_ms=XID_WINDOW_MS,
            targets=[dcgm_target(HOSTS[1])],
            active=(INCIDENT_STEP, STEPS),
            drop=("fb_used", "fb_free", "fb_reserved"),
        )
    ]
    fb = ",".join(field_names("mib", "fb_used", "fb_free"))
    truth = {
        **base.truth,
        "bad": [
            {"UUID": gpu_uuid(1, 3), "GPU_I_ID": str(gi), "host": HOSTS[1], "namespace": NS, "metric": fb}
            for gi in (1, 2)
        ],
        "mig_from_step": INCIDENT_STEP,
    }
    return Scenario(
        "mig_without_fb",
        base.series + tuple(instances),
        base.steps,
        base.step,
        base.eval_step,
        truth,
        INCIDENT_STEP,
    )


def vanished_rank() -> Scenario:
    """``POD_1`` engine "1" dies at step 80 (its engine core process crashed): from then on the pod's
    server exports no series of that rank, while its target stays up and engine "0" keeps serving at
    the baseline. The rank's last sample is at step 79, so an instant query loses it from step 90
    (5 m lookback); VLLMEngineMissing holds from then on, 14.5 min at ``EVAL_STEP``, beyond its `for`.
    """
    bad = (1, 1)

    def engine_kw(p, e):
        return dict(active=(0, INCIDENT_STEP)) if (p, e) == bad else {}

    return _build(
        "vanished_rank",
        engine_kw=engine_kw,
        truth={"bad": [{"namespace": NS, "pod": POD_1, "model_name": MODEL, "engine": "1"}]},
    )


def vanished_gpu() -> Scenario:
    """``POD_0``'s GPU 3 on gpu-node-a falls off the bus at step 80 (XID 79): DCGM returns blank values
    for it, so the exporter exports none of its series, while the exporter stays up and exports the
    host's other three GPUs. Its last sample is at step 79; GPUMissing holds from step 90 on. vLLM
    unchanged (the synthetic engine keeps serving: only the GPU's series are modelled).
    """
    bad = (0, 3)

    def gpu_kw(p, g):
        return dict(active=(0, INCIDENT_STEP)) if (p, g) == bad else {}

    return _build(
        "vanished_gpu",
        gpu_kw=gpu_kw,
        truth={
            "bad": [{"UUID": gpu_uuid(*bad), "host": HOSTS[bad[0]], "gpu": str(bad[1]), "modelName": H100}]
        },
    )


IDLE_STEP = 60


def idle_rank() -> Scenario:
    """``POD_1`` engine "1" gets no work from step ``IDLE_STEP`` (60; the data-parallel balancer routes
    around it): no request arrives, running and waiting are 0, no token is computed; engine "0" of the
    same pod keeps serving at the baseline (thousands of tokens a second, far above VLLMEngineIdle's
    `busy`). Its 5 m token rates are 0 from step 69; VLLMEngineIdle holds from then on, 25 min at
    ``EVAL_STEP``, beyond its `for` (15 m, longer than the other incidents leave: hence the earlier start).
    """
    bad = (1, 1)

    def engine_kw(p, e):
        if (p, e) != bad:
            return {}
        return dict(
            requests=step_fn(BASE_REQUESTS, {IDLE_STEP: 0}),
            running=step_fn(BASE_RUNNING, {IDLE_STEP: 0}),
        )

    built = _build(
        "idle_rank",
        engine_kw=engine_kw,
        truth={
            "bad": [{"namespace": NS, "pod": POD_1, "model_name": MODEL, "engine": "1"}],
            "ttft_p95": _p(0.95, CHAT_MIX, "ttft_s", TTFT_BUCKETS),
        },
    )
    return replace(built, incident_step=IDLE_STEP)


INCIDENTS: dict[str, Callable[[], Scenario]] = {
    "kv_saturation": kv_saturation,
    "ttft_queueing": ttft_queueing,
    "ttft_long_prompts": ttft_long_prompts,
    "ep_rank_gpu_full": ep_rank_gpu_full,
    "dcgm_renamed": dcgm_renamed,
    "vllm_stats_missing": vllm_stats_missing,
    "vllm_kv_renamed": vllm_kv_renamed,
    "wedged_engine": wedged_engine,
    "gpu_pod_label_flap": gpu_pod_label_flap,
    "vllm_scrape_gone": vllm_scrape_gone,
    "mig_without_fb": mig_without_fb,
    "vanished_rank": vanished_rank,
    "vanished_gpu": vanished_gpu,
    "idle_rank": idle_rank,
    "healthy": healthy,
}


def incident(name: str) -> Scenario:
    """Build one named incident scenario (``INCIDENTS[name]()``)."""
    try:
        return INCIDENTS[name]()
    except KeyError:
        raise KeyError(f"unknown incident {name!r}; known: {sorted(INCIDENTS)}") from None


__all__ = [
    "INCIDENTS",
    "incident",
    "STEP",
    "STEPS",
    "INCIDENT_STEP",
    "EVAL_STEP",
    "PODS",
    "POD_0",
    "POD_1",
    "HOSTS",
    "MODEL",
    "NS",
    "gpu_uuid",
]
