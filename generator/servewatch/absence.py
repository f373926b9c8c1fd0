"""The conditions of the 'never silently blind' alerts (DESIGN.md invariants 7 and 11), one per
`absence.kind`: what stops being monitored raises an alert, with the labels its route needs
(docs/alert-labels.md).

  partner_missing  a GPU exports only part of a matched ratio's inputs, or an exporter none of them
  target_down      a target is down, or all targets of a source are gone (per cluster)
  metrics_absent   a target is down, up without its engine metrics, or all are gone (per namespace)
  inputs_missing   a target exports engine metrics but not one that a signal reads
  no_progress      work is in flight and nothing advances (a wedged engine still serving /metrics)
  part_missing     an engine (DP rank) or GPU seen recently is gone while its target is up
  rank_idle        an engine computes nothing, with nothing in flight, while a sibling rank of its pod serves
  client_missing   a model's engines have traffic while the client source (config.client_side) reports none
  pool_missing     a gateway pod reports requests but no inference pool's ready pods (its pool alert is blind)
  pool_gone        an inference pool seen recently is reported by no gateway pod while its gateway is up
"""

from __future__ import annotations

from .alert_context import PART_FIELD, POOL_READY, TARGET_CONTEXT, Context
from .promql import builders as b


RANK = "engine"  # vLLM's data-parallel rank label (catalog/vllm.yaml)


class Absences:
    def __init__(self, builder):
        self.sb = builder
        self.labels = builder.labels
        self.context = Context(builder)

    def build(
        self, kind: str, source: str, signals: dict, signal=None, absent_fires: bool = True, absence=None
    ) -> str:
        """The condition of kind `kind`; `absence` is the alert's absence spec, for its options."""
        if kind == "partner_missing":
            return self.partner_missing(signals[signal])
        if kind == "target_down":
            return self.target_down(source, absent_fires)
        if kind == "inputs_missing":
            return self.inputs_missing(source, self.sb.input_metrics(source, signals.values()))
        if kind == "no_progress":
            return self.no_progress(
                [signals[s] for s in absence.work], [signals[s] for s in absence.progress]
            )
        if kind == "part_missing":
            return self.part_missing(source)
        if kind == "rank_idle":
            return self.rank_idle(
                [signals[s] for s in absence.work], [signals[s] for s in absence.progress], absence.busy
            )
        if kind == "client_missing":
            return self.client_missing([signals[s] for s in absence.progress])
        if kind == "pool_missing":
            return self.pool_missing()
        if kind == "pool_gone":
            return self.pool_gone()
        grace = absence.startup_grace if absence is not None else None
        return self.metrics_absent(source, absent_fires, grace)

    # -- the kinds ------------------------------------------------------------------------------
    def partner_missing(self, signal) -> str:
        """Per GPU: one of the pair missing, or neither while its other fields and other GPUs' pairs
        are exported (MIG instances without framebuffer fields); per exporter: up without either."""
        ident, target = self.labels.identity(signal.level), self.labels.target()
        names = [self.sb.metric_name(signal.numerator), self.sb.metric_name(signal.partner)]
        pair_by_gpu, pair_by_target = self.context.pair_read(signal)
        # the pair's record holds 1 where a GPU exports only the numerator, 2 only the partner
        half = [
            b.with_label(b.agg("group", ident, f"{pair_by_gpu} == {bit}"), "metric", lacks)
            for bit, lacks in ((1, names[1]), (2, names[0]))
        ]
        # a GPU with neither of the pair shows only through the other presence fields: reading the
        # pair there too would only add series that `unless pair_by_gpu` removes again
        others = self.context.presence(ident + target, besides=(signal.numerator, signal.partner))
        neither = (
            []
            if others is None
            else [
                b.with_label(
                    b.agg(
                        "group",
                        ident,
                        b.unless(b.only_where(others, pair_by_target, target), pair_by_gpu, ident),
                    ),
                    "metric",
                    ",".join(names),
                )
            ]
        )
        per_gpu = b.any_of(*half, *neither)
        up = f"{b.agg('max', target + list(TARGET_CONTEXT), self.sb.up('dcgm'))} == 1"
        # an exporter without the pair is read from the raw fields, not the record: were the record
        # missing (not evaluated yet, a ruler without it), `unless` would name every exporter
        raw_by_target = self.context.pair_by_target(signal)
        exporter = b.with_label(b.unless(up, f"({raw_by_target})", target), "metric", ",".join(names))
        return b.any_of(self.context.gpu(per_gpu), self.context.dcgm_target(exporter))

    def target_down(self, source: str, absent_fires: bool = True) -> str:
        """Targets down (with their namespace, pod and what they served), all targets of a cluster
        gone within `config.remember.targets`, or none at all."""
        down = f"{b.agg('max', self.labels.target() + list(TARGET_CONTEXT), self.sb.up(source))} == 0"
        return self._or_gone(source, self._served(source, down), absent_fires)

    def metrics_absent(self, source: str, absent_fires: bool = True, startup_grace: str | None = None) -> str:
        """Targets down (except new ones still starting within `startup_grace`), targets up that
        exported engine metrics within `config.remember.targets` and no longer do (a target that never
        did is not an engine: a router or gateway matching the job regex), and gone or no targets."""
        target = self.labels.target()
        up = b.agg("max", target + list(TARGET_CONTEXT), self.sb.up(source))
        down = f"{up} == 0"
        if startup_grace:
            down = b.unless(down, b.started_within(self.sb.up(source), target, startup_grace), target)
        live = b.agg("group", target, self.sb.select(self.sb.liveness))
        stopped = b.only_where(b.unless(f"{up} == 1", live, target), self.context.was_engine(), target)
        return self._or_gone(source, self._served(source, b.any_of(down, stopped)), absent_fires)

    def inputs_missing(self, source: str, metrics: list[str]) -> str:
        """Targets that export the liveness metric but not one of the inputs (a rename or removal),
        with the target's namespace, pod and model. The liveness metric itself gets no branch: a target
        is only checked while it exports it, so that branch could never fire. The `metric` label
        names a vLLM metric by vLLM's own name whatever config.vllm_profile calls it, so routes,
        inhibitions and silences keep matching."""
        target = self.labels.target()
        live = b.agg("group", target + [*TARGET_CONTEXT, "model_name"], self.sb.select(self.sb.liveness))
        own = self.sb.catalog.vllm_name
        return b.any_of(
            *(
                b.with_label(b.unless(live, self._exported(m, target), target), "metric", own(m))
                for m in metrics
                if own(m) != self.sb.liveness
            )
        )

    def no_progress(self, work: list, progress: list) -> str:
        """Engines with work in flight (the `work` gauges sum above 0) whose `progress` rates are all 0:
        /metrics answers, the gauges are frozen, no token is produced and no request finishes. Read
        from the signals' recording rules (spec_checks: recorded by an enabled group), so a dashboard
        shows exactly this condition without a rate over a fixed window."""
        ident = self.labels.identity(work[0].level)
        read = lambda s: self.context.recorded(s.record, s.level)  # noqa: E731
        in_flight = f"{b.total([read(s) for s in work], ident)} > 0"
        stalled = f"{b.total([read(s) for s in progress], ident)} == 0"
        return b.only_where(in_flight, stalled, ident)

    def part_missing(self, source: str) -> str:
        """Parts seen within `config.remember.parts` (the slow memory record) that no longer report
        while their target is up and still reports another part. A target with none left is another
        alert's (`metrics_absent`; for an exporter, `partner_missing`), and so is an exporter upgrade
        that renames every field: it must not read as every GPU gone. Keyed by the part alone (`for`
        must not restart when the target's address changes)."""
        target, keep = self.labels.target(), self.context.part_labels(source)
        ident = self.labels.identity("engine" if source == "vllm" else "gpu")
        live = self.sb.select(self.sb.liveness if source == "vllm" else PART_FIELD)
        if source == "vllm":
            gone = b.unless(self.context.seen_recently(source), b.agg("group", ident, live), ident)
        else:
            gone = self._gpus_gone(ident)
        up = f"{b.agg('max', target, self.sb.up(source))} == 1"
        missing = b.only_where(b.only_where(gone, up, target), b.agg("group", target, live), target)
        return b.agg("group", keep, missing)

    def rank_idle(self, work: list, progress: list, busy: float) -> str:
        """Engines that compute nothing with nothing in flight (work in flight is `no_progress`'s)
        while a sibling rank of the same pod (the engine identity without `engine`) makes at least
        `busy` progress per second: the data-parallel balancer no longer sends it work."""
        ident = self.labels.identity(work[0].level)
        pod = [label for label in ident if label != RANK]
        read = lambda s: self.context.recorded(s.record, s.level)  # noqa: E731
        made = b.total([read(s) for s in progress], ident)
        idle = b.only_where(f"{made} == 0", f"{b.total([read(s) for s in work], ident)} == 0", ident)
        return b.only_where(idle, f"{b.agg('max', pod, made)} >= {busy:g}", pod)

    def _gpus_gone(self, ident: list[str]) -> str:
        """GPUs and MIG instances of the parts' memory whose UUID reports nothing now. Keyed by the
        UUID, not the instance: a MIG re-partition retires instance ids while the GPU reports on as
        others, and a MIG mode change swaps the whole GPU's series for its instances' or back
        (dcgm.md §2.3); a GPU off the bus (XID 79) silences every series of its UUID."""
        seen, live = self.context.seen_recently, lambda *m: self.sb.select(PART_FIELD, *m)  # noqa: E731
        mig = self.labels.dcgm.labels.mig_instance
        gpu = [label for label in ident if label != mig]
        return b.unless(seen("dcgm"), b.agg("group", gpu, live()), gpu)

    def client_missing(self, traffic: list) -> str:
        """Per model (cluster + identity.model: the client sees no role or track), traffic on its
        engines (the `traffic` rates above 0, read from their recording rules) while the client source
        exports no TTFT histogram for the model: the gateway is gone, renamed (llm_d_router_epp_* ->
        llm_d_epp_*), or names the model otherwise. A model without traffic is left out: a gateway's
        histogram of a model appears with its first request."""
        model = self.labels.client_identity()
        ident = self.labels.identity(traffic[0].level)
        rates = b.total([self.context.recorded(s.record, s.level) for s in traffic], ident)
        serving = b.agg("group", model, f"{rates} > 0")
        ttft = self.sb.metric_name("client_ttft")
        keys = self.labels.client_keys(ttft)
        renamed = self.labels.client_model != "model_name"  # read per gateway pod, then as model_name
        seen = [
            b.agg("group", model, self.labels.as_model_name(b.agg("group", keys, sel)) if renamed else sel)
            for sel in map(self.sb.select, self.sb.histograms.stored(f"{ttft}_count"))
        ]
        measured = seen[0] if len(seen) == 1 else f"({' or '.join(seen)})"
        return b.with_label(b.unless(serving, measured, model), "metric", ttft)

    def pool_missing(self) -> str:
        """Per gateway pod (its target, with namespace and pod): it reports first tokens of requests
        it routed, so it is the endpoint picker, but no ready-pods gauge of any inference pool (an
        older picker, a rename, the gauges dropped by relabeling): VLLMInferencePoolNoReadyPods
        cannot fire for its pools."""
        target = self.labels.target()
        ttft, ready = self.sb.metric_name("client_ttft"), self.sb.metric_name(POOL_READY)
        routing = self._exported(f"{ttft}_count", target + [x for x in TARGET_CONTEXT if x not in target])
        reporting = b.agg("group", target, self.sb.select(ready))
        return b.with_label(b.unless(routing, reporting, target), "metric", ready)

    def pool_gone(self) -> str:
        """Inference pools seen within `config.remember.parts` (the slow memory record) that no gateway
        pod reports now, while a target of the gateway that reported them (its job in the pool's
        namespace) is up: VLLMInferencePoolNoReadyPods is blind for them. A pool another gateway pod
        still reports is watched, and a gateway that goes with its pools (every target gone or down)
        is a deliberate removal, not this alert's. Keyed by the pool alone."""
        pool, gateway = self.context.pool_keys(), self.context.gateway()
        reported = b.agg("group", pool, self.sb.select(POOL_READY))
        gone = b.unless(self.context.pools_seen_recently(), reported, pool)
        up = self.context.gateway_up()
        return b.agg("group", pool, b.only_where(gone, f"{b.agg('max', gateway, up)} == 1", gateway))

    # -- shared parts ---------------------------------------------------------------------------
    def _exported(self, metric: str, target: list[str]) -> str:
        """One series per target exporting `metric`: a histogram's _count is stored under the
        histogram's own name once it is native (config.histograms)."""
        names = self.sb.histograms.stored(metric)
        present = [b.agg("group", target, self.sb.select(n)) for n in names]
        return present[0] if len(present) == 1 else f"({' or '.join(present)})"

    def _served(self, source: str, per_target: str) -> str:
        return (
            self.context.dcgm_target(per_target) if source == "dcgm" else self.context.vllm_target(per_target)
        )

    def _or_gone(self, source: str, per_target: str, absent_fires: bool) -> str:
        gone = self.context.gone(source)
        branches = (
            [per_target]
            + ([gone] if gone else [])
            + ([f"absent({self.sb.up(source)})"] if absent_fires else [])
        )
        return b.any_of(*branches)
