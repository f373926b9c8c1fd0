"""A serving fleet of any size, for benchmarks: ``FleetShape.sized(4096)`` and ``write_fleet``.

``fleet()`` is a small hand-made scenario whose every number a test asserts; this one is built from a
few knobs instead, with no ground truth beyond its shape, and streams to a file so that thousands of
GPUs fit in memory. Layout (the defaults of ``FleetShape.sized(gpus)``)::

  hosts     gpus / 8 nodes ``gpu-node-0000``...; the last 1/8 run each GPU as two 3g.40gb MIG
            instances (a RAG embedder pod on every other host's instances, the others idle)
  serving   one engine per 8 GPUs: 8 models x N pods x 2 data-parallel engines of 4 GPUs (TP 4),
            one pod per host, the GPUs carrying the pod as exported_pod
  the rest  full-GPU hosts without a vLLM pod: every other one runs a batch job, the others idle

One hour at a 30 s scrape. Every engine has its own request rate (8-48 per step, drifting over the
hour, 1 in 16 engines idle) and each model its request mix and latency scale (``CHAT_MIX`` scaled),
so quantiles and heatmaps differ between engines and models. Each engine exports the whole default
v0.25.0 family set: what ``vllm_engine`` writes plus the token and parameter histograms and the
zero-valued counters it leaves out (reference/vllm-metrics.md section 2.7). GPUs of one kind
(role, load level, index, MIG instance) share one value profile: built once with ``dcgm_gpu``,
relabelled per GPU. Deterministic: the same shape gives the same bytes.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from .dcgm import H100_USABLE_MIB, MIG_3G_40GB_MIB, dcgm_gpu, dcgm_target
from .histogram import allocate, histogram_series, token_buckets
from .fleet import nixl_engine
from .omstream import WriteStats, write_openmetrics
from .scaled_identity import Identity, gateway, role_mix
from .scrape import stable_suffix, stable_uuid, up
from .series import Series
from .vllm import CHAT_MIX, RequestProfile, SpecDecode, vllm_engine, vllm_target

PRIOR = 2880  # one day of history before the window, so rate() has no start-up effects
MIG_PROFILE = "3g.40gb"
N_BUCKETS = (1, 2, 5, 10, 20)  # vllm:request_params_n (reference/vllm-metrics.md section 3)


@dataclass(frozen=True)
class Model:
    """A served model: its namespace, context length and how its traffic differs from ``CHAT_MIX``."""

    name: str
    namespace: str
    max_model_len: int
    latency: float  # scales queue, prefill and inter-token time
    length: float  # scales prompt, cached and generated tokens
    spec_decode: SpecDecode | None = None


MODELS = (
    Model("deepseek-ai/DeepSeek-V3", "llm-serving", 131072, 1.0, 1.0),
    Model("Qwen/Qwen3-235B-A22B", "llm-serving", 40960, 0.9, 0.8),
    Model("mistralai/Mixtral-8x7B-Instruct-v0.1", "llm-serving", 32768, 0.6, 0.7, SpecDecode(3, 0.6)),
    Model("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "research", 131072, 1.2, 1.3),
    Model("openai/gpt-oss-120b", "llm-serving", 131072, 0.7, 1.1, SpecDecode(2, 0.7)),
    Model("Qwen/Qwen3-30B-A3B", "llm-batch", 32768, 0.5, 0.6),
    Model("mistralai/Mixtral-8x22B-Instruct-v0.1", "llm-batch", 65536, 0.9, 0.9),
    Model("deepseek-ai/DeepSeek-V2-Lite-Chat", "research", 32768, 0.5, 0.5),
)


@dataclass(frozen=True)
class FleetShape:
    """How many of everything. ``sized`` derives a shape from a GPU count."""

    hosts: int
    mig_hosts: int
    models: int
    pods_per_model: int
    engines_per_pod: int = 2
    gpus_per_engine: int = 4
    gpus_per_host: int = 8
    steps: int = 120
    step: int = 30
    identity: Identity | None = None  # roles, tracks, a gateway (scaled_identity); None: as before

    def __post_init__(self):
        problems = []
        if self.identity is not None and self.identity.paired and self.pods_per_model % 2:
            problems.append(
                f"prefill/decode pairs need an even number of pods per model, not {self.pods_per_model}"
            )
        if min(self.hosts, self.models, self.pods_per_model, self.engines_per_pod, self.steps) < 1:
            problems.append("hosts, models, pods per model, engines per pod and steps must be >= 1")
        if self.engines_per_pod * self.gpus_per_engine > self.gpus_per_host:
            problems.append(
                f"a pod's {self.engines_per_pod} engines x {self.gpus_per_engine} GPUs do not fit on "
                f"a host of {self.gpus_per_host} GPUs"
            )
        if not 0 <= self.mig_hosts <= self.hosts:
            problems.append(f"mig_hosts {self.mig_hosts} must lie in 0..{self.hosts}")
        if self.pods > self.hosts - self.mig_hosts:
            problems.append(
                f"{self.pods} vLLM pods need one full-GPU host each; only "
                f"{self.hosts - self.mig_hosts} of {self.hosts} hosts are not in MIG mode"
            )
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def sized(
        cls,
        gpus: int,
        engines: int | None = None,
        *,
        models: int = 8,
        engines_per_pod: int = 2,
        gpus_per_engine: int = 4,
        gpus_per_host: int = 8,
        mig_share: float = 0.125,
        minutes: int = 60,
        step: int = 30,
        identity: Identity | None = None,
    ) -> "FleetShape":
        """``gpus`` physical GPUs and ``engines`` engines (default one per 8 GPUs)."""
        engines = gpus // 8 if engines is None else engines
        per_model = models * engines_per_pod
        if gpus % gpus_per_host or engines % per_model:
            raise ValueError(
                f"{gpus} GPUs must be a multiple of {gpus_per_host} GPUs per host and {engines} engines "
                f"a multiple of {models} models x {engines_per_pod} engines per pod"
            )
        hosts = gpus // gpus_per_host
        return cls(
            hosts=hosts,
            mig_hosts=round(hosts * mig_share),
            models=models,
            pods_per_model=engines // per_model,
            engines_per_pod=engines_per_pod,
            gpus_per_engine=gpus_per_engine,
            gpus_per_host=gpus_per_host,
            steps=minutes * 60 // step,
            step=step,
            identity=identity,
        )

    @property
    def gpus(self) -> int:
        return self.hosts * self.gpus_per_host

    @property
    def pods(self) -> int:
        return self.models * self.pods_per_model

    @property
    def engines(self) -> int:
        return self.pods * self.engines_per_pod

    def summary(self) -> dict:
        return {
            "gpus": self.gpus,
            "hosts": self.hosts,
            "mig_hosts": self.mig_hosts,
            "mig_instances": self.mig_hosts * self.gpus_per_host * 2,
            "models": self.models,
            "pods": self.pods,
            "engines": self.engines,
            "engines_per_pod": self.engines_per_pod,
            "gpus_per_engine": self.gpus_per_engine,
            "steps": self.steps,
            "step_s": self.step,
            **({"identity": self.identity.summary()} if self.identity else {}),
        }


def model(i: int) -> Model:
    """Model ``i``: the catalogue above, then numbered replicas of it (``...-r8``) beyond it."""
    base = MODELS[i % len(MODELS)]
    if i < len(MODELS):
        return base
    return Model(f"{base.name}-r{i}", base.namespace, base.max_model_len, base.latency, base.length)


def request_mix(m: Model) -> tuple[RequestProfile, ...]:
    """``CHAT_MIX`` scaled to the model, plus a 2% share of aborted requests."""
    mix = [
        RequestProfile(
            p.weight,
            max(1, round(p.prompt_tokens * m.length)),
            max(1, round(p.generation_tokens * m.length)),
            round(p.queue_s * m.latency, 6),
            round(p.prefill_s * m.latency, 6),
            round(p.itl_s * m.latency, 6),
            cached_tokens=round(p.cached_tokens * m.length),
            finished_reason=p.finished_reason,
        )
        for p in CHAT_MIX
    ]
    mix.append(
        RequestProfile(
            0.02, round(1500 * m.length), 40, 0.3 * m.latency, 0.25 * m.latency, 0.04, finished_reason="abort"
        )
    )
    return tuple(mix)


def _rng(*parts: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big"))


@dataclass(frozen=True)
class _Engine:
    requests: tuple[int, ...]
    level: int  # 0..3, drives the utilisation of its GPUs; -1 = idle


def _engine_traffic(pod: str, engine: int, steps: int) -> _Engine:
    rng = _rng("engine", pod, str(engine))
    if rng.random() < 1 / 16:
        return _Engine((0,) * steps, -1)
    base, phase = rng.randint(8, 48), rng.random() * 2 * math.pi
    requests = tuple(
        round(base * (1 + 0.3 * math.sin(2 * math.pi * i / steps + phase)) * (0.9 + 0.2 * rng.random()))
        for i in range(steps)
    )
    return _Engine(requests, min(3, (base - 8) // 10))


# ----------------------------------------------------------------------------------- DCGM

_T_HOST, _T_UUID, _T_POD, _T_NS = "tmpl-node", "GPU-tmpl", "tmpl-workload", "tmpl-namespace"
_T_TARGET = dcgm_target(_T_HOST)

# role -> (FB used MiB, utilisation) per load level; MIG values are per 3g.40gb instance
_PROFILES = {
    "serving": ((74240, 0.35), (74752, 0.55), (75034, 0.75), (75264, 0.92)),
    "serving-idle": ((74240, 0.01),),
    "batch": ((32768, 0.6), (48000, 0.7), (61440, 0.8), (78000, 0.95)),
    "idle": ((4, 0.0),),
    "mig-rag": ((20160, 0.3), (26208, 0.4), (32256, 0.5), (36288, 0.6)),
    "mig-idle": ((13, 0.0),),
}
_WORKLOAD = {"serving": "vllm", "serving-idle": "vllm", "batch": "trainer", "mig-rag": "embedder"}


@dataclass(frozen=True)
class _Slot:
    """One GPU or MIG instance: what kind it is and who holds it."""

    index: int
    role: str
    level: int = 0
    mig_id: int | None = None
    pod: str | None = None
    namespace: str | None = None


def _wobble(base: float, key: int) -> Callable[[int], float]:
    return lambda i: 0.0 if base == 0 else round(min(1.0, max(0.0, base + 0.04 * math.sin(i / 6 + key))), 4)


class _DcgmTemplates:
    """``dcgm_gpu`` series per slot kind, built once and relabelled for every GPU of that kind."""

    def __init__(self, steps: int, step: int):
        self.steps, self.step = steps, step
        self._cache: dict[tuple, list[Series]] = {}

    def _template(self, slot: _Slot) -> list[Series]:
        key = (slot.role, slot.level, slot.index, slot.mig_id)
        if key not in self._cache:
            used, util = _PROFILES[slot.role][slot.level]
            total = MIG_3G_40GB_MIB if slot.mig_id else H100_USABLE_MIB
            parent = 0.4 if slot.role == "mig-rag" else 0.0  # same on both instances: GPU-scoped fields
            mig = {"mig_instance": (slot.mig_id, MIG_PROFILE), "parent_util": parent} if slot.mig_id else {}
            container = _WORKLOAD.get(slot.role)
            self._cache[key] = dcgm_gpu(
                _T_HOST,
                slot.index,
                _T_UUID,
                used,
                total - used,
                steps=self.steps,
                step=self.step,
                util=_wobble(util, slot.index + slot.level),
                pod=_T_POD if container else None,
                namespace=_T_NS if container else None,
                container=container or "vllm",
                targets=[_T_TARGET],
                **mig,
            )
        return self._cache[key]

    def gpu(self, host: str, uuid: str, slot: _Slot) -> list[Series]:
        target = dcgm_target(host)
        swap = {_T_HOST: host, _T_UUID: uuid, _T_TARGET.instance: target.instance, _T_TARGET.pod: target.pod}
        if slot.pod:
            swap.update({_T_POD: slot.pod, _T_NS: slot.namespace})
        return [
            Series(s.name, tuple((k, swap.get(v, v)) for k, v in s.labels), s.values, s.kind, s.family)
            for s in self._template(slot)
        ]


# ----------------------------------------------------------------------------------- vLLM


def _per_step(requests, mix, value: Callable[[RequestProfile], float]) -> list[list[tuple[float, int]]]:
    weights = [p.weight for p in mix]
    return [[(value(p), c) for p, c in zip(mix, allocate(n, weights), strict=True) if c] for n in requests]


def _exposition_extras(labels: dict, traffic: _Engine, mix, m: Model, steps: int) -> list[Series]:
    """The default v0.25.0 families ``vllm_engine`` does not write."""
    tokens = token_buckets(m.max_model_len)
    max_tokens = min(4096, m.max_model_len)
    hist = {
        "vllm:request_prefill_kv_computed_tokens": (tokens, lambda p: p.prompt_tokens - p.cached_tokens),
        "vllm:request_max_num_generation_tokens": (tokens, lambda p: p.generation_tokens),
        "vllm:request_params_max_tokens": (
            tokens,
            lambda p: p.generation_tokens if p.finished_reason == "length" else max_tokens,
        ),
        "vllm:request_params_n": (N_BUCKETS, lambda p: 1),
    }
    out: list[Series] = []
    for name, (bounds, value) in hist.items():
        out += histogram_series(name, labels, bounds, _per_step(traffic.requests, mix, value), prior=PRIOR)
    for name in (
        "vllm:external_prefix_cache_queries_total",
        "vllm:external_prefix_cache_hits_total",
        "vllm:mm_cache_queries_total",
        "vllm:mm_cache_hits_total",
        "vllm:estimated_flops_per_gpu_total",
        "vllm:estimated_read_bytes_per_gpu_total",
        "vllm:estimated_write_bytes_per_gpu_total",
    ):
        out.append(Series(name, labels, (0.0,) * steps, "counter"))
    return out


# ----------------------------------------------------------------------------------- the fleet


def _short(m: Model) -> str:
    return m.name.split("/")[-1].lower().replace(".", "-")[:40].rstrip("-")


def _pod_name(m: Model, replica: int) -> str:
    short = _short(m)
    replicaset = stable_suffix("scaled", m.name, "rs", length=9)
    return f"{short}-{replicaset}-{stable_suffix('scaled', m.name, str(replica))}"


def series_batches(shape: FleetShape) -> Iterator[list[Series]]:
    """The fleet's series, one batch per host (exporter ``up`` + its GPUs) and per vLLM pod."""
    templates = _DcgmTemplates(shape.steps, shape.step)
    pods = [(model(k % shape.models), k // shape.models) for k in range(shape.pods)]
    traffic = {
        (k, e): _engine_traffic(_pod_name(m, r), e, shape.steps)
        for k, (m, r) in enumerate(pods)
        for e in range(shape.engines_per_pod)
    }
    first_mig = shape.hosts - shape.mig_hosts
    for h in range(shape.hosts):
        host = f"gpu-node-{h:04d}"
        batch = [up(dcgm_target(host), 1, steps=shape.steps)]
        for g in range(shape.gpus_per_host):
            uuid = stable_uuid("scaled", host, str(g))
            for slot in _slots(shape, h, g, first_mig, pods, traffic):
                batch += templates.gpu(host, uuid, slot)
        yield batch
    identity = shape.identity or Identity()
    for k, (m, replica) in enumerate(pods):
        pod = _pod_name(m, replica)
        role = identity.role(replica)
        target = replace(
            vllm_target(m.namespace, pod), extra=identity.pod_labels(replica, shape.pods_per_model)
        )
        mix = role_mix(request_mix(m), role)
        batch = [up(target, 1, steps=shape.steps)]
        for e in range(shape.engines_per_pod):
            t = traffic[(k, e)]
            if role is not None:  # vLLM's NIXL connector on both sides; decode pulls its requests' KV
                pulls = round(sum(t.requests) / shape.steps) if role == "decode" else 0
                batch += nixl_engine(target.labels(), m.name, e, shape.steps, pulls=pulls)
            batch += vllm_engine(
                m.namespace,
                pod,
                m.name,
                e,
                steps=shape.steps,
                step=shape.step,
                requests=t.requests,
                profiles=mix,
                max_model_len=m.max_model_len,
                spec_decode=m.spec_decode,
                waiting_deferred=1 if role == "decode" else 0,  # a request waiting for its KV cache
                prior_steps=PRIOR,
                target=target,
            )
            labels = {"model_name": m.name, "engine": str(e), **target.labels()}
            batch += _exposition_extras(labels, t, mix, m, shape.steps)
        yield batch
    if identity.client:
        yield from _gateways(shape, pods, traffic, identity)


def _gateways(shape: FleetShape, pods, traffic, identity: Identity) -> Iterator[list[Series]]:
    """Each model's endpoint picker, one batch per model: the user requests its engines finish
    (with roles, those of its decode engines: each request is counted once), first tokens and
    gaps at the latency of its mix."""
    for i in range(shape.models):
        m = model(i)
        serving = [
            k
            for k, (pm, replica) in enumerate(pods)
            if pm == m and identity.role(replica) in (None, "decode")
        ]
        requests = [
            sum(traffic[(k, e)].requests[s] for k in serving for e in range(shape.engines_per_pod))
            for s in range(shape.steps)
        ]
        mix = request_mix(m)
        first = sum(p.weight * p.ttft_s for p in mix) / sum(p.weight for p in mix)
        gap = sum(p.weight * p.itl_s for p in mix) / sum(p.weight for p in mix)
        tokens = round(sum(p.weight * p.generation_tokens for p in mix) / sum(p.weight for p in mix))
        pool = f"{_short(m)}-pool"
        yield gateway(
            m.name, m.namespace, pool, requests, first, gap, tokens, shape.pods_per_model, shape.steps, PRIOR
        )


def _slots(shape: FleetShape, h: int, g: int, first_mig: int, pods, traffic) -> list[_Slot]:
    """What GPU ``g`` of host ``h`` is: a vLLM engine's, a batch job's, idle, or two MIG instances."""
    if h >= first_mig:
        if (h - first_mig) % 2:
            return [_Slot(g, "mig-idle", 0, i) for i in (1, 2)]
        return [
            _Slot(
                g,
                "mig-rag",
                (h + g + i) % 4,
                i,
                f"text-embedder-{stable_suffix('scaled', 'embedder', str(h), str(g), str(i))}",
                "rag",
            )
            for i in (1, 2)
        ]
    if h < shape.pods:
        m, replica = pods[h]
        engine = g // shape.gpus_per_engine
        if engine >= shape.engines_per_pod:
            return [_Slot(g, "idle")]
        t = traffic[(h, engine)]
        role, level = ("serving-idle", 0) if t.level < 0 else ("serving", t.level)
        return [_Slot(g, role, level, None, _pod_name(m, replica), m.namespace)]
    if (h - shape.pods) % 2 == 0:
        job = f"trainer-{stable_suffix('scaled', 'batch', str(h))}"
        return [_Slot(g, "batch", (h + g) % 4, None, job, "batch")]
    return [_Slot(g, "idle")]


def write_fleet(shape: FleetShape, path: str | Path, start: float) -> WriteStats:
    """Stream the fleet to an OpenMetrics file for ``promtool tsdb create-blocks-from openmetrics``."""
    return write_openmetrics(series_batches(shape), path, start, shape.step, shape.steps)


__all__ = [
    "FleetShape",
    "Identity",
    "MODELS",
    "Model",
    "model",
    "request_mix",
    "series_batches",
    "write_fleet",
]
