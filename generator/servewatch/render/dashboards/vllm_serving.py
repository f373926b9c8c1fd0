"""vLLM serving: per model, drillable to pod and engine (the data-parallel rank)."""

from __future__ import annotations

from ... import grafana as g
from ...promql import builders as b
from .board import BoardBuilder
from .context import WINDOW, DashboardContext, var_matcher
from .panels import over, pct_steps, stat, ts


class VllmServing(BoardBuilder):
    name = "vllm-serving"

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        c, r = ctx, ctx.r
        self.model_filters = c.model_filters
        self.engine_filters = self.model_filters + [
            var_matcher(r.pod, "pod"),
            var_matcher(r.engine, "engine"),
        ]
        self.mb = c.builder(vllm=self.model_filters)  # model level: what the alerts see
        self.eb = c.builder(vllm=self.engine_filters)  # narrowed by pod and engine too
        self.gb = c.builder(dcgm=c.workload_filters)
        self.model_ident = c.ident("model")
        self.engine_ident = c.ident("engine")

    def filters(self, name: str) -> list[str]:
        return self.engine_filters if self.ctx.signal(name).level == "engine" else self.model_filters

    def show(self, name: str, bld=None, quantile: float | None = None) -> str:
        return self.ctx.show(name, bld or self.eb, self.filters(name), quantile)

    def per_model(self, expr: str, by: tuple[str, ...] = ()) -> str:
        return b.agg("sum", self.model_ident + list(by), expr)

    # -- pieces ------------------------------------------------------------------------------------
    def variables(self) -> list[g.Variable]:
        c, r = self.ctx, self.ctx.r
        return [
            *c.deployment_vars("Model", multi=True),
            g.Variable(
                "pod",
                "Pod",
                query=c.label_values(c.liveness, r.pod, *c.model_filters),
                multi=True,
                include_all=True,
            ),
            g.Variable(
                "engine",
                "Engine (DP rank)",
                query=c.label_values(c.liveness, r.engine, *c.model_filters, var_matcher(r.pod, "pod")),
                multi=True,
                include_all=True,
            ),
        ]

    def model_legend(self, suffix: str = "") -> str:
        r = self.ctx.r
        return f"{{{{{r.namespace}}}}}/{{{{{r.model}}}}}" + (f" {suffix}" if suffix else "")

    def quantile_targets(self, name: str) -> list[g.Target]:
        c = self.ctx
        sig = c.signal(name)
        if c.uses_record(name):
            return [g.Target(b.selector(sig.record, *self.model_filters), self.model_legend("p{{quantile}}"))]
        return [g.Target(self.show(name, self.mb, q), self.model_legend(f"p{q:g}")) for q in sig.quantiles]

    def rate_ratio(self, part: str, whole: str) -> str:
        """rate(part) / rate(whole) per model; no value while `whole` does not move."""
        c = self.ctx
        return b.guarded_div(
            c.rate(self.eb, part, "model"), c.rate(self.eb, whole, "model"), self.model_ident
        )

    def mean_time(self, metric: str) -> str:
        return self.rate_ratio(f"{metric}_sum", f"{metric}_count")

    def share(self, title: str, part: str, whole: str, description: str) -> g.Panel:
        """A per-model ratio of two counters, from 0 to 1."""
        return ts(
            title,
            g.Target(self.rate_ratio(part, whole), self.model_legend()),
            unit="percentunit",
            min=0,
            max=1,
            w=8,
            description=description,
        )

    def cost_per_million(self) -> str:
        c, r = self.ctx, self.ctx.r
        cost = c.settings.defaults.cost
        if cost.gpus_per_engine:
            engines = b.dedup(self.mb.select(c.liveness), self.engine_ident)
            gpus = f"{b.agg('count', self.model_ident, engines)} * {cost.gpus_per_engine}"
        else:
            per_gpu = b.dedup(self.gb.select("fb_used"), c.ident("gpu") + [r.wl_namespace, r.wl_pod])
            held = b.copy_label(b.copy_label(per_gpu, r.wl_namespace, r.namespace), r.wl_pod, r.pod)
            gpus = b.agg(
                "count",
                self.model_ident,
                b.with_context(held, c.pods_of_models(self.mb), c.pod_ident, [r.model]),
            )
        tokens = self.per_model(self.show("engine_generation_tokens_rate", self.mb))
        price = repr(float(cost.price_per_gpu_hour))
        return b.guarded_div(f"({gpus}\n* {price} / 3600 * 1e6)", tokens, self.model_ident)

    def heatmap(self, title: str, metric: str, description: str) -> g.Panel:
        rates = b.dedup(b.rate(self.eb.select(f"{metric}_bucket"), WINDOW), self.engine_ident + ["le"])
        return g.Panel(
            "heatmap",
            title,
            (g.Target(b.agg("sum", ["le"], rates), "{{le}}", format="heatmap"),),
            description=description,
            unit="short",
            options={"yAxis": {"axisPlacement": "left", "unit": "short"}},
        )

    # -- the dashboard -----------------------------------------------------------------------------
    def build(self) -> g.Dashboard:
        c, s = self.ctx, self.ctx.settings
        ml, el = self.model_legend, c.engine_legend()
        kv_thr = c.threshold("engine_kv_cache_usage")
        d = self.start(
            "vLLM serving per model, drillable to pod and engine (data-parallel rank). "
            "Panels marked 'alert view' read the same recording rules as the alerts.",
            c.firing_annotation("Firing vLLM alerts", (self.name,), self.model_filters),
        )
        moe_link = g.Link(
            "MoE deployment view",
            c.board_url(
                "moe-deployment",
                {
                    "namespace": f"${{__field.labels.{c.r.namespace}}}",
                    "model": f"${{__field.labels.{c.r.model}}}",
                },
            ),
        )

        d.row("Overview (alert view: worst of the selected models)")
        d.add(
            stat(
                "Requests per second",
                g.Target(b.agg("sum", [], self.show("model_requests_rate")), "requests/s"),
                unit="reqps",
                description="Finished requests per second (every finished_reason) of the selection.",
            )
        )
        err_thr = c.threshold("model_request_error_ratio")
        d.add(
            stat(
                "Aborted or failed requests",
                g.Target(b.agg("max", [], self.show("model_request_error_ratio", self.mb))),
                unit="percentunit",
                steps=over(err_thr),
                no_value="0",
                description="Share of finished requests with finished_reason abort or error (alert view).",
            )
        )
        for name, title in (
            ("model_ttft", "Time to first token p95"),
            ("model_itl", "Inter-token latency p95"),
        ):
            thr = c.threshold(name, 0.95)
            d.add(
                stat(
                    title,
                    g.Target(b.agg("max", [], self.show(name, self.mb, 0.95))),
                    unit="s",
                    steps=over(thr),
                    description=f"{c.signal(name).help} Worst model of the selection (alert view).",
                )
            )
        d.add(
            stat(
                "Fullest KV cache",
                g.Target(b.agg("max", [], self.show("engine_kv_cache_usage"))),
                unit="percentunit",
                steps=pct_steps(kv_thr),
                min=0,
                max=1,
                description="KV cache usage of the fullest engine (alert view): the first one to preempt.",
            )
        )
        cost = s.defaults.cost
        d.add(
            stat(
                "Cost per 1M output tokens",
                g.Target(self.cost_per_million(), ml()),
                unit=cost.unit,
                decimals=2,
                description=f"{cost.price_per_gpu_hour:g} {cost.currency} "
                "per GPU-hour x GPUs held / generated "
                "tokens per second x 1e6. Empty when no tokens were generated.",
            ),
            show=self.shows("cost"),
        )

        d.row("Traffic")
        d.add(
            ts(
                "Finished requests by reason",
                g.Target(self.show("model_requests_rate"), ml("{{finished_reason}}")),
                unit="reqps",
                stack=True,
                description="Requests finished per second by finished_reason "
                "(stop, length, abort, error, repetition).",
            )
        )
        d.add(
            ts(
                "Running and waiting requests",
                g.Target(self.per_model(self.show("engine_requests_running")), ml("running")),
                g.Target(self.per_model(self.show("engine_requests_waiting")), ml("waiting")),
                description="Requests in the running batch and in the "
                "queue, summed over the engines of each model.",
            )
        )
        waiting = b.dedup(
            self.eb.select("vllm:num_requests_waiting_by_reason"), self.engine_ident + ["reason"]
        )
        d.add(
            ts(
                "Waiting requests by reason",
                g.Target(self.per_model(waiting, ("reason",)), ml("{{reason}}")),
                stack=True,
                description="capacity: no KV cache or batch room; deferred: held back by the scheduler.",
            )
        )
        d.add(
            ts(
                "Token throughput",
                g.Target(self.per_model(self.show("engine_prompt_tokens_rate")), ml("prompt")),
                g.Target(self.per_model(self.show("engine_generation_tokens_rate")), ml("generation")),
                unit="short",
                description="Prompt (prefill, cached included) and generated tokens per second.",
            )
        )

        d.row("Latency (alert view: recording rules per model)")
        for name, title in (
            ("model_ttft", "Time to first token"),
            ("model_itl", "Inter-token latency"),
            ("model_e2e_latency", "End-to-end latency"),
        ):
            d.add(ts(title, *self.quantile_targets(name), unit="s", w=8, description=c.signal(name).help))
        d.add(
            ts(
                "Where request time goes (mean)",
                g.Target(self.mean_time("vllm:request_queue_time_seconds"), ml("queue")),
                g.Target(self.mean_time("vllm:request_prefill_time_seconds"), ml("prefill")),
                g.Target(self.mean_time("vllm:request_decode_time_seconds"), ml("decode")),
                unit="s",
                stack=True,
                w=24,
                description="Mean time per finished request in the queue, in prefill and in decode.",
            )
        )

        d.row("Per engine (narrow with the pod and engine variables)")
        d.add(
            ts(
                "KV cache usage per engine",
                g.Target(self.show("engine_kv_cache_usage"), el),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(kv_thr),
                show_thresholds=True,
                w=8,
                links=(moe_link,),
                description="Never averaged across engines: the fullest data-parallel rank preempts first.",
            )
        )
        d.add(
            ts(
                "Preemptions per engine",
                g.Target(self.show("engine_preemptions_rate"), el),
                w=8,
                steps=over(c.threshold("engine_preemptions_rate")),
                show_thresholds=True,
                description="Requests preempted per second for lack of KV cache; each is recomputed.",
            )
        )
        d.add(
            ts(
                "Waiting requests per engine",
                g.Target(self.show("engine_requests_waiting"), el),
                w=8,
                steps=over(c.threshold("engine_requests_waiting")),
                show_thresholds=True,
            )
        )
        d.add(
            ts(
                "Generated tokens per second per engine",
                g.Target(self.show("engine_generation_tokens_rate"), el),
                w=8,
            )
        )
        for metric, title in (
            ("vllm:time_to_first_token_seconds", "Time to first token p95 per engine"),
            ("vllm:inter_token_latency_seconds", "Inter-token latency p95 per engine"),
        ):
            expr = self.eb.histogram_quantile(metric, 0.95, WINDOW, "engine")
            d.add(ts(title, g.Target(expr, el), unit="s", w=8), show=self.shows("per_engine_latency"))

        d.row("Requests and caches")
        d.add(
            self.heatmap(
                "Prompt length", "vllm:request_prompt_tokens", "Prompt tokens per finished request."
            ),
            show=self.shows("length_heatmaps"),
        )
        d.add(
            self.heatmap(
                "Generation length",
                "vllm:request_generation_tokens",
                "Generated tokens per finished request.",
            ),
            show=self.shows("length_heatmaps"),
        )
        d.add(
            self.share(
                "Prefix cache hit ratio",
                "vllm:prefix_cache_hits_total",
                "vllm:prefix_cache_queries_total",
                "Cached prompt tokens / queried prompt tokens. Empty while nothing is queried.",
            ),
            show=self.shows("prefix_cache"),
        )
        d.add(
            self.share(
                "Speculative decoding acceptance",
                "vllm:spec_decode_num_accepted_tokens_total",
                "vllm:spec_decode_num_draft_tokens_total",
                "Accepted / proposed draft tokens. Only models served with --speculative-config have data.",
            ),
            show=self.shows("spec_decode"),
        )
        d.add(
            ts(
                "Cost per 1M output tokens",
                g.Target(self.cost_per_million(), ml()),
                unit=cost.unit,
                decimals=2,
                w=8,
                description=f"{cost.price_per_gpu_hour:g} {cost.currency} "
                "per GPU-hour x GPUs held by the model's pods / "
                "generated tokens per second x 1e6. Empty, not infinite, when no tokens were generated.",
            ),
            show=self.shows("cost"),
        )
        return d
