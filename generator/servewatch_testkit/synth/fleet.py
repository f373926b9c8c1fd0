"""``fleet()``: a small but realistic MoE serving fleet for dashboard tests.

Layout (2 h at 30 s, 240 steps; ``cluster`` label optional)::

  gpu-node-a  exporter 4.5.3-4.8.2 (Hostname)   GPU0, GPU1 -> deepseek pod A (engine 0 hot, engine 1 idle)
              GPU1 is scraped twice (jobs nvidia-dcgm-exporter and dcgm-exporter)
  gpu-node-b  exporter 4.5.3-4.8.2 (Hostname)   GPU0, GPU1 -> deepseek pod B, restarted at step 120
  gpu-node-c  exporter 4.6.0-4.8.3 (hostname)   GPU0 -> mixtral pod; GPU1 empty;
              GPU2 in MIG: 3g.40gb GPU_I_ID 1 -> text-embedder pod (not vLLM), GPU_I_ID 2 idle

Every number a test may assert is in ``Scenario.truth`` (see ``fleet`` for its keys).
"""

from __future__ import annotations

from .dcgm import H100_USABLE_MIB, MIG_3G_40GB_MIB, dcgm_gpu, dcgm_target
from .histogram import NIXL_XFER_BUCKETS, TTFT_BUCKETS, allocate, quantile_of_observations
from .scenario import Scenario
from .scrape import stable_suffix, stable_uuid, up
from .series import Series, ramp, step_fn, with_labels
from .vllm import CHAT_MIX, RequestProfile, SpecDecode, vllm_engine, vllm_target

STEP = 30
STEPS = 240
NS = "llm-serving"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
POD_A = f"deepseek-v3-7d9f6c5b8-{stable_suffix('fleet', 'deepseek', 'a')}"
POD_B_OLD = f"deepseek-v3-7d9f6c5b8-{stable_suffix('fleet', 'deepseek', 'b')}"
POD_B_NEW = f"deepseek-v3-7d9f6c5b8-{stable_suffix('fleet', 'deepseek', 'b2')}"
POD_MIXTRAL = f"mixtral-8x7b-5c7d8f9b6-{stable_suffix('fleet', 'mixtral')}"
EMBED_NS, POD_EMBED = "rag", f"text-embedder-6b8c9d7f5-{stable_suffix('fleet', 'embedder')}"
RESTART_STEP = 120  # pod B replaced: old pod's last sample at 119
METRICS_BACK_STEP = 124  # the new pod's /metrics answers from here (up=0 for 2 minutes before)
HOT_KV_FROM = 60  # pod A engine 0 KV cache reaches 0.97 here and stays
PRIOR = 2880  # long-running processes: one day of history before step 0

MIXTRAL_MIX = (
    RequestProfile(0.50, 600, 250, 0.04, 0.08, 0.025, cached_tokens=256),
    RequestProfile(0.25, 3000, 500, 0.08, 0.30, 0.030, cached_tokens=1024),
    RequestProfile(0.25, 12000, 400, 0.15, 1.40, 0.035, cached_tokens=4096, finished_reason="length"),
)


def _uuid(host: str, gpu: int) -> str:
    return stable_uuid("fleet", host, str(gpu))


def _fb_b(i: int) -> float:
    """FB used on pod B's GPUs: old pod steady, new pod loads weights for 3 steps after the restart."""
    if i < RESTART_STEP:
        return 75034
    return {RESTART_STEP: 512, RESTART_STEP + 1: 40960, RESTART_STEP + 2: 70656}.get(i, 75034)


def fleet(cluster: str | None = None, steps: int = STEPS) -> Scenario:
    """The dashboard-test fleet. ``eval_step`` is the last step (``steps - 1``).

    Ground truth (``truth`` keys):

    * ``gpus[key]`` for key in ``a0 a1 b0 b1 c0 c1 c2_mig1 c2_mig2``: host, gpu, UUID, GPU_I_ID
      (None on full GPUs), jobs scraping it, the workload pod/namespace at the last step, the exact
      ``fb_used_mib``/``fb_free_mib`` at the last step and ``fb_ratio = used / (used + free)``:
      a0 75034/5952 (0.926506), a1 74240/6746 (0.916701, scraped by two jobs: dedupe with
      ``max by (UUID, GPU_I_ID)``), b0/b1 75034/5952 (from step 123; 512, 40960, 70656 MiB used at
      steps 120-122 while the new pod loads), c0 71680/9306 (0.885091), c1 empty 4/80982,
      c2 MIG 3g.40gb: GPU_I_ID 1 35862/4458 (0.889435, text-embedder pod, namespace rag),
      GPU_I_ID 2 idle 13/40307. FB_RESERVED is 573 MiB on full GPUs, absent on MIG instances;
      GPU_UTIL is absent on MIG instances. gpu-node-c's exporter uses ``hostname``, a/b ``Hostname``.
      Workload labels are ``exported_pod``/``exported_namespace``/``exported_container``.
    * ``engines[key]`` for ``a0 a1 b0 b1 b0_old b1_old m0``: namespace, pod, model_name, engine,
      requests per 30 s step. a0: 40 req/step, KV 0.62 ramping to 0.97 at step 60 and flat after,
      waiting 4, 1 preemption per step from step 60; a1: idle (0 requests, KV 0, no histogram
      increase -> no quantile); b*: 20 req/step; m0: 12 req/step with spec decode (k=3, 0.6).
    * ``restart``: pod B's old and new names, the restart step (120; old pod's last sample 119),
      ``metrics_from`` (124; ``up`` of the new target is 0 at 120-123). New pod counters restart at 0.
      Backfilled data has no staleness markers, so for the 5 m lookback after step 119 (steps 120-128)
      instant queries still return the old pod's series (vLLM and DCGM, whose workload labels changed)
      next to the new ones; ``truth.instant`` models exactly that.
    * ``ttft_p95_a0`` = 0.916667 s and ``ttft_p50_a0`` = 0.25 s: TTFT quantiles of engine a0 over any
      window after its first step (all 40 requests/step: 20 x 0.17 s, 12 x 0.45 s, 2 x 0.30 s,
      6 x 0.90 s -> 34 at or below 0.5, p95 rank 38 falls in (0.75, 1.0] holding 6: 0.75 + 0.25 * 4/6;
      p50 rank 20 is the 20 requests in (0.1, 0.25]).
    """
    s: list[Series] = []
    last = steps - 1
    extra = {"cluster": cluster} if cluster else {}

    # ---- DCGM: exporters and GPUs
    hosts = {"gpu-node-a": "Hostname", "gpu-node-b": "Hostname", "gpu-node-c": "hostname"}
    tgt = {h: dcgm_target(h) for h in hosts}
    tgt_second = dcgm_target("gpu-node-a", job="dcgm-exporter")
    for h in hosts:
        s.append(up(tgt[h], 1, steps=steps))
    s.append(up(tgt_second, 1, steps=steps))

    def gpu(host, idx, used, free, **kw):
        return dcgm_gpu(
            host,
            idx,
            _uuid(host, idx),
            used,
            free,
            steps=steps,
            step=STEP,
            hostname_label=hosts[host],
            targets=kw.pop("targets", [tgt[host]]),
            **kw,
        )

    s += gpu("gpu-node-a", 0, 75034, 5952, util=0.93, pod=POD_A, namespace=NS)
    s += gpu(
        "gpu-node-a",
        1,
        74240,
        6746,
        util=0.02,
        pod=POD_A,
        namespace=NS,
        targets=[tgt["gpu-node-a"], tgt_second],
    )
    pod_b = lambda i: POD_B_OLD if i < RESTART_STEP else POD_B_NEW  # noqa: E731
    util_b = lambda i: 0.0 if RESTART_STEP <= i < METRICS_BACK_STEP else 0.71  # noqa: E731
    for idx in (0, 1):
        s += gpu(
            "gpu-node-b",
            idx,
            _fb_b,
            lambda i: H100_USABLE_MIB - _fb_b(i),
            util=util_b,
            pod=pod_b,
            namespace=NS,
        )
    s += gpu("gpu-node-c", 0, 71680, 9306, util=0.55, pod=POD_MIXTRAL, namespace=NS)
    s += gpu("gpu-node-c", 1, 4, 80982, util=0.0)
    s += gpu(
        "gpu-node-c",
        2,
        35862,
        MIG_3G_40GB_MIB - 35862,
        util=0.4,
        parent_util=0.2,
        mig_instance=(1, "3g.40gb"),
        pod=POD_EMBED,
        namespace=EMBED_NS,
        container="embedder",
    )
    s += gpu(
        "gpu-node-c", 2, 13, MIG_3G_40GB_MIB - 13, util=0.0, parent_util=0.2, mig_instance=(2, "3g.40gb")
    )

    # ---- vLLM: targets and engines
    ta, tb_old, tb_new, tm = (vllm_target(NS, p) for p in (POD_A, POD_B_OLD, POD_B_NEW, POD_MIXTRAL))
    s.append(up(ta, 1, steps=steps))
    s.append(up(tm, 1, steps=steps))
    s.append(up(tb_old, lambda i: 1 if i < RESTART_STEP else None, steps=steps))
    s.append(
        up(tb_new, lambda i: None if i < RESTART_STEP else (0 if i < METRICS_BACK_STEP else 1), steps=steps)
    )

    ds = dict(steps=steps, step=STEP, max_model_len=131072)
    s += vllm_engine(
        NS,
        POD_A,
        DEEPSEEK,
        0,
        requests=40,
        kv_usage=ramp(0.62, 0.97, 0, HOT_KV_FROM),
        waiting=4,
        preemptions=step_fn(0, {HOT_KV_FROM: 1}),
        prior_steps=PRIOR,
        **ds,
    )
    s += vllm_engine(NS, POD_A, DEEPSEEK, 1, requests=0, kv_usage=0.0, prior_steps=PRIOR, **ds)
    for e in (0, 1):
        s += vllm_engine(
            NS,
            POD_B_OLD,
            DEEPSEEK,
            e,
            requests=20,
            kv_usage=0.48,
            active=(0, RESTART_STEP),
            prior_steps=PRIOR,
            **ds,
        )
        s += vllm_engine(
            NS, POD_B_NEW, DEEPSEEK, e, requests=20, kv_usage=0.48, active=(METRICS_BACK_STEP, steps), **ds
        )
    s += vllm_engine(
        NS,
        POD_MIXTRAL,
        MIXTRAL,
        0,
        steps=steps,
        step=STEP,
        requests=12,
        profiles=MIXTRAL_MIX,
        kv_usage=0.55,
        max_model_len=32768,
        spec_decode=SpecDecode(3, 0.6),
        prior_steps=PRIOR,
    )
    if extra:
        s = with_labels(s, **extra)

    def g(host, idx, mig, used, free, pod, ns, jobs):
        return {
            "host": host,
            "gpu": str(idx),
            "UUID": _uuid(host, idx),
            "GPU_I_ID": mig,
            "fb_used_mib": used,
            "fb_free_mib": free,
            "fb_ratio": used / (used + free),
            "pod": pod,
            "namespace": ns,
            "jobs": jobs,
        }

    dj = ("nvidia-dcgm-exporter",)
    a0_obs = [
        (p.ttft_s, c) for p, c in zip(CHAT_MIX, allocate(40, [p.weight for p in CHAT_MIX]), strict=True)
    ]
    truth = {
        "cluster": cluster,
        "hosts": dict(hosts),
        "gpus": {
            "a0": g("gpu-node-a", 0, None, 75034, 5952, POD_A, NS, dj),
            "a1": g("gpu-node-a", 1, None, 74240, 6746, POD_A, NS, dj + ("dcgm-exporter",)),
            "b0": g("gpu-node-b", 0, None, _fb_b(last), H100_USABLE_MIB - _fb_b(last), POD_B_NEW, NS, dj),
            "b1": g("gpu-node-b", 1, None, _fb_b(last), H100_USABLE_MIB - _fb_b(last), POD_B_NEW, NS, dj),
            "c0": g("gpu-node-c", 0, None, 71680, 9306, POD_MIXTRAL, NS, dj),
            "c1": g("gpu-node-c", 1, None, 4, 80982, None, None, dj),
            "c2_mig1": g("gpu-node-c", 2, "1", 35862, 4458, POD_EMBED, EMBED_NS, dj),
            "c2_mig2": g("gpu-node-c", 2, "2", 13, 40307, None, None, dj),
        },
        "engines": {
            "a0": {
                "namespace": NS,
                "pod": POD_A,
                "model_name": DEEPSEEK,
                "engine": "0",
                "requests_per_step": 40,
            },
            "a1": {
                "namespace": NS,
                "pod": POD_A,
                "model_name": DEEPSEEK,
                "engine": "1",
                "requests_per_step": 0,
            },
            "b0_old": {
                "namespace": NS,
                "pod": POD_B_OLD,
                "model_name": DEEPSEEK,
                "engine": "0",
                "requests_per_step": 20,
            },
            "b1_old": {
                "namespace": NS,
                "pod": POD_B_OLD,
                "model_name": DEEPSEEK,
                "engine": "1",
                "requests_per_step": 20,
            },
            "b0": {
                "namespace": NS,
                "pod": POD_B_NEW,
                "model_name": DEEPSEEK,
                "engine": "0",
                "requests_per_step": 20,
            },
            "b1": {
                "namespace": NS,
                "pod": POD_B_NEW,
                "model_name": DEEPSEEK,
                "engine": "1",
                "requests_per_step": 20,
            },
            "m0": {
                "namespace": NS,
                "pod": POD_MIXTRAL,
                "model_name": MIXTRAL,
                "engine": "0",
                "requests_per_step": 12,
            },
        },
        "restart": {
            "old_pod": POD_B_OLD,
            "new_pod": POD_B_NEW,
            "step": RESTART_STEP,
            "metrics_from": METRICS_BACK_STEP,
        },
        "kv_hot": {
            "engine": "a0",
            "kv_cache_usage_perc": 0.97,
            "from_step": HOT_KV_FROM,
            "sibling": "a1",
            "sibling_kv_cache_usage_perc": 0.0,
            "preemptions_per_step": 1,
        },
        "ttft_p95_a0": quantile_of_observations(0.95, a0_obs, TTFT_BUCKETS),
        "ttft_p50_a0": quantile_of_observations(0.50, a0_obs, TTFT_BUCKETS),
        "models": {
            DEEPSEEK: {"pods": (POD_A, POD_B_NEW), "engines_per_pod": 2, "max_model_len": 131072},
            MIXTRAL: {"pods": (POD_MIXTRAL,), "engines_per_pod": 1, "max_model_len": 32768},
        },
    }
    s += nixl_engine(ta.labels(), DEEPSEEK, 0, steps)
    return Scenario("fleet", tuple(s), steps, STEP, last, truth)


# the NIXL connector's failure counters, vllm:nixl_num_<name>_total: decode counts failed transfers and
# notifications (it pulls and notifies), prefill counts the requests whose KV blocks expired unpulled
NIXL_FAILURES = ("failed_transfers", "failed_notifications", "kv_expired_reqs")


def nixl_engine(
    target: dict,
    model: str,
    engine: int,
    steps: int,
    pulls: int = 20,
    failing_from: int | None = None,
    failing: tuple[str, ...] = NIXL_FAILURES,
) -> list[Series]:
    """The NIXL connector series of an engine: `pulls` KV transfers per step (a decode engine's; a
    prefill engine pulls none and exports the histogram empty), each in the (0.025, 0.05] s bucket,
    and no failed transfer, notification or expired request. From step `failing_from` on (a degraded
    transfer path) each step adds 3 of each counter in `failing` (0.1/s) and every pull takes the
    (0.3, 0.5] s bucket. Every counter of NIXL_FAILURES is exported, as vLLM does on both sides."""
    me = {**target, "model_name": model, "engine": str(engine)}
    broken = steps if failing_from is None else failing_from
    fast = [float(pulls * (PRIOR + min(i, broken))) for i in range(steps)]
    slow = [float(pulls * max(0, i - broken)) for i in range(steps)]
    failed = [3.0 * max(0, i - broken) for i in range(steps)]
    none = [0.0] * steps
    out = [
        Series(f"vllm:nixl_num_{name}_total", me, failed if name in failing else none, kind="counter")
        for name in NIXL_FAILURES
    ]
    total = [f + s for f, s in zip(fast, slow, strict=True)]
    for bound in (*NIXL_XFER_BUCKETS, "+Inf"):
        le = bound if bound == "+Inf" else f"{bound:g}"
        if bound == "+Inf" or bound >= 0.5:
            values = total
        else:
            values = fast if bound >= 0.05 else [0.0] * steps
        out.append(Series("vllm:nixl_xfer_time_seconds_bucket", {**me, "le": le}, values, kind="histogram"))
    out.append(Series("vllm:nixl_xfer_time_seconds_count", me, total, kind="histogram"))
    sums = [0.04 * f + 0.4 * s for f, s in zip(fast, slow, strict=True)]
    out.append(Series("vllm:nixl_xfer_time_seconds_sum", me, sums, kind="histogram"))
    return out


__all__ = ["fleet", "nixl_engine", "NIXL_FAILURES", "STEP", "STEPS", "DEEPSEEK", "MIXTRAL", "NS"]
