"""A synthetic load test whose latency breaks at a known load: the bench result files a sweep of
`vllm bench serve --save-result` writes and the Prometheus history of the same run, from one model.

The deployment (one pod, two engines = DP ranks on a GPU each, the load split evenly) serves two
kinds of request: 80% short prompts and 20% long ones. Past KNEE req/s the queue grows: time to
first token jumps, the KV cache fills, requests wait and are preempted, and at the last rate some
end in an engine error.
At the step at KNEE a KV cache burst of BURST_S seconds above the broken step's usage tests `for`.

With prefill and decode apart (`role_label`) a prefill pod also finishes every request's prefill leg;
with `kv_transfer_s` the pod's engines are decode engines whose first token is only that wait for the
KV cache (the queue and the prefill are the prefill pod's), and with `gateway` llm-d's endpoint picker
sees each request as its client does (first token after queue, prefill and transfer). The gateway
also counts its requests and failures: from KNEE on it fails some requests itself, which no engine
sees (`error_code="503"`), and it passes each engine error on (`"500"`). `legs(rate)` gives each
side's requests, `quantile(...)` the histogram quantile a step of one side shows and
`gateway_counts(rate)` what the gateway counts.

    lt = LoadTest()
    files = lt.write_bench(tmp_path)            # one JSON per rate (detailed=True: per-request lists)
    with LocalPrometheus(lt.openmetrics(start)) as prom:
        a, z = lt.run_range(start)              # --range a..z --step-every lt.step_every

Everything is derived from `at(rate)`, so tests read the truth from here rather than copying it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from servewatch import catalog
from servewatch.calibrate.measures import HISTOGRAMS, percentile

from .synth import RequestProfile, dcgm_gpu, stable_uuid, to_openmetrics, vllm_engine
from .synth.series import Series
from .synth.histogram import allocate, histogram_series, quantile_of_observations

RATES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)  # req/s, one step each
KNEE = 4.0  # the highest rate that meets TARGETS
TARGETS = ("ttft_p95=1.5s", "itl_p95=80ms", "errors=1%")
MODEL = "acme/chat-8b"
SCRAPE_S = 30.0
STEP_SCRAPES = 30  # 15 minutes per load step in the history
LEAD = 12  # scrapes at the first rate before the range starts (clean rate windows)
BENCH_S = 120.0  # each bench file: a two-minute run
OUTPUT_TOKENS = 64
WEIGHTS = (0.8, 0.2)  # short, long prompts
# at KNEE the fuller engine's KV cache bursts to BURST_KV (above the broken step's usage) for BURST_S
BURST_KV, BURST_FROM, BURST_S = 0.85, 12, 420.0
# vLLM takes gpu_memory_utilization of each GPU's framebuffer at start, whatever the load: the FB
# ratio does not tell the steps apart
FB_MIB, FB_USED = 81559.0, 0.92
GATEWAY = "llm-d-epp"  # the client source `gateway` adds (catalog/gateway.yaml)
GATEWAY_OWN, ENGINE_ERROR = "503", "500"  # the gateway's error codes: its own failures, an engine's
FRONTEND_MODEL_LABEL = "model"  # Dynamo's frontend's model label, which the catalog leaves to config
CLIENTS_CANCEL = 0.25  # the requests the clients cancel at a frontend that tells them apart, per request


@dataclass(frozen=True)
class State:
    """The deployment at one request rate."""

    rate: float
    queue_s: float
    prefill_s: float  # of a short prompt; a long one takes 2.5 x
    itl_s: float
    error_share: float
    kv_usage: float  # of the fuller engine; the other holds 95% of it
    waiting: float
    preemptions_per_s: float
    gateway_fails_per_s: float  # requests the gateway fails before any engine sees them

    def profiles(self, output_tokens: int = OUTPUT_TOKENS) -> tuple[RequestProfile, ...]:
        short, long_ = WEIGHTS
        ok = 1 - self.error_share
        out = [
            RequestProfile(short * ok, 1000, output_tokens, self.queue_s, self.prefill_s, self.itl_s),
            RequestProfile(
                long_ * ok, 4000, output_tokens, self.queue_s, 2.5 * self.prefill_s, self.itl_s * 1.1
            ),
        ]
        if self.error_share:
            out.append(
                RequestProfile(
                    self.error_share,
                    1000,
                    1,
                    self.queue_s,
                    self.prefill_s,
                    self.itl_s,
                    finished_reason="error",
                )
            )
        return tuple(out)


def at(rate: float) -> State:
    over = max(0.0, rate - KNEE)
    return State(
        rate=rate,
        queue_s=round(0.02 + 1.6 * over, 6),
        prefill_s=round(0.2 + 0.02 * rate, 6),
        itl_s=round(0.025 + 0.004 * rate, 6),
        error_share=0.03 if over >= 2 else 0.0,
        kv_usage=min(0.99, round(0.15 * rate + 0.03 * over, 4)),
        waiting=0.0 if not over else 20.0 * over,
        preemptions_per_s=0.5 * over,
        # one request per scrape interval at the knee (under the error target, over the default
        # availability SLO's budget), one more per req/s above it
        gateway_fails_per_s=0.0 if rate < KNEE else (over + 1) / SCRAPE_S,
    )


@dataclass(frozen=True)
class LoadTest:
    rates: tuple[float, ...] = RATES
    bench_s: float = BENCH_S
    model: str = MODEL
    pod: str = "chat-0"
    # prefill and decode apart (llm-d): the pod's two engines decode, and a prefill pod finishes
    # every request's prefill leg too (one token, `length`); the role in this label on both
    role_label: str | None = None
    # with role_label: the decode engines' first token is this wait for the KV transfer (None: the
    # decode engines see whole requests, queue and prefill included)
    kv_transfer_s: float | None = None
    output_tokens: int = OUTPUT_TOKENS  # per successful request (short outputs: prefill dominates)
    gateway: bool = False  # llm-d's endpoint picker in front: the client's view of each request
    gateway_source: str = GATEWAY  # which client source of catalog/gateway.yaml the gateway is

    # -- the Prometheus history ------------------------------------------------------------------
    @property
    def step_every(self) -> str:
        return f"{int(STEP_SCRAPES * SCRAPE_S)}s"

    @property
    def samples(self) -> int:
        return LEAD + STEP_SCRAPES * len(self.rates) + 1

    def _state_at_sample(self, i: int) -> State:
        k = min(max(0, (i - LEAD) // STEP_SCRAPES), len(self.rates) - 1)
        return at(self.rates[k])

    def run_range(self, start: float) -> tuple[float, float]:
        """The range of the load steps: step k's increments land on its own samples only."""
        first = start + (LEAD - 1) * SCRAPE_S
        return first, first + STEP_SCRAPES * len(self.rates) * SCRAPE_S

    def series(self) -> list:
        n = self.samples
        states = [self._state_at_sample(i) for i in range(n)]
        burst = self._burst_samples()
        out = self._prefill(states) if self.role_label else []
        out += self._gateway(states) if self.gateway else []
        for engine, share in ((0, 1.0), (1, 0.95)):
            out += vllm_engine(
                "serving",
                self.pod,
                self.model,
                engine,
                steps=n,
                step=SCRAPE_S,
                extra_labels={self.role_label: "decode"} if self.role_label else None,
                requests=[s.rate * SCRAPE_S / 2 for s in states],
                profiles=lambda i: self.legs(states[i].rate)["decode"],
                kv_usage=[
                    BURST_KV * share if i in burst else round(s.kv_usage * share, 4)
                    for i, s in enumerate(states)
                ],
                waiting=[s.waiting for s in states],
                preemptions=[s.preemptions_per_s * SCRAPE_S / 2 for s in states],
                prior_steps=10,
            )
            used = round(FB_MIB * FB_USED)
            out += dcgm_gpu(
                "gpu-node-1",
                engine,
                stable_uuid("loadtest", self.pod, str(engine)),
                used,
                FB_MIB - used,
                steps=n,
                step=SCRAPE_S,
                util=0.8,
                pod=self.pod,
                namespace="serving",
            )
        return out

    def _prefill(self, states: list[State]) -> list:
        """The prefill pod: every request's prefill leg, at the whole rate, with max_tokens=1."""
        return vllm_engine(
            "serving",
            f"{self.pod}-prefill",
            self.model,
            0,
            steps=len(states),
            step=SCRAPE_S,
            requests=[s.rate * SCRAPE_S for s in states],
            profiles=lambda i: self.legs(states[i].rate)["prefill"],
            kv_usage=0.1,
            waiting=[s.waiting for s in states],
            prior_steps=10,
            extra_labels={self.role_label: "prefill"},
        )

    def legs(self, rate: float) -> dict[str, tuple[RequestProfile, ...]]:
        """Each side's requests at `rate`: the pod's engines ("decode": whole requests, or with
        kv_transfer_s the decode legs), the prefill pod's legs (one token, `length`) and the client's."""
        mix = at(rate).profiles(self.output_tokens)
        wait = self.kv_transfer_s or 0.0
        decode = (
            mix if self.kv_transfer_s is None else tuple(replace(p, queue_s=0.0, prefill_s=wait) for p in mix)
        )
        return {
            "decode": decode,
            "prefill": tuple(replace(p, generation_tokens=1, finished_reason="length") for p in mix),
            "client": tuple(replace(p, prefill_s=round(p.prefill_s + wait, 6)) for p in mix),
        }

    def _requests(self, side: str) -> float:
        """Requests per scrape interval at one rate unit on one of `side`'s histograms: the pod's
        engines split the load, the prefill pod and the gateway see all of it."""
        return SCRAPE_S / 2 if side == "decode" else SCRAPE_S

    def _observations(self, rate: float, side: str, metric: str) -> list[tuple[float, int]]:
        """One scrape interval's observations of `side`'s histogram of `metric` (ttft, itl, e2el)."""
        mix = self.legs(rate)[side]
        counts = allocate(int(round(rate * self._requests(side))), [p.weight for p in mix])
        value = {"ttft": "ttft_s", "itl": "itl_s", "e2el": "e2e_s"}[metric]
        return [
            (getattr(p, value), c * (p.generation_tokens - 1 if metric == "itl" else 1))
            for p, c in zip(mix, counts, strict=True)
            if c
        ]

    def quantile(self, rate: float, side: str, metric: str, q: float) -> float:
        """The histogram quantile a load step at `rate` shows of `side`'s `metric`: every scrape of a
        step observes the same, so one scrape's observations give it."""
        cat = catalog.load()
        if side == "client":  # the source's own bounds where the catalog lists them (llm-d's ITL)
            name = cat.clients[self.gateway_source].metric(metric)
            bounds = cat.test_buckets(name) if name else cat.gateway_test_buckets
        else:
            bounds = cat.lookup(HISTOGRAMS[metric]).buckets
        return quantile_of_observations(q, self._observations(rate, side, metric), bounds)

    def gateway_counts(self, rate: float) -> tuple[float, dict[str, float]]:
        """One scrape interval at `rate` as the gateway counts it: its requests, and its failed ones
        by error code (its own, which no engine sees, and the engines' errors it passes on)."""
        s = at(rate)
        own = round(s.gateway_fails_per_s * SCRAPE_S)
        mix = self.legs(rate)["decode"]
        per_engine = allocate(int(round(rate * self._requests("decode"))), [p.weight for p in mix])
        engine = 2 * sum(c for p, c in zip(mix, per_engine, strict=True) if p.finished_reason == "error")
        return rate * SCRAPE_S + own, {GATEWAY_OWN: own, ENGINE_ERROR: engine}

    def _gateway(self, states: list[State]) -> list:
        """The gateway's TTFT and ITL histograms and its request and error counters of the model: one
        pod, one flow, each series with the labels the catalog lists of it. An error series exists
        from the scrape before its first failure (a gateway exports none before: below the knee it
        has none). Where one counter tells the outcome by a label (Dynamo's frontend), the successes
        are their own series, and requests the client cancelled (an excluded cause) are there too,
        which no error share counts."""
        cat = catalog.load()
        source = cat.clients[self.gateway_source]
        o = source.outcome
        model_label = source.model_label or FRONTEND_MODEL_LABEL
        base = {"namespace": "serving", "pod": "epp-0", model_label: self.model}
        # one flow, in each label the catalog lists of a series (llm-d's, Dynamo's)
        flow = {"target_model_name": self.model, "fairness_id": "default", "priority": "0"}
        flow |= {"streaming": "true", "endpoint": "chat_completions", "request_type": "stream"}

        def labelled(name: str, *extra: dict) -> dict:
            known = cat.lookup(name).labels
            out = base | {k: v for k, v in flow.items() if k in known}
            return out | {k: v for e in extra for k, v in e.items()}

        out = []
        for metric in ("ttft", "itl"):
            per_step = [self._observations(s.rate, "client", metric) for s in states]
            name = source.metric(metric)
            out += histogram_series(name, labelled(name), cat.test_buckets(name), per_step, prior=10)
        counts = [self.gateway_counts(s.rate) for s in states]
        every = [n - (sum(f.values()) if o.failed else 0) for n, f in counts]
        # the history before the window, as the histograms' prior
        out.append(Series(o.requests, labelled(o.requests, dict(o.succeeded)), _total(every, 10), "counter"))
        # each error code as the source names a cause: llm-d's as they are, Dynamo's its test causes
        codes = (GATEWAY_OWN, ENGINE_ERROR)
        causes = dict(zip(codes, o.test_causes if o.failed else codes, strict=False))
        for code, cause in causes.items():
            incs = [c[1][code] for c in counts]
            first = next((i for i, v in enumerate(incs) if v), None)
            if first is None:
                continue
            values: list[float | None] = [None] * max(0, first - 1)
            values += _total(incs[max(0, first - 1) :], 1)
            failure = labelled(o.errors, dict(o.failed), {o.cause: cause})
            out.append(Series(o.errors, failure, values, "counter"))
        for cause in o.excluded[:1]:  # the client's own: cancelled at a share of every request
            own = [n * CLIENTS_CANCEL for n, _ in counts]
            cancelled = labelled(o.errors, dict(o.failed), {o.cause: cause})
            out.append(Series(o.errors, cancelled, _total(own, 10), "counter"))
        return out

    def _burst_samples(self) -> set[int]:
        k = self.rates.index(KNEE)
        first = LEAD + k * STEP_SCRAPES + BURST_FROM
        return set(range(first, first + int(BURST_S / SCRAPE_S)))

    def openmetrics(self, start: float) -> str:
        return to_openmetrics(self.series(), start, SCRAPE_S)

    # -- the bench result files ------------------------------------------------------------------
    def bench_result(self, rate: float, detailed: bool = True, date: datetime | None = None) -> dict:
        s = at(rate)
        n = int(rate * self.bench_s)
        reqs = []
        for p, c in zip(s.profiles(), allocate(n, [p.weight for p in s.profiles()]), strict=True):
            reqs += [p] * c
        ok = [p for p in reqs if p.finished_reason != "error"]
        lists = {
            "ttft": [p.ttft_s for p in ok],
            "itl": [p.itl_s for p in ok for _ in range(p.generation_tokens - 1)],
            "tpot": [p.tpot_s for p in ok if p.generation_tokens > 1],
            "e2el": [p.e2e_s for p in ok],
        }
        out_tokens = sum(p.generation_tokens for p in ok)
        in_tokens = sum(p.prompt_tokens for p in ok)
        when = date or datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc) + timedelta(minutes=10 * rate)
        result = {
            "date": when.strftime("%Y%m%d-%H%M%S"),
            "endpoint_type": "openai",
            "backend": "openai",
            "label": None,
            "model_id": self.model,
            "tokenizer_id": self.model,
            "num_prompts": n,
            "request_rate": rate,
            "burstiness": 1.0,
            "max_concurrency": None,
            "duration": self.bench_s,
            "completed": len(ok),
            "failed": n - len(ok),
            "total_input_tokens": in_tokens,
            "total_output_tokens": out_tokens,
            "request_throughput": len(ok) / self.bench_s,
            "request_goodput": None,
            "output_throughput": out_tokens / self.bench_s,
            "total_token_throughput": (in_tokens + out_tokens) / self.bench_s,
            "max_output_tokens_per_s": out_tokens / self.bench_s * 1.5,
            "max_concurrent_requests": max(1, round(rate * (s.queue_s + 3))),
        }
        for metric in HISTOGRAMS:
            xs = lists[metric]
            mean = sum(xs) / len(xs)
            result[f"mean_{metric}_ms"] = mean * 1000
            result[f"median_{metric}_ms"] = percentile(xs, 50) * 1000
            result[f"std_{metric}_ms"] = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5 * 1000
            for p in (50, 95, 99):
                result[f"p{p}_{metric}_ms"] = percentile(xs, p) * 1000
        if detailed:
            failed = [p.finished_reason == "error" for p in reqs]
            result |= {
                "input_lens": [p.prompt_tokens for p in reqs],
                "output_lens": [0 if f else p.generation_tokens for p, f in zip(reqs, failed, strict=True)],
                "ttfts": [0.0 if f else p.ttft_s for p, f in zip(reqs, failed, strict=True)],
                "itls": [
                    [] if f else [p.itl_s] * (p.generation_tokens - 1)
                    for p, f in zip(reqs, failed, strict=True)
                ],
                "start_times": [round(1000.0 + i / rate, 6) for i in range(n)],
                "generated_texts": ["" for _ in reqs],
                "errors": ["Internal Server Error" if f else "" for f in failed],
            }
        return result

    def write_bench(self, folder: Path, detailed: bool = True) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for rate in self.rates:
            path = folder / f"openai-{rate:g}qps-chat-8b.json"
            path.write_text(json.dumps(self.bench_result(rate, detailed)), encoding="utf-8")
            paths.append(path)
        return paths

    def ramp_result(self) -> dict:
        """One ramped run (--ramp-up-strategy linear) through every rate, `bench_s` at each."""
        t0 = datetime(2026, 11, 30, 12, 0)
        parts = [self.bench_result(r) for r in self.rates]
        merged = {k: v for k, v in parts[0].items() if not isinstance(v, list)}
        offset = 0.0
        for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
            merged[key] = [x for p in parts for x in p[key]]
        starts = []
        for p in parts:
            starts += [round(1000.0 + offset + (t - 1000.0), 6) for t in p["start_times"]]
            offset += self.bench_s
        merged["start_times"] = starts
        merged["rps_change_events"] = [
            {"rps": r, "timestamp": (t0 + timedelta(seconds=k * self.bench_s)).isoformat()}
            for k, r in enumerate(self.rates)
        ]
        merged |= {
            "request_rate": float("inf"),
            "duration": self.bench_s * len(self.rates),
            "completed": sum(p["completed"] for p in parts),
            "failed": sum(p["failed"] for p in parts),
        }
        return merged


def _total(increments: list[float], prior: float) -> list[float]:
    """A counter's values: the first increment `prior` times (the history before), then each added."""
    out = [increments[0] * prior]
    for v in increments[1:]:
        out.append(out[-1] + v)
    return out
