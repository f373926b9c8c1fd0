"""MoE deployment: one namespace and model, its vLLM engines and the GPUs its pods hold."""

from __future__ import annotations

from ... import grafana as g
from ...promql import builders as b
from .board import BoardBuilder
from .context import DashboardContext
from .panels import GREEN, RED, instant_table, over, pct_steps, stat, table, ts


class MoeDeployment(BoardBuilder):
    name = "moe-deployment"

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        c = ctx
        self.filters = c.model_filters
        self.vb = c.builder(vllm=self.filters)
        self.gb = c.builder(dcgm=c.workload_filters)
        self.pods = c.pods_of_models(self.vb)
        self.model_ident = c.ident("model")

    def variables(self) -> list[g.Variable]:
        return self.ctx.deployment_vars("Model (deployment)", multi=False)

    def gpu_ratio(self) -> str:
        """The alert's ratio per GPU the deployment holds, with both host spellings (gpu_context)."""
        c = self.ctx
        return c.gpus_held(c.show("gpu_fb_used_ratio", self.gb, c.workload_filters), self.pods)

    def engine(self, name: str) -> str:
        return self.ctx.show(name, self.vb, self.filters)

    def imbalance(self, expr: str, by: list[str]) -> str:
        return b.guarded_div(b.agg("max", by, expr), b.agg("avg", by, expr), by)

    def firing_alerts(self) -> str:
        c = self.ctx
        of_model = c.firing(*self.filters)
        of_pods = b.only_where(c.firing(*c.cluster_filter), self.pods, c.pod_ident)
        of_gpus = c.gpus_held(c.firing(*c.cluster_filter), self.pods)
        return b.any_of(of_model, of_pods, of_gpus)

    def build(self) -> g.Dashboard:
        c, r = self.ctx, self.ctx.r
        kube = c.settings.board(self.name).kube_pod_labels
        join = (
            f"and, through kube_pod_labels, every pod with the same {kube.group_label} "
            if kube.enabled
            else ""
        )
        d = self.start(
            "One deployment (namespace + model): its vLLM engines and the GPUs its pods hold, "
            f"matched on namespace/pod {join}via dcgm-exporter's workload labels.",
            c.firing_annotation("Firing alerts", ("vllm-serving", "gpu-fleet"), self.filters),
        )
        fb_thr, kv_thr = c.threshold("gpu_fb_used_ratio"), c.threshold("engine_kv_cache_usage")
        gpu_ratio = self.gpu_ratio()
        gpu_legend = f"{{{{{r.wl_pod}}}}} {c.gpu_legend()}"
        el = c.engine_legend()
        fleet_link = g.Link(
            "GPU fleet view of this GPU", c.board_url("gpu-fleet", {"uuid": f"${{__field.labels.{r.uuid}}}"})
        )

        d.row("Deployment")
        d.add(
            stat(
                "Fullest GPU framebuffer",
                g.Target(b.agg("max", [], gpu_ratio)),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                description="Framebuffer used ratio of the fullest GPU the deployment holds.",
            )
        )
        headroom = g.thresholds((None, RED), (round(1 - fb_thr, 4), GREEN)) if fb_thr is not None else ()
        d.add(
            stat(
                "Headroom on the fullest GPU",
                g.Target(f"1 - {b.agg('max', [], gpu_ratio)}"),
                unit="percentunit",
                min=0,
                max=1,
                steps=headroom,
                description="What is left on the fullest rank's GPU: it runs out first.",
            )
        )
        free = c.gpus_held(c.per_gpu(self.gb, "fb_free", extra=[r.wl_namespace, r.wl_pod]), self.pods)
        d.add(
            stat(
                "Least free framebuffer",
                g.Target(b.agg("min", [], free)),
                unit=c.unit("fb_free"),
                description="Free framebuffer on the deployment's GPU with the least of it.",
            )
        )
        d.add(
            stat(
                "Fullest engine KV cache",
                g.Target(b.agg("max", [], self.engine("engine_kv_cache_usage"))),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(kv_thr),
            )
        )
        d.add(stat("Waiting requests", g.Target(b.agg("sum", [], self.engine("engine_requests_waiting")))))
        d.add(
            stat(
                "Firing alerts",
                g.Target(b.agg("count", [], self.firing_alerts())),
                no_value="0",
                steps=over(1),
            ),
            show=self.shows("alerts"),
        )

        d.row("Imbalance across ranks (fullest / average; 1 = even)")
        targets = [
            g.Target(self.imbalance(gpu_ratio, []), "GPU framebuffer"),
            g.Target(self.imbalance(self.engine("engine_kv_cache_usage"), self.model_ident), "KV cache"),
            g.Target(
                self.imbalance(self.engine("engine_requests_running"), self.model_ident), "running requests"
            ),
        ]
        if self.shows("tokens_per_rank"):
            targets.append(
                g.Target(
                    self.imbalance(self.engine("engine_generation_tokens_rate"), self.model_ident),
                    "generated tokens/s",
                )
            )
        d.add(
            ts(
                "Imbalance (max / avg across ranks)",
                *targets,
                unit="none",
                decimals=2,
                w=24,
                description="Expert-parallel MoE ranks wait for the "
                "slowest; a ratio well above 1 means one rank "
                "carries more load or memory than the others.",
            )
        )

        d.row("Per rank")
        d.add(
            ts(
                "Framebuffer used per GPU",
                g.Target(gpu_ratio, gpu_legend),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                show_thresholds=True,
                w=16,
                links=(fleet_link,),
            )
        )
        d.add(
            g.Panel(
                "bargauge",
                "Fullest GPUs now",
                (g.Target(f"sort_desc({gpu_ratio})", gpu_legend, instant=True),),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                w=8,
            )
        )
        d.add(
            ts(
                "KV cache usage per engine",
                g.Target(self.engine("engine_kv_cache_usage"), el),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(kv_thr),
                show_thresholds=True,
                w=8,
            )
        )
        d.add(
            ts(
                "Queue per engine",
                g.Target(self.engine("engine_requests_waiting"), el + " waiting"),
                g.Target(self.engine("engine_requests_running"), el + " running"),
                w=8,
            )
        )
        d.add(
            ts(
                "Generated tokens per second per engine",
                g.Target(self.engine("engine_generation_tokens_rate"), el),
                w=8,
            ),
            show=self.shows("tokens_per_rank"),
        )

        d.row("Alerts")
        d.add(
            table(
                "Alerts firing for this deployment",
                instant_table(self.firing_alerts()),
                w=24,
                hide=("Value", "alertstate"),
                description="vLLM alerts of the model or its pods, and GPU alerts of the GPUs its pods hold.",
            ),
            show=self.shows("alerts"),
        )
        return d
