"""GPU fleet: every GPU and MIG instance dcgm-exporter reports.

The host variable lists and filters hosts under every spelling of the host label, so a fleet in the
middle of the exporter upgrade that renamed `Hostname` to `hostname` is seen whole.
"""

from __future__ import annotations

from ... import grafana
from ...promql import builders as promql
from .board import BoardBuilder
from .context import DashboardContext, var_matcher
from .panels import above, bargauge, filling, instant_table, problem_list, problems, stat, table, timeseries


class GpuFleet(BoardBuilder):
    name = "gpu-fleet"
    summary = (
        "dcgm-exporter GPUs and MIG instances: framebuffer (matched and guarded per GPU / MIG instance), "
        "utilization, clocks, power, temperature, errors and interconnect. The overview reads the alert's "
        "recording rule; open a row for more."
    )

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        roles = ctx.roles
        filters = ctx.cluster_filter + [
            var_matcher(roles.uuid, "uuid"),
            var_matcher(roles.wl_namespace, "namespace"),
        ]
        self.gpus = ctx.selection(dcgm=filters, host=True)
        self.everything = ctx.selection(vllm=ctx.cluster_filter, dcgm=ctx.cluster_filter)
        self.hosts = ctx.selection(dcgm=ctx.cluster_filter, host=True)

    def variables(self) -> list[grafana.Variable]:
        ctx, roles = self.ctx, self.ctx.roles
        fb_used = ctx.selection().select("fb_used", *ctx.cluster_filter)
        spellings = "|".join(roles.host_spellings)
        return [
            ctx.datasource_variable(),
            *ctx.cluster_variable(ctx.selection().select("fb_used")),
            grafana.Variable(
                "host",
                "Host",
                query=f"query_result({promql.agg('count', list(roles.host_spellings), fb_used)})",
                regex=f'/(?:{spellings})="([^"]+)"/',
                multi=True,
                include_all=True,
                description="Hosts under every spelling of the host label: "
                f"{', '.join(roles.host_spellings)}.",
            ),
            grafana.Variable(
                "uuid",
                "GPU (UUID)",
                query=f"query_result({promql.agg('count', [roles.uuid], self.hosts.select('fb_used'))})",
                regex=f'/{roles.uuid}="([^"]+)"/',
                multi=True,
                include_all=True,
            ),
            grafana.Variable(
                "namespace",
                "Workload namespace",
                query=ctx.label_values("fb_used", roles.wl_namespace, *ctx.cluster_filter),
                multi=True,
                include_all=True,
                description="Namespace of the pod holding the GPU; All includes idle GPUs.",
            ),
        ]

    def annotations(self) -> list[grafana.Annotation]:
        return self.ctx.firing_annotation("Firing GPU alerts", (self.name,), self.ctx.cluster_filter)

    def fill(self) -> None:
        self.overview()
        self.targets()
        self.framebuffer()
        self.utilization()
        self.power_and_temperature()
        self.errors_and_interconnect()

    # -- queries ---------------------------------------------------------------------------------------
    def framebuffer_ratio(self) -> str:
        """The alert's ratio per GPU; the rule carries both host spellings, so legends need no join."""
        return self.gpus.signal("gpu_fb_used_ratio")

    def xid_errors(self) -> str:
        """GPUs whose last XID is not 0, with the code and its meaning."""
        extra = self.ctx.model.builder.catalog.dcgm.field("xid").extra_labels
        return f"{self.gpus.per_gpu('xid', extra=list(extra))} != 0"

    def gpu_field(self, field: str, suffix: str = "") -> grafana.Target:
        return grafana.Target(self.gpus.per_gpu(field), self.ctx.field_legend(field) + suffix)

    # -- rows ------------------------------------------------------------------------------------------
    def overview(self) -> None:
        """The board's default view. Its stats are instant queries (the value now, no sparkline):
        over a range each would read every GPU's series at every step, 0.55 M samples per stat and
        refresh at 4,096 GPUs (bench/README.md); the rows below draw the history."""
        ctx = self.ctx
        self.row("Fleet", collapsed=False)
        self.add(
            stat(
                "GPUs and MIG instances",
                grafana.Target(f"count({self.framebuffer_ratio()}) or vector(0)", instant=True),
                w=4,
                description="GPUs and MIG instances with a framebuffer ratio (both FB fields present). "
                "Fewer than you own: open the dcgm-exporter targets row.",
            )
        )
        self.add(
            self.worst_stat(
                "Fullest GPU framebuffer",
                self.gpus,
                "gpu_fb_used_ratio",
                "Framebuffer used ratio of the fullest GPU or MIG instance (alert view). When red, open "
                "Framebuffer to see which GPU and who holds it.",
                unit="percentunit",
                instant=True,
            )
        )
        xid_alerts = ctx.alerts_of("gpu_xid_errors_window_count")
        if xid_alerts:
            # What the XID alert reads, not the last-value gauge: that keeps an XID of days ago forever
            alert = xid_alerts[0]
            gpus = ", ".join(ctx.identity("gpu"))
            self.add(
                stat(
                    "GPUs with new XIDs",
                    grafana.Target(
                        f"count(count by ({gpus}) {self.gpus.past_threshold_recorded(alert)}) or vector(0)",
                        instant=True,
                    ),
                    steps=problems(),
                    description=f"GPUs and MIG instances with an XID in the exporter's XID window (5 min by "
                    f"default), what {alert.alert} fires on; 0 once the last XID ages out. Always 0 where "
                    "the exporter's XID count is not enabled. Narrowed by the uuid variable only (its "
                    "recording rule keeps no host or namespace). Not 0: open Errors and interconnect "
                    "for the codes.",
                ),
                optional="xid",
            )
        for title, aggregate, field, description in (
            (
                "Power draw",
                "sum",
                "power",
                "Board power of every selected GPU, each physical GPU counted once (MIG instances repeat "
                "their GPU's power). A drop with steady load: throttling.",
            ),
            (
                "Hottest GPU",
                "max",
                "gpu_temp",
                "Temperature of the hottest selected GPU. Hot GPUs slow their clocks: compare with the SM "
                "clock in Utilization.",
            ),
        ):
            field_total = promql.agg(aggregate, [], self.gpus.per_gpu(field))
            now = grafana.Target(field_total, instant=True)
            self.add(stat(title, now, unit=ctx.unit(field), description=description))
        self.add(
            stat(
                "dcgm-exporter targets up",
                grafana.Target(self.everything.targets_up("dcgm"), instant=True),
                description="dcgm-exporter scrape targets that answer their scrape. Fewer than your GPU "
                "nodes: open the dcgm-exporter targets row.",
            )
        )

    def targets(self) -> None:
        self.row("dcgm-exporter targets: the alerts' own conditions (host, GPU and namespace do not apply)")
        self.problem_lists("dcgm", self.everything)

    def framebuffer(self) -> None:
        ctx, roles = self.ctx, self.ctx.roles
        fb_threshold = ctx.threshold("gpu_fb_used_ratio")
        ratio, legend = self.framebuffer_ratio(), ctx.gpu_legend()
        self.row("Framebuffer")
        self.add(
            timeseries(
                "Framebuffer used per GPU / MIG instance",
                grafana.Target(ratio, legend),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(fb_threshold),
                w=16,
                description="FB_USED / (FB_USED + FB_FREE) per GPU or MIG instance, matched on the GPU "
                "identity; no value where the denominator is 0. Above the line, see the runbook.",
            ),
            alert_view=ctx.alerts_of("gpu_fb_used_ratio"),
        )
        self.add(
            bargauge(
                "Fullest GPUs now",
                grafana.Target(f"topk(10, {ratio})", legend, instant=True),
                unit="percentunit",
                min=0,
                max=1,
                steps=filling(fb_threshold),
                w=8,
                description="The ten fullest GPUs and MIG instances at the end of the time range. The table "
                "next to it says which pod holds each.",
            )
        )
        serving = grafana.Link(
            "vLLM serving in this namespace",
            ctx.board_url("vllm-serving", {"namespace": f"${{__data.fields.{roles.wl_namespace}}}"}),
        )
        self.add(
            table(
                "Who holds the fullest GPUs",
                instant_table(f"topk(10, {ratio})"),
                value_unit="percentunit",
                steps=filling(fb_threshold),
                w=12,
                links=(serving,),
                no_value="No GPU reports both framebuffer fields.",
                description="Host, GPU, MIG instance and the pod holding each of the ten fullest. The link "
                "opens vLLM serving in that pod's namespace.",
            )
        )
        self.add(
            timeseries(
                "Framebuffer used",
                self.gpu_field("fb_used"),
                unit=ctx.unit("fb_used"),
                w=12,
                description=f"Framebuffer used in the exporter's unit ({ctx.model.builder.unit('fb_used')}). "
                "vLLM preallocates, so a jump means a pod (re)started or another process took memory.",
            )
        )

    def field_panel(self, field: str, title: str, description: str, w: int = 8) -> grafana.Panel:
        """One DCGM field per GPU (or MIG instance), in the unit and range the profile gives it."""
        ctx = self.ctx
        return timeseries(
            title,
            self.gpu_field(field),
            unit=ctx.unit(field),
            **ctx.value_range(field),
            w=w,
            description=description,
        )

    def utilization(self) -> None:
        self.row("Utilization and clocks")
        idle = " Low while vLLM has work waiting: the engine, not the GPU, is the bottleneck."
        for field, title, what, optional in (
            (
                "gpu_util",
                "GPU utilization (full GPUs)",
                "Time the GPU was busy; not reported for MIG instances (see graphics engine active).",
                None,
            ),
            (
                "gr_engine_active",
                "Graphics engine active",
                "Fraction of time the graphics engine was busy; works on MIG.",
                None,
            ),
            (
                "sm_active",
                "SM active",
                "Fraction of time an SM had work; a profiling field the counters CSV must list.",
                "sm_active",
            ),
            ("tensor_active", "Tensor pipe active", "Fraction of cycles the tensor cores were busy.", None),
            ("dram_active", "DRAM active", "Memory bandwidth busy fraction (not capacity).", None),
            (
                "sm_clock",
                "SM clock",
                "SM clock of each physical GPU; it falls when the GPU throttles (power or heat).",
                None,
            ),
        ):
            self.add(self.field_panel(field, title, what + idle), optional=optional)

    def power_and_temperature(self) -> None:
        self.row("Power and temperature")
        self.add(
            self.field_panel(
                "power",
                "Power",
                "Board power of each physical GPU. Flat at the limit while the SM clock falls: the GPU is "
                "power capped.",
                w=12,
            )
        )
        self.add(
            self.field_panel(
                "gpu_temp",
                "GPU temperature",
                "Temperature of each physical GPU. One GPU much hotter than its neighbours: check the "
                "node's cooling before it throttles.",
                w=12,
            )
        )

    def errors_and_interconnect(self) -> None:
        ctx = self.ctx
        self.row("Errors and interconnect")
        xid_alerts = ctx.alerts_of("gpu_xid_errors_window_count")
        if xid_alerts:
            alert = xid_alerts[0]  # its copies (one per deployment) fire on the same condition
            self.add(
                problem_list(
                    "GPUs with recent XIDs",
                    self.gpus.past_threshold(alert),
                    "None: no selected GPU has an XID in the exporter's XID window (always empty "
                    "where the exporter's XID count is not enabled).",
                    w=8,
                    value_unit="count:XIDs",
                    steps=above(alert.spec.threshold),
                    description=f"What {alert.alert} fires on, now: the XIDs per GPU or MIG instance and "
                    "XID code within the exporter's last window (label window_size_in_ms, 5 min by "
                    f"default), from its count {ctx.metric('xid_count')} (opt-in: uncomment it in the "
                    "counters CSV). A code leaves the list once its last XID ages out of the window. "
                    "Last XID per GPU says what the code means.",
                ),
                optional="xid",
                alert_view=xid_alerts,
            )
        self.add(
            problem_list(
                "Last XID per GPU",
                self.xid_errors(),
                "None: no GPU reported an XID error since its driver loaded.",
                w=8,
                description="The value is the last XID the GPU reported; err_msg explains it. XID 79 (fallen "
                "off the bus) or 48 (double-bit ECC) need the node drained.",
            ),
            optional="xid",
        )
        self.add(
            timeseries(
                "NVLink throughput",
                self.gpu_field("nvlink_throughput"),
                unit=ctx.unit("nvlink_throughput"),
                w=8,
                description=f"{ctx.metric('nvlink_throughput')}: NVLink throughput of all lanes, already a "
                "rate (the exporter's CSV types it counter, but DCGM reports data moved per second).",
            ),
            optional="nvlink",
        )
        self.add(
            timeseries(
                "PCIe throughput",
                self.gpu_field("pcie_tx", " tx"),
                self.gpu_field("pcie_rx", " rx"),
                unit=ctx.unit("pcie_tx"),
                w=8,
                description="Bytes per second over PCIe each way. High during weight loading; high while "
                "serving means host offload or CPU-GPU copies.",
            ),
            optional="pcie",
        )
