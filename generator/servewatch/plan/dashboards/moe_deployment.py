"""MoE deployment: one namespace and model, its vLLM engines and the GPUs its pods hold."""

from __future__ import annotations

from ... import grafana
from ...promql import builders as promql
from .board import BoardBuilder
from .context import TOKENS_PER_SECOND, DashboardContext
from .deployment_rows import pools_side_by_side
from .panels import GREEN, RED, above, bargauge, filling, problem_list, problems, stat, timeseries

# the KV-transfer failure signals one panel shows, each with its alert, and what its legend calls them
KV_FAILURES = (
    ("engine_kv_transfer_failures_rate", "transfers"),
    ("engine_kv_notification_failures_rate", "notifications"),
    ("engine_kv_expired_requests_rate", "expired"),
)


class MoeDeployment(BoardBuilder):
    name = "moe-deployment"

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        self.deployment = ctx.selection(vllm=ctx.model_filters, dcgm=ctx.workload_filters)
        self.pods = self.deployment.pods_of_models()

    def description(self) -> str:
        kube = self.ctx.settings.board(self.name).kube_pod_labels
        join = (
            f"and, through kube_pod_labels, every pod with the same {kube.group_label} "
            if kube.enabled
            else ""
        )
        return (
            "One deployment (namespace + model): its vLLM engines and the GPUs its pods hold, matched on "
            f"namespace/pod {join}via dcgm-exporter's workload labels. Expert-parallel ranks wait for the "
            "slowest: the fullest GPU and engine are what fail first."
        )

    def variables(self) -> list[grafana.Variable]:
        return self.ctx.deployment_variables("Model (deployment)", multi=False)

    def annotations(self) -> list[grafana.Annotation]:
        return self.ctx.firing_annotation(
            "Firing alerts", ("vllm-serving", "gpu-fleet"), self.ctx.model_filters
        )

    def fill(self) -> None:
        self.overview()
        if self.ctx.model.config.role is not None:
            pools_side_by_side(self, self.deployment)
        self.imbalance_across_ranks()
        self.per_rank()
        self.kv_transfer()
        self.alerts()

    # -- queries ---------------------------------------------------------------------------------------
    def framebuffer_ratio(self) -> str:
        """The alert's ratio of each GPU the deployment holds (the rule carries both host spellings)."""
        return self.deployment.gpus_held(self.deployment.signal("gpu_fb_used_ratio"), self.pods)

    def least_free_framebuffer(self) -> str:
        roles = self.ctx.roles
        free = self.deployment.per_gpu("fb_free", extra=[roles.wl_namespace, roles.wl_pod])
        return promql.agg("min", [], self.deployment.gpus_held(free, self.pods))

    def engine(self, signal: str) -> str:
        return self.deployment.signal(signal)

    def imbalance(self, expr: str, by: list[str]) -> str:
        """Fullest / average across the ranks: 1 when even."""
        return promql.guarded_div(promql.agg("max", by, expr), promql.agg("avg", by, expr), by)

    def firing_alerts(self) -> str:
        """vLLM alerts of the model or its pods, and GPU alerts of the GPUs its pods hold."""
        ctx, selection = self.ctx, self.deployment
        of_model = ctx.firing(*ctx.model_filters)
        of_pods = promql.only_where(ctx.firing(*ctx.cluster_filter), self.pods, ctx.pod_identity)
        of_gpus = selection.gpus_held(ctx.firing(*ctx.cluster_filter), self.pods)
        return promql.any_of(of_model, of_pods, of_gpus)

    # -- rows ------------------------------------------------------------------------------------------
    def overview(self) -> None:
        ctx = self.ctx
        fb_threshold = ctx.threshold("gpu_fb_used_ratio")
        fullest = promql.agg("max", [], self.framebuffer_ratio())
        self.row("Deployment", collapsed=False)
        self.add(
            stat(
                "Fullest GPU framebuffer",
                grafana.Target(fullest),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(fb_threshold),
                description="Framebuffer used ratio of the fullest GPU the deployment holds. When red, open "
                "Per rank: which rank's GPU, and is its KV cache full too?",
            )
        )
        headroom = (
            grafana.thresholds((None, RED), (round(1 - fb_threshold, 4), GREEN))
            if fb_threshold is not None
            else ()
        )
        self.add(
            stat(
                "Headroom on the fullest GPU",
                grafana.Target(f"1 - {fullest}"),
                unit="percentunit",
                min=0,
                max=1,
                steps=headroom,
                description="What is left on the fullest rank's GPU: it runs out first. Red below what the "
                "framebuffer alert allows.",
            )
        )
        self.add(
            stat(
                "Least free framebuffer",
                grafana.Target(self.least_free_framebuffer()),
                unit=ctx.unit("fb_free"),
                description="Free framebuffer on the deployment's GPU with the least of it. Near 0: a "
                "longer context or a bigger batch will not fit there.",
            )
        )
        self.add(
            self.worst_stat(
                "Fullest engine KV cache",
                self.deployment,
                "engine_kv_cache_usage",
                "KV cache usage of the deployment's fullest engine (rank). When red, that rank preempts "
                "first: open Per rank.",
                unit="percentunit",
            )
        )
        self.add(
            self.worst_stat(
                "Longest queue (one engine)",
                self.deployment,
                "engine_requests_waiting",
                "Requests waiting on the deployment's engine with the longest queue. When red, compare the "
                "ranks' queues in Per rank.",
            )
        )
        self.add(
            stat(
                "Firing alerts",
                grafana.Target(f"count({self.firing_alerts()}) or vector(0)"),
                steps=problems(),
                description="Alerts firing for the model, its pods or the GPUs they hold. Not 0: the Alerts "
                "row lists them.",
            ),
            optional="alerts",
        )

    def imbalance_across_ranks(self) -> None:
        model = self.ctx.identity("model")
        self.row("Imbalance across ranks (fullest / average; 1 = even)")
        targets = [
            grafana.Target(self.imbalance(self.framebuffer_ratio(), []), "GPU framebuffer"),
            grafana.Target(self.imbalance(self.engine("engine_kv_cache_usage"), model), "KV cache"),
            grafana.Target(self.imbalance(self.engine("engine_requests_running"), model), "running requests"),
        ]
        if self.shows("tokens_per_rank"):
            targets.append(
                grafana.Target(
                    self.imbalance(self.engine("engine_generation_tokens_rate"), model), "generated tokens/s"
                )
            )
        self.add(
            timeseries(
                "Imbalance (max / avg across ranks)",
                *targets,
                unit="none",
                decimals=2,
                w=24,
                description="Expert-parallel MoE ranks wait for the slowest; a ratio well above 1 means one "
                "rank carries more load or memory than the others: check expert placement and routing.",
            )
        )

    def per_rank(self) -> None:
        ctx, roles = self.ctx, self.ctx.roles
        fb_threshold, kv_threshold = (
            ctx.threshold("gpu_fb_used_ratio"),
            ctx.threshold("engine_kv_cache_usage"),
        )
        ratio = self.framebuffer_ratio()
        gpu = f"{{{{{roles.wl_pod}}}}} {ctx.gpu_legend()}"
        engine = ctx.engine_legend()
        fleet_view = grafana.Link(
            "GPU fleet view of this GPU",
            ctx.board_url("gpu-fleet", {"uuid": f"${{__field.labels.{roles.uuid}}}"}),
        )
        self.row("Per rank")
        self.add(
            timeseries(
                "Framebuffer used per GPU",
                grafana.Target(ratio, gpu),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(fb_threshold),
                w=16,
                links=(fleet_view,),
                description="Framebuffer used ratio of each GPU the deployment's pods hold. One GPU above "
                "its siblings: that rank holds more; the link opens the GPU in the fleet view.",
            )
        )
        self.add(
            bargauge(
                "Fullest GPUs now",
                grafana.Target(f"sort_desc({ratio})", gpu, instant=True),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(fb_threshold),
                w=8,
                description="The deployment's GPUs, fullest first, at the end of the time range. The top one "
                "runs out first.",
            )
        )
        self.add(
            timeseries(
                "KV cache usage per engine",
                grafana.Target(self.engine("engine_kv_cache_usage"), engine),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(kv_threshold),
                w=8,
                description="KV cache usage of each rank. One rank far above the others: uneven routing; "
                "all of them high: the deployment needs KV cache room.",
            )
        )
        self.add(
            timeseries(
                "Queue per engine",
                grafana.Target(self.engine("engine_requests_waiting"), ctx.engine_legend("waiting")),
                grafana.Target(self.engine("engine_requests_running"), ctx.engine_legend("running")),
                steps=above(ctx.threshold("engine_requests_waiting")),
                w=8,
                description="Requests waiting and running on each rank; the line is the waiting alert's "
                "threshold. Waiting on one rank only: that rank is slow.",
            )
        )
        self.add(
            timeseries(
                "Generated tokens per second per engine",
                grafana.Target(self.engine("engine_generation_tokens_rate"), engine),
                unit=TOKENS_PER_SECOND,
                w=8,
                description="Output tokens per second of each rank. A rank at 0 while the others work is "
                "idle or wedged.",
            ),
            optional="tokens_per_rank",
        )

    def kv_transfer(self) -> None:
        """Disaggregated serving: the NIXL KV transfers from the prefill pool to the decode pool."""
        ctx = self.ctx
        self.row("KV transfer (prefill to decode)")
        self.add(
            timeseries(
                "KV transfer time p95",
                grafana.Target(self.engine("pool_kv_transfer_time"), "p95"),
                unit="s",
                min=0,
                steps=above(ctx.threshold("pool_kv_transfer_time")),
                w=12,
                description="p95 of the NIXL KV transfer time of the deployment, recorded where pulls "
                "complete (the decode pool in pull mode); decode TTFT waits for it. Empty: no engine of "
                "this deployment uses a KV connector.",
            ),
            optional="kv_transfer",
            alert_view=ctx.alerts_of("pool_kv_transfer_time"),
        )
        failures = [(signal, ctx.engine_legend(what)) for signal, what in KV_FAILURES]
        self.add(
            timeseries(
                "KV transfer failures per engine",
                *(grafana.Target(self.engine(signal), legend) for signal, legend in failures),
                unit="reqps",
                min=0,
                steps=above(*(ctx.threshold(signal) for signal, _ in failures)),
                w=12,
                description="Failed NIXL transfers and notifications per second (decode side) and requests "
                "whose KV blocks a prefill engine freed unpulled (prefill side), per engine. The lines are "
                "the alerts' thresholds.",
            ),
            optional="kv_transfer",
            alert_view=[a for signal, _ in failures for a in ctx.alerts_of(signal)],
        )

    def alerts(self) -> None:
        self.row("Alerts")
        self.add(
            problem_list(
                "Alerts firing for this deployment",
                self.firing_alerts(),
                "None: no alert fires for this model, its pods or their GPUs.",
                w=24,
                hide=("Value", "alertstate"),
                description="vLLM alerts of the model or its pods, and GPU alerts of the GPUs its pods hold. "
                "Each alert's runbook_url says what to do.",
            ),
            optional="alerts",
        )
