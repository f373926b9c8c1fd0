"""vLLM v0.25.0 series for one engine (one data-parallel rank of one server pod).

Names, types, labels and buckets follow reference/vllm-metrics.md sections 1-3: every engine metric
carries ``model_name`` and ``engine`` (``vllm:cache_config_info`` only ``engine``), counters end in
``_total``, histograms use the exact v0.25.0 bounds. Scrape labels come from a ``Target``
(job, instance, namespace, pod, container).

Traffic is a per-step observation model: ``requests`` finished per step, split over weighted
``RequestProfile`` s (exactly, largest remainder). Each profile fixes one request's prompt and
output length, queue, prefill and inter-token times; every histogram and counter is derived from
the same requests, so they agree with each other:

    ttft = queue + prefill             decode = itl * (generation_tokens - 1)
    inference = prefill + decode       e2e = queue + inference
    request_time_per_output_token = itl (0 for a single-token output)
    ITL observations per request = generation_tokens - 1, each = itl

A process's counters start at zero on its first active step (``prior_steps`` pretends it already
ran that many steps, which keeps ``rate()`` free of start-up extrapolation effects); a pod restart
is two calls with different pod names and adjacent ``active`` ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence, Union

from .histogram import (
    ITER_BUCKETS,
    ITL_BUCKETS,
    REQ_BUCKETS,
    TTFT_BUCKETS,
    Observations,
    allocate,
    histogram_series,
    token_buckets,
)
from .scrape import Target, stable_ip
from .series import Series, Value, Values, in_active, resolve

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


@dataclass(frozen=True)
class RequestProfile:
    """One kind of request; ``weight`` is its share of the step's requests."""

    weight: float
    prompt_tokens: int
    generation_tokens: int
    queue_s: float
    prefill_s: float
    itl_s: float
    cached_tokens: int = 0
    finished_reason: str = "stop"

    def __post_init__(self):
        if self.finished_reason not in FINISHED_REASONS:
            raise ValueError(f"finished_reason must be one of {FINISHED_REASONS}")
        if not 0 <= self.cached_tokens <= self.prompt_tokens or self.generation_tokens < 1:
            raise ValueError("need 0 <= cached_tokens <= prompt_tokens and generation_tokens >= 1")

    # Rounded so that sums such as 0.1 + 0.15 land on the bucket bound they equal in decimal.
    @property
    def ttft_s(self) -> float:
        return round(self.queue_s + self.prefill_s, 9)

    @property
    def decode_s(self) -> float:
        return round(self.itl_s * (self.generation_tokens - 1), 9)

    @property
    def inference_s(self) -> float:
        return round(self.prefill_s + self.decode_s, 9)

    @property
    def e2e_s(self) -> float:
        return round(self.queue_s + self.inference_s, 9)

    @property
    def tpot_s(self) -> float:
        return self.itl_s if self.generation_tokens > 1 else 0.0


@dataclass(frozen=True)
class SpecDecode:
    """Speculative decoding: ``k`` draft tokens per draft, ``acceptance_rate`` of them accepted."""

    num_speculative_tokens: int = 3
    acceptance_rate: float = 0.6


Profiles = Union[Sequence[RequestProfile], Callable[[int], Sequence[RequestProfile]]]

# A chat-heavy, healthy mix; 20 requests per step split exactly 10/6/3/1. Per request:
#   TTFT 0.17 / 0.45 / 0.90 / 0.30 s     e2e 7.135 / 16.41 / 14.355 / 13.05 s     ITL 35-50 ms
# so every p95 lies well below the default alert thresholds (TTFT 0.917 s vs 2 s, ITL 0.04875 s vs
# 0.1 s, e2e 19.17 s vs 60 s), and each p95 rank (19 of 20) falls strictly inside a bucket that holds
# more than one observation. A rank exactly on a bound with empty buckets above it is a knife edge:
# float noise in rate() decides between the bound and the next non-empty bucket (one 75 s request in
# 20 once made the e2e p95 20 s or 60.0000000000002 s, and the latter fires a `> 60` alert).
CHAT_MIX = (
    RequestProfile(0.50, 800, 200, 0.05, 0.12, 0.035, cached_tokens=512),
    RequestProfile(0.30, 2400, 400, 0.10, 0.35, 0.040, cached_tokens=1024),
    RequestProfile(0.15, 7000, 300, 0.20, 0.70, 0.045, cached_tokens=2048),
    RequestProfile(0.05, 1200, 256, 0.10, 0.20, 0.050, finished_reason="length"),  # hits max_tokens=256
)

HISTOGRAMS = (  # family, bounds kind
    ("vllm:time_to_first_token_seconds", "ttft"),
    ("vllm:inter_token_latency_seconds", "itl"),
    ("vllm:request_time_per_output_token_seconds", "itl"),
    ("vllm:e2e_request_latency_seconds", "req"),
    ("vllm:request_queue_time_seconds", "req"),
    ("vllm:request_inference_time_seconds", "req"),
    ("vllm:request_prefill_time_seconds", "req"),
    ("vllm:request_decode_time_seconds", "req"),
    ("vllm:request_prompt_tokens", "tokens"),
    ("vllm:request_generation_tokens", "tokens"),
    ("vllm:iteration_tokens_total", "iter"),
)


def vllm_target(
    namespace: str, pod: str, *, job: str = "vllm", container: str = "vllm", port: int = 8000
) -> Target:
    """The scrape target of a vLLM server pod (PodMonitor/ServiceMonitor labels)."""
    return Target(job, f"{stable_ip(namespace, pod)}:{port}", namespace, pod, container)


def _profiles_at(spec: Profiles, i: int) -> tuple[RequestProfile, ...]:
    return tuple(spec(i) if callable(spec) else spec)


@dataclass(frozen=True)
class _Step:
    """Everything one step of traffic contributes."""

    obs: dict[str, Observations]
    inc: dict[str, float]
    running: float
    waiting: float
    kv_tokens: float


def _step(
    n: int, profiles: tuple[RequestProfile, ...], step: float, iterations: Value, spec: SpecDecode | None
) -> _Step:
    counts = allocate(n, [p.weight for p in profiles])
    pairs = [(p, c) for p, c in zip(profiles, counts, strict=True) if c]
    prompt = sum(p.prompt_tokens * c for p, c in pairs)
    gen = sum(p.generation_tokens * c for p, c in pairs)
    cached = sum(p.cached_tokens * c for p, c in pairs)
    running = sum(p.inference_s * c for p, c in pairs) / step  # Little's law: arrivals x time in system
    waiting = sum(p.queue_s * c for p, c in pairs) / step
    kv_tokens = sum((p.prompt_tokens + p.generation_tokens / 2) * p.inference_s * c for p, c in pairs) / step
    if iterations is None:
        iterations = math.ceil(gen / max(1.0, round(running))) if gen else 0
    iterations = int(iterations)
    computed = prompt - cached
    obs: dict[str, Observations] = {
        "vllm:time_to_first_token_seconds": [(p.ttft_s, c) for p, c in pairs],
        "vllm:inter_token_latency_seconds": [(p.itl_s, c * (p.generation_tokens - 1)) for p, c in pairs],
        "vllm:request_time_per_output_token_seconds": [(p.tpot_s, c) for p, c in pairs],
        "vllm:e2e_request_latency_seconds": [(p.e2e_s, c) for p, c in pairs],
        "vllm:request_queue_time_seconds": [(p.queue_s, c) for p, c in pairs],
        "vllm:request_inference_time_seconds": [(p.inference_s, c) for p, c in pairs],
        "vllm:request_prefill_time_seconds": [(p.prefill_s, c) for p, c in pairs],
        "vllm:request_decode_time_seconds": [(p.decode_s, c) for p, c in pairs],
        "vllm:request_prompt_tokens": [(float(p.prompt_tokens), c) for p, c in pairs],
        "vllm:request_generation_tokens": [(float(p.generation_tokens), c) for p, c in pairs],
        "vllm:iteration_tokens_total": [(round((computed + gen) / iterations, 6), iterations)]
        if iterations
        else [],
    }
    inc = {
        "vllm:prompt_tokens_total": prompt,
        "vllm:generation_tokens_total": gen,
        "vllm:prefix_cache_queries_total": prompt,
        "vllm:prefix_cache_hits_total": cached,
        "vllm:prompt_tokens_cached_total": cached,
        "source=local_compute": computed,
        "source=local_cache_hit": cached,
        "source=external_kv_transfer": 0.0,
    }
    for reason in FINISHED_REASONS:
        inc[f"finished_reason={reason}"] = sum(c for p, c in pairs if p.finished_reason == reason)
    if spec is not None:
        k, a = spec.num_speculative_tokens, spec.acceptance_rate
        drafts = round(gen / (1 + k * a))
        inc["vllm:spec_decode_num_drafts_total"] = drafts
        inc["vllm:spec_decode_num_draft_tokens_total"] = drafts * k
        inc["vllm:spec_decode_num_accepted_tokens_total"] = round(drafts * k * a)
    return _Step(obs, inc, running, waiting, kv_tokens)


def _accumulate(incs: Sequence[Value], prior: int) -> list[Value]:
    """Counter values from per-step increments.

    Each active run restarts at ``prior`` x its first increment.
    """
    out: list[Value] = []
    acc, was_active = 0.0, False
    for v in incs:
        if v is None:
            out.append(None)
            was_active = False
            continue
        acc = v * prior if not was_active else acc + v
        was_active = True
        out.append(round(acc, 6))
    return out


def vllm_engine(
    namespace: str,
    pod: str,
    model_name: str,
    engine: int | str,
    *,
    steps: int,
    step: float = 30.0,
    requests: Values = 20,
    profiles: Profiles = CHAT_MIX,
    running: Values | None = None,
    waiting: Values | None = None,
    waiting_deferred: Values = 0,
    kv_usage: Values | None = None,
    kv_cache_size_tokens: int = 434176,
    preemptions: Values = 0,
    iterations: Values | None = None,
    awake: Values = 1,
    max_model_len: int = 8192,
    spec_decode: SpecDecode | None = None,
    cache_config: Mapping[str, str] | None = None,
    active: tuple[int, int] | None = None,
    prior_steps: int = 0,
    target: Target | None = None,
    extra_labels: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
) -> list[Series]:
    """All series of one vLLM engine.

    ``requests``: requests finished per step (rounded to int). ``profiles``: the request mix, or a
    function of the step index returning it. ``running``/``waiting``/``kv_usage`` default to Little's
    law over the mix (in system = arrivals x time); pass values to pin them. ``preemptions`` is the
    number of preemptions per step. ``iterations`` is engine steps per step (default: output tokens /
    running requests). ``active=(first, end)`` limits the process's life to a step range; counters and
    histograms restart from zero at ``first`` (times ``prior_steps`` of history). ``drop`` removes
    metrics by sample or family name.
    """
    engine = str(engine)
    tgt = target or vllm_target(namespace, pod)
    me = {"model_name": model_name, "engine": engine, **tgt.labels(), **(extra_labels or {})}
    n_req = resolve(requests, steps)
    n_pre = resolve(preemptions, steps)
    n_iter = resolve(iterations, steps) if iterations is not None else (None,) * steps
    memo: dict[tuple, _Step] = {}
    per: list[_Step | None] = []
    for i in range(steps):
        if not in_active(i, active) or n_req[i] is None:
            per.append(None)
            continue
        key = (int(round(n_req[i])), _profiles_at(profiles, i), n_iter[i])
        if key not in memo:
            memo[key] = _step(key[0], key[1], step, key[2], spec_decode)
        per.append(memo[key])

    def active_vals(spec: Values | None, default) -> list[Value]:
        given = resolve(spec, steps) if spec is not None else None
        return [
            None if s is None else (given[i] if given is not None else default(s)) for i, s in enumerate(per)
        ]

    out: list[Series] = []
    gauges = {
        "vllm:num_requests_running": active_vals(running, lambda s: round(s.running)),
        "vllm:num_requests_waiting": active_vals(waiting, lambda s: round(s.waiting)),
        "vllm:kv_cache_usage_perc": active_vals(
            kv_usage, lambda s: min(1.0, round(s.kv_tokens / kv_cache_size_tokens, 4))
        ),
    }
    for name, vals in gauges.items():
        out.append(Series(name, me, vals))
    deferred = active_vals(waiting_deferred, lambda s: 0.0)
    capacity = [
        None if w is None else max(0.0, w - (d or 0.0))
        for w, d in zip(gauges["vllm:num_requests_waiting"], deferred, strict=True)
    ]
    out.append(Series("vllm:num_requests_waiting_by_reason", {**me, "reason": "capacity"}, capacity))
    out.append(Series("vllm:num_requests_waiting_by_reason", {**me, "reason": "deferred"}, deferred))
    aw = active_vals(awake, lambda s: 1.0)
    sleep = {
        "awake": aw,
        "weights_offloaded": [None if a is None else 1.0 - a for a in aw],
        "discard_all": [None if a is None else 0.0 for a in aw],
    }
    for state in SLEEP_STATES:
        out.append(Series("vllm:engine_sleep_state", {**me, "sleep_state": state}, sleep[state]))
    blocks = kv_cache_size_tokens // 16
    info = {
        "block_size": "16",
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "gpu_memory_utilization": "0.92",
        "num_gpu_blocks": str(blocks),
        "num_cpu_blocks": "None",
        "kv_cache_size_tokens": str(kv_cache_size_tokens),
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
        **(cache_config or {}),
    }
    no_model = {k: v for k, v in me.items() if k != "model_name"}  # cache_config_info has no model_name
    out.append(
        Series("vllm:cache_config_info", {**no_model, **info}, [None if s is None else 1.0 for s in per])
    )

    def counter(name: str, key: str, labels: Mapping[str, str]) -> Series:
        incs = [None if s is None else float(s.inc[key]) for s in per]
        return Series(name, labels, _accumulate(incs, prior_steps), "counter")

    for name in (
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_cached_total",
    ):
        out.append(counter(name, name, me))
    for src in PROMPT_SOURCES:
        out.append(counter("vllm:prompt_tokens_by_source_total", f"source={src}", {**me, "source": src}))
    for reason in FINISHED_REASONS:
        out.append(
            counter(
                "vllm:request_success_total", f"finished_reason={reason}", {**me, "finished_reason": reason}
            )
        )
    pre = [None if s is None else (n_pre[i] or 0.0) for i, s in enumerate(per)]
    out.append(Series("vllm:num_preemptions_total", me, _accumulate(pre, prior_steps), "counter"))
    if spec_decode is not None:
        for name in (
            "vllm:spec_decode_num_drafts_total",
            "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total",
        ):
            out.append(counter(name, name, me))

    bounds = {
        "ttft": TTFT_BUCKETS,
        "itl": ITL_BUCKETS,
        "req": REQ_BUCKETS,
        "iter": ITER_BUCKETS,
        "tokens": token_buckets(max_model_len),
    }
    gone = set(drop)
    for family, kind in HISTOGRAMS:
        if family in gone:
            continue
        obs = [None if s is None else s.obs[family] for s in per]
        out.extend(histogram_series(family, me, bounds[kind], obs, prior=prior_steps))
    return [s for s in out if s.name not in gone and s.family not in gone]


__all__ = [
    "vllm_engine",
    "vllm_target",
    "RequestProfile",
    "SpecDecode",
    "CHAT_MIX",
    "HISTOGRAMS",
    "FINISHED_REASONS",
    "PROMPT_SOURCES",
    "Profiles",
]
