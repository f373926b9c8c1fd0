"""Service-level objectives: per SLO and model, the SLI now and over the SLO window, the objective,
the remaining error budget, the burn rate over every alert window, the time to exhaustion and the
firing SLO alerts; above them, goodput and the cost per 1M good output tokens over the time range.

Every SLO panel reads the SLO recording rules (the same series the burn-rate alerts read), through
the expressions in servewatch/slo/exprs.py; an SLO alert's dashboard_url opens its burn-rate panel.
"""

from __future__ import annotations

from ... import grafana
from ...promql import builders as promql
from ...slo.exprs import OBJECTIVE, REMAINING, SloExprs
from ...slo.plan import BurnAlert, InputsAlert
from ...spec import slos as s
from ...spec.schema import seconds
from .board import BoardBuilder
from .context import TOKENS_PER_SECOND, DashboardContext
from .panels import GREEN, ORANGE, RED, bargauge, instant_table, problems, stat, table, timeseries

GOODPUT_NOTE = (
    "Goodput approximates the output tokens that met every SLO as generated tokens per second x the "
    "share of finished requests good under each SLO (5m windows, multiplied as if independent): "
    "tokens are not split by request, so a long request counts like a short one."
)


class SloBoardBuilder(BoardBuilder):
    name = "slo"
    summary = (
        "Service-level objectives per model: SLI, objective, error budget, burn rate per alert window, "
        "goodput and the cost per 1M good output tokens. Every SLO panel reads the recording rules the "
        "burn-rate alerts read (specs/slos.yaml); an SLO alert's link opens its burn-rate panel."
    )

    def __init__(self, ctx: DashboardContext):
        super().__init__(ctx)
        self.filters = ctx.model_filters
        self.models = ctx.selection(vllm=ctx.model_filters, dcgm=ctx.workload_filters)
        # what a deployment costs: both pools of the selected models, whatever $role selects
        self.deployments = ctx.selection(vllm=ctx.deployment_filters, dcgm=ctx.workload_filters)
        self.x = SloExprs(ctx.model.builder)

    def variables(self) -> list[grafana.Variable]:
        """Where an SLO has a scope, the models come from the SLO records, which hold only the
        models some SLO covers; else from vLLM's liveness series (the same models then)."""
        scoped = any(slo.scope is not None for slo in self.ctx.model.slos.slos.values())
        recorded = self.x.valid_record() if scoped else None
        return self.ctx.deployment_variables("Model", multi=True, recorded=recorded)

    def annotations(self) -> list[grafana.Annotation]:
        return self.ctx.firing_annotation("Firing SLO alerts", (self.name,), self.filters)

    def fill(self) -> None:
        self.overview()
        self.inputs()
        self.goodput_and_cost()
        for name, slo in self.ctx.model.slos.slos.items():
            self.objective(name, slo)

    # -- queries ---------------------------------------------------------------------------------------
    def recorded(self, record: str, name: str) -> str:
        return self.x.recorded(record, name, *self.filters)

    def sli(self, name: str, window: str) -> str:
        return f"1 - {self.recorded(self.x.error_record(window), name)}"

    def goodput(self, filters=None) -> str:
        return promql.selector(self.x.goodput_record(), *(self.filters if filters is None else filters))

    def cost_per_good_million(self) -> str:
        """Cost of the GPUs held over the range / good tokens over the range x 1e6, per deployment:
        every GPU of its prefill and decode pools, the good tokens of every role (only the engines
        that count requests have any). Both are averages over the range times its length, so the
        length cancels."""
        ctx = self.ctx
        held, price = self.deployments.gpu_cost_terms()
        gpus = f"avg_over_time((\n  {held}\n)[$__range:$__interval])"
        per_hour = f"{gpus}\n* {price}" if price else gpus
        good = f"avg_over_time({self.goodput(ctx.deployment_filters)}[$__range])"
        deployment = ctx.identity("deployment")
        if deployment != ctx.identity("model"):  # the roles added up
            good = promql.agg("sum", deployment, good)
        return promql.guarded_div(f"({per_hour} / 3600 * 1e6)", good, deployment)

    def serving_link(self) -> grafana.Link:
        roles = self.ctx.roles
        values = {
            "namespace": f"${{__field.labels.{roles.namespace}}}",
            "model": f"${{__field.labels.{roles.model}}}",
        }
        return grafana.Link("vLLM serving view of this model", self.ctx.board_url("vllm-serving", values))

    # -- rows ------------------------------------------------------------------------------------------
    def overview(self) -> None:
        """The worst model of the selection, per SLO: its SLI now, its budget left, its time left."""
        self.row("Overview: the worst of the selected models", collapsed=False)
        for name, slo in self.ctx.model.slos.slos.items():
            fast = max(slo.alerting.windows, key=lambda r: r.burn_rate)
            self.add(
                stat(
                    f"{name}: SLI now, worst model",
                    grafana.Target(promql.agg("min", [], self.sli(name, self.x.window))),
                    unit="percentunit",
                    decimals=3,
                    steps=grafana.thresholds((None, RED), (slo.objective, GREEN)),
                    description=f"Share of requests that were good ({slo.description}) over the last "
                    f"{self.x.window}, of the worst selected model; red below the objective. No value while "
                    "no request finishes.",
                )
            )
            self.add(
                stat(
                    f"{name}: error budget left, least",
                    grafana.Target(promql.agg("min", [], self.recorded(REMAINING, name))),
                    unit="percentunit",
                    decimals=1,
                    steps=grafana.thresholds((None, RED), (0, ORANGE), (0.25, GREEN)),
                    description=f"The least of the {slo.window} error budget left among the selected "
                    "models: 1 - error ratio over the SLO window / (1 - objective); negative once overspent.",
                )
            )
            self.add(
                stat(
                    f"{name}: budget spent in, soonest",
                    grafana.Target(
                        promql.agg("min", [], self.x.time_to_exhaustion(name, slo, fast.long, *self.filters))
                    ),
                    unit="s",
                    no_value="not burning",
                    steps=grafana.thresholds(
                        (None, RED), (seconds(fast.long) * 6, ORANGE), (seconds("1d"), GREEN)
                    ),
                    description=f"Budget left x {slo.window} / the burn rate over the last {fast.long}, for "
                    "the model that runs out first if the last hour goes on. 0 once it is spent.",
                )
            )

    def inputs(self) -> None:
        """What the SLO inputs alerts fire on, with their own conditions: one panel for every SLO, as
        they share one alert name (their `slo` label tells them apart)."""
        ctx = self.ctx
        alerts = [a for a in ctx.alerts if isinstance(a.spec, InputsAlert)]
        if not alerts:  # no latency SLI, or native histograms: no bucket can be lost on its own
            return
        missing = [
            (f"{name}: {labels['metric']}{{{described(labels)}}}", expr, "short")
            for name, slo in ctx.model.slos.slos.items()
            for expr, labels in self.x.missing_inputs(name, slo, *ctx.cluster_filter)
        ]
        self.row("SLO inputs: the alerts' own conditions (every model of the selected clusters)")
        self.add(
            columns(
                "Models an SLO cannot measure: an input not scraped",
                missing,
                w=24,
                steps=problems(),
                no_value="None: every served model exports every series its SLOs count good events from.",
                description=f"What {alerts[0].alert} fires on, now: a model whose histogram is scraped but "
                "not the bucket (column) an SLO counts its good events from, so that SLI is absent, not "
                "bad, and its burn-rate alerts cannot fire. A relabelling that drops histogram buckets "
                "must keep these.",
            ),
            alert_view=alerts,
        )

    def goodput_and_cost(self) -> None:
        ctx, cost = self.ctx, self.ctx.settings.defaults.cost
        slos = sorted(n for n, slo in ctx.model.slos.slos.items() if slo.goodput)
        self.row("Goodput and cost per model")
        self.add(
            timeseries(
                "Goodput: good output tokens per second",
                grafana.Target(self.goodput(), ctx.model_legend("good")),
                grafana.Target(
                    self.models.counting().rate("vllm:generation_tokens_total", "model"),
                    ctx.model_legend("all"),
                ),
                unit=TOKENS_PER_SECOND,
                w=16,
                description=f"Output tokens of requests good under {', '.join(slos)}. {GOODPUT_NOTE}",
            ),
            optional="goodput",
        )
        self.add(
            bargauge(
                "Cost per 1M good output tokens (selected range)",
                grafana.Target(
                    self.cost_per_good_million(), ctx.model_legend(level="deployment"), instant=True
                ),
                unit=cost.unit,
                decimals=2,
                w=8,
                description=f"{cost.per_gpu_hour} x the GPUs the "
                "model held, averaged over the dashboard's time range / good output tokens per second "
                "averaged over the same range x 1e6. No value when no good token was produced in the "
                f"range. {GOODPUT_NOTE}",
            ),
            optional="cost_per_good_token",
        )

    def objective(self, name: str, slo: s.SLO) -> None:
        ctx, x, rows = self.ctx, self.x, slo.alerting.windows
        fast = max(rows, key=lambda r: r.burn_rate)
        self.row(f"{name}: {slo.summary}")
        burning = [a for a in ctx.alerts if isinstance(a.spec, BurnAlert) and a.spec.slo == name]
        rows_firing = [
            (
                f"{a.labels['tier']} {a.spec.long} & {a.spec.short} (burn)",
                x.burn_alert(name, slo, next(r for r in rows if r.long == a.spec.long), *ctx.cluster_filter),
                "suffix:x",
            )
            for a in burning
        ]
        self.add(
            columns(
                "Burn-rate rows firing now, every model",
                rows_firing,
                w=24,
                no_value=f"None: no burn-rate row of {name} fires.",
                description="The alert rows' own conditions, for every model of the selected clusters: "
                "the burn rate over the row's long window where both of its windows are above the row's "
                "rate (and the guard holds).",
            ),
            alert_view=burning,
        )
        self.add(
            columns(
                "Per model",
                [
                    (f"SLI over {slo.window}", self.sli(name, slo.window), "percentunit"),
                    (f"SLI now ({x.window})", self.sli(name, x.window), "percentunit"),
                    ("objective", self.recorded(OBJECTIVE, name), "percentunit"),
                    ("budget left", self.recorded(REMAINING, name), "percentunit"),
                    (
                        f"spent in (at the {fast.long} burn)",
                        x.time_to_exhaustion(name, slo, fast.long, *self.filters),
                        "s",
                    ),
                ],
                w=24,
                no_value="None: no selected model has finished a request under this SLO yet.",
                description=f"Per selected model: the share of good requests ({slo.description}) over the "
                "SLO window and now, the objective (overrides applied), the budget left (negative once "
                f"overspent) and when it is spent if the last {fast.long}'s burn goes on (empty: not "
                "burning).",
            )
        )
        windows = [w for w in x.windows(slo) if w != slo.window]
        steps = sorted({r.burn_rate: RED if r.tier == "page" else ORANGE for r in rows}.items())
        self.add(
            timeseries(
                "Burn rate per window",
                *(grafana.Target(x.burn_rate(name, w, *self.filters), ctx.model_legend(w)) for w in windows),
                w=24,
                steps=grafana.thresholds((None, GREEN), *steps),
                links=(self.serving_link(),),
                description="Error ratio over each window / (1 - objective): 1 spends the budget exactly "
                f"over {slo.window}. Lines: the alert rows' burn rates (red pages, orange tickets); a row "
                "fires when both its long and short window are above its line.",
            )
        )


def described(labels: dict[str, str]) -> str:
    """The matchers naming an SLO input (its labels but the metric), as its alert describes them."""
    return ", ".join(f'{k}="{v}"' for k, v in labels.items() if k != "metric")


def columns(title: str, queries: list[tuple[str, str, str]], **kw) -> grafana.Panel:
    """A table with one row per model and one column per query (its name, expression and unit)."""
    refs = grafana.ref_ids(len(queries))
    names = {f"Value #{ref}": name for ref, (name, _, _) in zip(refs, queries, strict=True)}
    units = [
        {"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": unit}]}
        for name, _, unit in queries
    ]
    return table(
        title,
        *(instant_table(expr) for _, expr, _ in queries),
        transformations=(
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True},
                    "includeByName": {},
                    "indexByName": {},
                    "renameByName": names,
                },
            },
        ),
        overrides=tuple(units),
        options={"sortBy": []},
        **kw,
    )
