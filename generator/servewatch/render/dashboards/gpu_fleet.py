"""GPU fleet: every GPU and MIG instance dcgm-exporter reports."""

from __future__ import annotations

from ... import grafana as g
from ...promql import builders as b
from .board import BoardBuilder
from .context import DashboardContext, var_matcher
from .panels import instant_table, over, pct_steps, stat, table, ts


class GpuFleet(BoardBuilder):
    name = "gpu-fleet"

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        c, r = ctx, ctx.r
        self.filters = c.cluster_filter + [
            var_matcher(r.host, "host"),
            var_matcher(r.uuid, "uuid"),
            var_matcher(r.wl_namespace, "namespace"),
        ]
        self.gb = c.builder(dcgm=self.filters)

    def variables(self) -> list[g.Variable]:
        c, r = self.ctx, self.ctx.r
        host = var_matcher(r.host, "host")
        return [
            c.datasource_var(),
            *c.cluster_var(c.builder().select("fb_used")),
            g.Variable(
                "host",
                "Host",
                query=c.label_values("fb_used", r.host, *c.cluster_filter),
                multi=True,
                include_all=True,
            ),
            g.Variable(
                "uuid",
                "GPU (UUID)",
                query=c.label_values("fb_used", r.uuid, *c.cluster_filter, host),
                multi=True,
                include_all=True,
            ),
            g.Variable(
                "namespace",
                "Workload namespace",
                query=c.label_values("fb_used", r.wl_namespace, *c.cluster_filter, host),
                multi=True,
                include_all=True,
                description="Namespace of the pod holding the GPU; All includes idle GPUs.",
            ),
        ]

    def fb_ratio(self) -> str:
        """The alert's ratio per GPU; it carries both host spellings, so legends need no join."""
        return self.ctx.show("gpu_fb_used_ratio", self.gb, self.filters)

    def build(self) -> g.Dashboard:
        c, r = self.ctx, self.ctx.r
        d = self.start(
            "dcgm-exporter GPUs and MIG instances: framebuffer (matched and guarded per "
            "GPU / MIG instance), utilization, power, temperature, errors and interconnect.",
            c.firing_annotation("Firing GPU alerts", (self.name,), c.cluster_filter),
        )
        fb_ratio, fb_thr = self.fb_ratio(), c.threshold("gpu_fb_used_ratio")
        legend = c.gpu_legend()
        fb_unit = c.unit("fb_used")
        serving_link = g.Link(
            "vLLM serving in this namespace",
            c.board_url("vllm-serving", {"namespace": f"${{__field.labels.{r.wl_namespace}}}"}),
        )

        d.row("Fleet")
        d.add(
            stat(
                "GPUs and MIG instances",
                g.Target(b.agg("count", [], fb_ratio)),
                w=6,
                description="GPUs and MIG instances with a framebuffer ratio (both FB fields present).",
            )
        )
        d.add(
            stat(
                "Fullest GPU framebuffer",
                g.Target(b.agg("max", [], fb_ratio)),
                unit="percentunit",
                w=6,
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                description="Framebuffer used ratio of the fullest GPU (alert view).",
            )
        )
        xid = c.per_gpu(self.gb, "xid", extra=list(c.model.builder.catalog.dcgm.field("xid").extra_labels))
        d.add(
            stat(
                "GPUs with an XID error",
                g.Target(b.agg("count", [], f"{xid} != 0")),
                w=6,
                no_value="0",
                steps=over(1),
                description="GPUs whose last reported XID is not 0 (cleared by a driver reload).",
            ),
            show=self.shows("xid"),
        )
        power = c.per_gpu(self.gb, "power")
        d.add(
            stat(
                "Power draw",
                g.Target(b.agg("sum", [], power)),
                unit=c.unit("power"),
                w=6,
                description="Sum over physical GPUs (MIG instances repeat their GPU's power, counted once).",
            )
        )

        d.row("Framebuffer")
        d.add(
            ts(
                "Framebuffer used per GPU / MIG instance",
                g.Target(fb_ratio, legend),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                show_thresholds=True,
                w=16,
                description="FB_USED / (FB_USED + FB_FREE) per GPU or "
                "MIG instance, matched on the GPU identity; "
                "no value where the denominator is 0 (alert view).",
            )
        )
        d.add(
            g.Panel(
                "bargauge",
                "Fullest GPUs now",
                (g.Target(f"topk(10, {fb_ratio})", legend, instant=True),),
                unit="percentunit",
                min=0,
                max=1,
                steps=pct_steps(fb_thr),
                w=8,
                options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
                description="The ten fullest GPUs / MIG instances.",
            )
        )
        d.add(
            table(
                "Who holds the fullest GPUs",
                instant_table(f"topk(10, {fb_ratio})"),
                value_unit="percentunit",
                w=12,
                links=(serving_link,),
                description="Host, GPU, MIG instance and the pod holding it.",
            )
        )
        d.add(
            ts(
                "Framebuffer used",
                c.gpu_target(self.gb, "fb_used"),
                unit=fb_unit,
                w=12,
                description="Framebuffer used (MiB before exporter 4.9, bytes after).",
            )
        )

        d.row("Utilization")
        d.add(
            ts(
                "GPU utilization (full GPUs)",
                c.gpu_target(self.gb, "gpu_util"),
                unit=c.unit("gpu_util"),
                **c.value_range("gpu_util"),
                w=8,
                description=f"{c.metric('gpu_util')} is not reported for "
                "MIG instances; see graphics engine active.",
            )
        )
        d.add(
            ts(
                "Graphics engine active",
                c.gpu_target(self.gb, "gr_engine_active"),
                unit=c.unit("gr_engine_active"),
                **c.value_range("gr_engine_active"),
                w=8,
                description="Fraction of time the graphics engine was busy; works on MIG.",
            )
        )
        d.add(
            ts(
                "SM active",
                c.gpu_target(self.gb, "sm_active"),
                unit=c.unit("sm_active"),
                **c.value_range("sm_active"),
                w=8,
                description=f"Optional profiling field; needs {c.metric('sm_active')} in the counters CSV.",
            ),
            show=self.shows("sm_active"),
        )
        d.add(
            ts(
                "Tensor pipe active",
                c.gpu_target(self.gb, "tensor_active"),
                unit=c.unit("tensor_active"),
                **c.value_range("tensor_active"),
                w=12,
            )
        )
        d.add(
            ts(
                "DRAM active",
                c.gpu_target(self.gb, "dram_active"),
                unit=c.unit("dram_active"),
                **c.value_range("dram_active"),
                w=12,
                description="Memory bandwidth busy fraction (not capacity).",
            )
        )

        d.row("Power and temperature")
        d.add(ts("Power", g.Target(power, c.field_legend("power")), unit=c.unit("power"), w=12))
        d.add(
            ts(
                "GPU temperature",
                c.gpu_target(self.gb, "gpu_temp"),
                unit=c.unit("gpu_temp"),
                w=12,
            )
        )

        d.row("Errors and interconnect")
        d.add(
            table(
                "Last XID per GPU",
                instant_table(f"{xid} != 0"),
                w=8,
                description="The value is the last XID the GPU reported; err_msg explains it.",
            ),
            show=self.shows("xid"),
        )
        d.add(
            ts(
                "NVLink throughput",
                c.gpu_target(self.gb, "nvlink_throughput"),
                unit=c.unit("nvlink_throughput"),
                w=8,
                description=f"{c.metric('nvlink_throughput')}: NVLink throughput of all lanes, already a "
                "rate: the exporter's CSV types it counter, but DCGM reports the data moved per second.",
            ),
            show=self.shows("nvlink"),
        )
        d.add(
            ts(
                "PCIe throughput",
                c.gpu_target(self.gb, "pcie_tx", " tx"),
                c.gpu_target(self.gb, "pcie_rx", " rx"),
                unit=c.unit("pcie_tx"),
                w=8,
            ),
            show=self.shows("pcie"),
        )
        return d
