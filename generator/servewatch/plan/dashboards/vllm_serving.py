"""vLLM serving: per model, drillable to pod and engine (the data-parallel rank).

The first screen is the overview: one value per stat, the worst (or the total) of the selected models,
read from the alerts' recording rules. Every other row opens on demand. Rows per model say that the
pod and engine variables do not apply to them; the per-engine row honours them (and the request-length
row while no per-model recording rule holds the lengths).
"""

from __future__ import annotations

from ... import grafana
from ...promql import builders as promql
from .board import BoardBuilder
from .deployment_rows import tracks_side_by_side
from .context import REQUESTS_PER_SECOND, TOKENS_PER_SECOND, DashboardContext, var_matcher
from .panels import above, below, filling, heatmap, stat, timeseries

QUANTILES = (0.5, 0.9, 0.95, 0.99)
LATENCIES = (  # signal, metric, title
    ("model_ttft", "vllm:time_to_first_token_seconds", "Time to first token"),
    ("model_itl", "vllm:inter_token_latency_seconds", "Inter-token latency"),
    ("model_e2e_latency", "vllm:e2e_request_latency_seconds", "End-to-end latency"),
)
TPOT = "vllm:request_time_per_output_token_seconds"
PHASES = (  # where a request's time goes: phase, histogram
    ("queue", "vllm:request_queue_time_seconds"),
    ("prefill", "vllm:request_prefill_time_seconds"),
    ("decode", "vllm:request_decode_time_seconds"),
)
PROMPT_TOKENS, GENERATION_TOKENS = "vllm:request_prompt_tokens", "vllm:request_generation_tokens"
ITERATION_TOKENS = "vllm:iteration_tokens_total"
PER_MODEL = "pod and engine do not apply"
WORST = (  # the overview's worst-of stats, coloured by their alert: title, signal, quantile, unit, what to do
    (
        "Failed requests (engine errors)",
        "model_engine_error_ratio",
        None,
        "percentunit",
        "Share of finished requests that the engine failed (finished_reason error), worst model; client "
        "aborts are not counted. When red, open Traffic per model to see which model.",
    ),
    *(
        (
            f"{title} p95",
            signal,
            0.95,
            "s",
            f"Worst model of the selection; {title.lower()} covers {part}. When red, open Latency per model.",
        )
        for signal, title, part in (
            ("model_ttft", "Time to first token", "queueing and prefill"),
            ("model_itl", "Inter-token latency", "each decode step"),
            ("model_e2e_latency", "End-to-end latency", "the whole request"),
        )
    ),
    (
        "Fullest KV cache",
        "engine_kv_cache_usage",
        None,
        "percentunit",
        "KV cache usage of the fullest engine: the first one to preempt. Never an average. When red, open "
        "Per engine to find the rank.",
    ),
    (
        "Longest queue (one engine)",
        "engine_requests_waiting",
        None,
        "short",
        "Requests waiting on the engine with the longest queue. When red, open Per engine: one busy rank "
        "or all of them?",
    ),
    (
        "Preemptions, busiest engine",
        "engine_preemptions_rate",
        None,
        REQUESTS_PER_SECOND,
        "Requests preempted per second for lack of KV cache on the engine that preempts most; each is "
        "recomputed. When red, check its KV cache.",
    ),
)


def percentile(q: float) -> str:
    return f"p{q * 100:g}"


class VllmServing(BoardBuilder):
    name = "vllm-serving"
    summary = (
        "vLLM serving per model, drillable to pod and engine (data-parallel rank). The overview shows the "
        "worst of the selected models from the alerts' recording rules; open a row for more. An alert's "
        "link opens the panel that shows it."
    )

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        # what the alerts see: every engine of the selected models
        self.models = ctx.selection(vllm=ctx.model_filters, dcgm=ctx.workload_filters)
        self.engines = ctx.selection(vllm=ctx.engine_filters)
        # what a deployment costs: both pools of the selected models, whatever $role selects
        self.deployments = ctx.selection(vllm=ctx.deployment_filters, dcgm=ctx.workload_filters)
        # a panel repeated per model: one model in each copy, all its engines or the selected ones
        pods_and_engines = ctx.engine_filters[len(ctx.model_filters) :]
        self.one_model = ctx.selection(vllm=ctx.one_model_filters)
        self.one_model_engines = ctx.selection(vllm=ctx.one_model_filters + pods_and_engines)
        # the alerts' own conditions, in the selected clusters
        self.everything = ctx.selection(vllm=ctx.cluster_filter, dcgm=ctx.cluster_filter)

    def variables(self) -> list[grafana.Variable]:
        ctx, roles = self.ctx, self.ctx.roles
        return [
            *ctx.deployment_variables("Model", multi=True),
            grafana.Variable(
                "pod",
                "Pod",
                query=ctx.label_values(ctx.liveness, roles.pod, *ctx.model_filters),
                multi=True,
                include_all=True,
            ),
            grafana.Variable(
                "engine",
                "Engine (DP rank)",
                query=ctx.label_values(
                    ctx.liveness, roles.engine, *ctx.model_filters, var_matcher(roles.pod, "pod")
                ),
                multi=True,
                include_all=True,
            ),
        ]

    def annotations(self) -> list[grafana.Annotation]:
        return self.ctx.firing_annotation("Firing vLLM alerts", (self.name,), self.ctx.model_filters)

    def fill(self) -> None:
        self.overview()
        self.targets()
        self.traffic()
        self.latency()
        if self.ctx.model.config.client_side is not None:
            self.client_side()
        if self.ctx.model.config.track is not None:
            tracks_side_by_side(self, self.models)
        self.per_engine()
        self.request_shape()
        self.caches_and_cost()

    # -- queries -------------------------------------------------------------------------------------
    def per_model(self, expr: str, *by: str) -> str:
        return promql.agg("sum", self.ctx.identity("model") + list(by), expr)

    def total(self, expr: str) -> str:
        return promql.agg("sum", [], expr)

    def generated_tokens_per_model(self) -> str:
        """Each output token once: on the counting (decode) engines where config.role is set."""
        return self.models.counting().rate("vllm:generation_tokens_total", "model")

    def cost_per_million_tokens(self) -> str:
        """GPUs held x price per GPU-hour / generated tokens per second x 1e6, per deployment: every
        GPU of its prefill and decode pools, each output token once (on decode); no value (not
        infinity) while a deployment generates nothing."""
        gpus, price = self.deployments.gpu_cost_terms()
        per_hour = f"{gpus}\n* {price}" if price else gpus
        tokens = self.deployments.counting().rate("vllm:generation_tokens_total", "deployment")
        return promql.guarded_div(f"({per_hour} / 3600 * 1e6)", tokens, self.ctx.identity("deployment"))

    def length_distribution(self, metric: str) -> str:
        """One model's bucket rates: read from a per-model recording rule where one exists (all the
        model's engines, added up as the latency alerts add them: one series per bucket, not one
        per engine and bucket), else live from the selected engines' buckets, shown only while
        those share one bucket layout."""
        one_model = self.one_model.counting()  # each request's length once, where it finishes
        if one_model.records_bucket_rates(metric, "all"):
            return one_model.bucket_rates(metric, "all")
        selection = self.one_model_engines.counting()
        return promql.only_where(selection.bucket_rates(metric, "all"), selection.one_layout(metric), [])

    def quantile_lines(self, metric: str) -> list[grafana.Target]:
        """p50, p90, p95 and p99 per model (the recording rule where one records that quantile), and
        the mean."""
        ctx = self.ctx
        lines = [
            grafana.Target(self.models.quantile(metric, q, "model"), ctx.model_legend(percentile(q)))
            for q in QUANTILES
        ]
        return lines + [grafana.Target(self.models.mean(metric, "model"), ctx.model_legend("mean"))]

    # -- rows ----------------------------------------------------------------------------------------
    def overview(self) -> None:
        ctx, cost = self.ctx, self.ctx.settings.defaults.cost
        self.row(f"Overview: the worst of the selected models ({PER_MODEL})", collapsed=False)
        self.add(
            stat(
                "Requests per second",
                grafana.Target(self.total(self.models.counting().signal("model_requests_rate"))),
                unit=REQUESTS_PER_SECOND,
                description="Requests finished per second (every finished_reason), all selected models. "
                "If it drops to 0 while clients send traffic, open the vLLM targets row.",
            )
        )
        self.add(
            stat(
                "Generated tokens per second",
                grafana.Target(self.total(self.generated_tokens_per_model())),
                unit=TOKENS_PER_SECOND,
                description="Output tokens generated per second, all selected models. A fall with steady "
                "requests means shorter answers or slower decode: compare inter-token latency.",
            )
        )
        for title, signal, quantile, unit, description in WORST:
            self.add(self.worst_stat(title, self.models, signal, description, quantile, unit=unit))
        self.add(
            stat(
                "Running requests",
                grafana.Target(self.total(self.models.signal("engine_requests_running"))),
                description="Requests in the running batches of every selected engine. Compare with the "
                "queue: work piling up in front of a full batch needs more replicas.",
            )
        )
        self.add(
            stat(
                "Cost per 1M output tokens (instantaneous), most expensive model",
                grafana.Target(promql.agg("max", [], self.cost_per_million_tokens())),
                unit=cost.unit,
                decimals=2,
                description=f"The most expensive selected model at this instant: {cost.per_gpu_hour} "
                f"x GPUs held / generated tokens per second (good or not) x "
                "1e6. Empty while nothing is generated; high with low traffic means idle GPUs. The SLO "
                "dashboard has the cost per 1M good tokens over the selected range.",
            ),
            optional="cost",
        )
        self.add(
            stat(
                "vLLM targets up",
                grafana.Target(
                    self.everything.targets_up("vllm", var_matcher(ctx.roles.namespace, "namespace"))
                ),
                description="vLLM scrape targets in the selected namespaces that answer their scrape. "
                "Fewer than the replicas you run: open the vLLM targets row.",
            )
        )

    def targets(self) -> None:
        self.row("vLLM targets: the alerts' own conditions (namespace, model, " + PER_MODEL + ")")
        self.problem_lists("vllm", self.everything)

    def traffic(self) -> None:
        ctx = self.ctx
        self.row(f"Traffic per model ({PER_MODEL})")
        self.add(
            timeseries(
                "Finished requests by reason",
                grafana.Target(
                    self.models.counting().signal("model_requests_rate"),
                    ctx.model_legend("{{finished_reason}}"),
                ),
                unit=REQUESTS_PER_SECOND,
                stack=True,
                description="Requests finished per second by finished_reason (stop, length, abort, error, "
                "repetition). A growing abort band means clients give up: check latency.",
            )
        )
        self.add(
            timeseries(
                "Failed requests per model (engine errors)",
                grafana.Target(self.models.signal("model_engine_error_ratio"), ctx.model_legend()),
                unit="percentunit",
                min=0,
                steps=above(ctx.threshold("model_engine_error_ratio")),
                description="Share of each model's finished requests that the engine failed (finished_reason "
                "error). Above the line, see the runbook; client aborts are in Finished requests by reason.",
            ),
            alert_view=ctx.alerts_of("model_engine_error_ratio"),
        )
        self.add(
            timeseries(
                "Client aborts per model",
                grafana.Target(self.models.signal("model_abort_ratio"), ctx.model_legend()),
                unit="percentunit",
                min=0,
                steps=above(ctx.threshold("model_abort_ratio")),
                description="Share of each model's finished requests that their clients aborted "
                "(finished_reason abort): the clients' choice, not the engine's errors, so neither the "
                "error alert nor the availability SLO counts them by default. Aborts up with time to first "
                "token: clients give up waiting (see the latency panels).",
            ),
            alert_view=ctx.alerts_of("model_abort_ratio"),
        )
        self.add(
            timeseries(
                "Running and waiting requests",
                grafana.Target(
                    self.per_model(self.models.signal("engine_requests_running")), ctx.model_legend("running")
                ),
                grafana.Target(
                    self.per_model(self.models.signal("engine_requests_waiting")), ctx.model_legend("waiting")
                ),
                description="Requests in the running batches and in the queues, summed over each model's "
                "engines. A queue that keeps growing means the model needs more replicas.",
            )
        )
        self.add(
            timeseries(
                "Waiting requests by reason",
                grafana.Target(
                    self.models.total("vllm:num_requests_waiting_by_reason", "model", ["reason"]),
                    ctx.model_legend("{{reason}}"),
                ),
                stack=True,
                description="Why requests wait: capacity (no KV cache or batch room) or deferred (held back "
                "by the scheduler). Capacity waits call for more KV cache or replicas.",
            )
        )
        self.add(
            timeseries(
                "Token throughput",
                grafana.Target(
                    self.models.counting().rate("vllm:prompt_tokens_total", "model"),
                    ctx.model_legend("prompt"),
                ),
                grafana.Target(self.generated_tokens_per_model(), ctx.model_legend("generation")),
                unit=TOKENS_PER_SECOND,
                description="Prompt tokens (prefill, cached ones included) and generated tokens per second "
                "per model. Prompt tokens up with flat requests: longer prompts, slower prefill.",
            )
        )

    def latency(self) -> None:
        ctx = self.ctx
        self.row(f"Latency per model: p50, p90, p95, p99 and mean ({PER_MODEL})")
        roles = ctx.roles
        slo_view = grafana.Link(
            "SLOs of this model",
            ctx.board_url(
                "slo",
                {
                    "namespace": f"${{__field.labels.{roles.namespace}}}",
                    "model": f"${{__field.labels.{roles.model}}}",
                },
            ),
        )
        for signal, metric, title in LATENCIES:
            self.add(
                timeseries(
                    title,
                    *self.quantile_lines(metric),
                    unit="s",
                    w=8,
                    links=(slo_view,),
                    steps=above(ctx.threshold(signal, 0.95)),
                    description=f"{ctx.model.signal(signal).help} The line is the p95 alert's threshold; "
                    "above it, compare queue, prefill and decode below.",
                ),
                alert_view=ctx.alerts_of(signal),
            )
        self.add(
            timeseries(
                "Time per output token (TPOT)",
                *self.quantile_lines(TPOT),
                unit="s",
                w=8,
                description="Decode time / (generated tokens - 1) per finished request: what one user "
                "sees per token. High with normal inter-token latency: long pauses inside requests.",
            )
        )
        self.add(
            timeseries(
                "Queue, prefill and decode p95",
                *(
                    grafana.Target(
                        self.models.quantile(metric, 0.95, "model"), ctx.model_legend(f"{phase} p95")
                    )
                    for phase, metric in PHASES
                ),
                unit="s",
                w=8,
                description="Where slow requests spend their time. Queue up: not enough capacity; prefill "
                "up: longer prompts; decode up: busy batches or longer answers.",
            )
        )
        self.add(
            timeseries(
                "Where request time goes (mean): $model",
                *(grafana.Target(self.one_model.mean(metric, "all"), phase) for phase, metric in PHASES),
                unit="s",
                stack=True,
                w=8,
                repeat="model",
                description="Mean seconds a finished request of this model spends queued, in prefill and in "
                "decode, stacked (one panel per model). The tallest band is where to look.",
            )
        )

    def client_side(self) -> None:
        """The client's view (config.client_side): the gateway's or frontend's quantiles beside the
        engines' own, so a gap between them shows time spent outside the engines."""
        ctx = self.ctx
        source = ctx.model.builder.labels.client.name
        self.row(f"The client's side: latency at the {source} ({PER_MODEL})")
        for client, engine, title in (
            ("client_ttft", "model_ttft", "Time to first token"),
            ("client_itl", "model_itl", "Inter-token latency"),
        ):
            lines = [
                grafana.Target(
                    self.models.recorded_quantile(client, q),
                    ctx.model_legend(f"{percentile(q)} at the {source}"),
                )
                for q in ctx.model.signal(client).quantiles
            ]
            lines.append(
                grafana.Target(self.models.signal(engine, 0.95), ctx.model_legend("p95 on the engines"))
            )
            self.add(
                timeseries(
                    f"{title}: the client's side and the engines'",
                    *lines,
                    unit="s",
                    w=12,
                    steps=above(ctx.threshold(client, 0.95)),
                    description=f"{ctx.model.signal(client).help} Beside it the engines' own p95: a client "
                    "p95 far above the engines' is time spent in the gateway, routing or the KV transfer.",
                ),
                alert_view=ctx.alerts_of(client),
            )
        if ctx.model.config.client_pool is not None:
            self.inference_pools()

    def inference_pools(self) -> None:
        """The inference pools the gateway routes to (a source that reports them): ready pods, and
        the pool's own averages of KV cache and queue beside the engines' worst."""
        ctx = self.ctx
        pool = "{{name}}" if not ctx.cluster_labels else f"{{{{{ctx.cluster_labels[0]}}}}} {{{{name}}}}"
        self.add(
            timeseries(
                "Ready pods per inference pool",
                grafana.Target(self.models.pool("pool_ready_pods"), pool),
                min=0,
                steps=below(ctx.threshold("pool_ready_pods")),
                w=8,
                description=f"{ctx.model.signal('pool_ready_pods').help} Short of the line the gateway has "
                "no model server to send the pool's requests to: see the runbook.",
            ),
            alert_view=ctx.alerts_of("pool_ready_pods"),
        )
        for signal, title, unit, what in (
            ("pool_kv_cache_usage", "KV cache utilization per inference pool (average)", "percentunit", "KV"),
            ("pool_queue_size", "Queue per inference pool (average)", "short", "queue"),
        ):
            self.add(
                timeseries(
                    title,
                    grafana.Target(self.models.pool(signal), pool),
                    unit=unit,
                    min=0,
                    w=8,
                    description=f"{ctx.model.signal(signal).help} An average hides one full engine: the "
                    f"per-engine {what} panels and alerts show the worst.",
                )
            )

    def per_engine(self) -> None:
        ctx, roles = self.ctx, self.ctx.roles
        engine = ctx.engine_legend()
        self.row("Per engine: the data-parallel ranks (pod and engine apply)")
        moe_view = grafana.Link(
            "MoE deployment view",
            ctx.board_url(
                "moe-deployment",
                {
                    "namespace": f"${{__field.labels.{roles.namespace}}}",
                    "model": f"${{__field.labels.{roles.model}}}",
                },
            ),
        )
        self.add(
            timeseries(
                "KV cache usage per engine",
                grafana.Target(self.engines.signal("engine_kv_cache_usage"), engine),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(ctx.threshold("engine_kv_cache_usage")),
                w=8,
                links=(moe_view,),
                description="KV cache usage of each engine, never averaged: the fullest rank preempts first. "
                "Above the line, see the runbook; the link opens the deployment's MoE view.",
            ),
            alert_view=ctx.alerts_of("engine_kv_cache_usage"),
        )
        self.add(
            timeseries(
                "Preemptions per engine",
                grafana.Target(self.engines.signal("engine_preemptions_rate"), engine),
                unit=REQUESTS_PER_SECOND,
                steps=above(ctx.threshold("engine_preemptions_rate")),
                w=8,
                description="Requests preempted per second for lack of KV cache; each one is recomputed. "
                "Above the line, that engine needs KV cache room.",
            ),
            alert_view=ctx.alerts_of("engine_preemptions_rate"),
        )
        self.add(
            timeseries(
                "Waiting requests per engine",
                grafana.Target(self.engines.signal("engine_requests_waiting"), engine),
                steps=above(ctx.threshold("engine_requests_waiting")),
                w=8,
                description="Requests queued in front of each engine. One engine above the line: an uneven "
                "router or a slow rank; all of them: too little capacity.",
            ),
            alert_view=ctx.alerts_of("engine_requests_waiting"),
        )
        self.add(
            timeseries(
                "Generated tokens per second per engine",
                grafana.Target(self.engines.signal("engine_generation_tokens_rate"), engine),
                unit=TOKENS_PER_SECOND,
                w=8,
                description="Output tokens per second of each engine. An engine at 0 while its siblings "
                "work is idle or wedged: check its requests and its pod.",
            )
        )
        for signal, metric, title in LATENCIES[:2]:
            self.add(
                timeseries(
                    f"{title} p95 per engine",
                    grafana.Target(self.engines.quantile(metric, 0.95, "engine"), engine),
                    unit="s",
                    steps=above(ctx.threshold(signal, 0.95)),
                    w=8,
                    description=f"{ctx.model.signal(signal).help} Per engine, so one slow rank stands out; "
                    "the line is the per-model alert's threshold.",
                ),
                optional="per_engine_latency",
            )
        self.add(
            heatmap(
                "Tokens per engine step (batch size)",
                grafana.Target(
                    self.engines.bucket_rates(ITERATION_TOKENS, "all"), "{{le}}", format="heatmap"
                ),
                w=12,
                description="Prompt and generated tokens each engine step computed. Small steps under load: "
                "the scheduler cannot fill batches (KV cache or max_num_seqs).",
            ),
            optional="iteration_heatmap",
        )

    def request_shape(self) -> None:
        per_model = all(
            self.one_model.records_bucket_rates(m, "all") for m in (PROMPT_TOKENS, GENERATION_TOKENS)
        )
        self.row(
            f"Request lengths, one model per panel ({PER_MODEL if per_model else 'pod and engine apply'})"
        )
        for metric, title, what in (
            (PROMPT_TOKENS, "Prompt length", "Prompt tokens"),
            (GENERATION_TOKENS, "Generation length", "Generated tokens"),
        ):
            self.add(
                heatmap(
                    f"{title}: $model",
                    grafana.Target(self.length_distribution(metric), "{{le}}", format="heatmap"),
                    w=12,
                    repeat="model",
                    max_per_row=2,
                    no_value="No finished requests (or, read live, engines with different buckets: "
                    "narrow the namespace or pod).",
                    description=f"{what} per finished request, one panel per model: token buckets follow "
                    "each deployment's max_model_len, so models are never added together. Read from the "
                    "per-model recording rule where one exists (all the model's engines), else live from "
                    "the selected engines while they share one bucket layout.",
                ),
                optional="length_heatmaps",
            )

    def caches_and_cost(self) -> None:
        ctx, cost = self.ctx, self.ctx.settings.defaults.cost
        self.row(f"Caches and cost per model ({PER_MODEL})")
        for (part, whole), title, optional, what in (
            (
                ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
                "Prefix cache hit ratio",
                "prefix_cache",
                "Cached prompt tokens / queried prompt tokens. Falling hits mean more prefill work: check "
                "prompt templates and KV cache pressure.",
            ),
            (
                ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),
                "Speculative decoding acceptance",
                "spec_decode",
                "Accepted / proposed draft tokens; only models served with --speculative-config have data. "
                "Low acceptance wastes compute: tune or drop the draft model.",
            ),
        ):
            self.add(
                timeseries(
                    title,
                    grafana.Target(self.models.share(part, whole, "model"), ctx.model_legend()),
                    unit="percentunit",
                    min=0,
                    max=1,
                    w=8,
                    description=what,
                ),
                optional=optional,
            )
        self.add(
            timeseries(
                "Cost per 1M output tokens (instantaneous)",
                grafana.Target(self.cost_per_million_tokens(), ctx.model_legend(level="deployment")),
                unit=cost.unit,
                decimals=2,
                w=8,
                description=f"At each instant: {cost.per_gpu_hour} x "
                "GPUs held by the model's pods / generated tokens per second (good or not) x 1e6. Empty, "
                "not infinite, while nothing is generated; a rise with steady GPUs means less traffic. The "
                "SLO dashboard has the cost per 1M good tokens over the selected range.",
            ),
            optional="cost",
        )
