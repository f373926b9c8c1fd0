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
from ...spec import slos as s
from ...spec.schema import seconds
from .board import BoardBuilder
from .context import TOKENS_PER_SECOND, DashboardContext
from .panels import GREEN, ORANGE, RED, instant_table, stat, table, timeseries

GOODPUT_NOTE = (
    "Goodput approximates the output tokens that met every SLO as generated tokens per second x the "
    "share of finished requests good under each SLO (5m windows, multiplied as if independent): "
    "tokens are not split by request, so a long request counts like a short one."
)


class SloBoard(BoardBuilder):
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
        self.x = SloExprs(ctx.model.builder)

    def variables(self) -> list[grafana.Variable]:
        return self.ctx.deployment_variables("Model", multi=True)

    def annotations(self) -> list[grafana.Annotation]:
        return self.ctx.firing_annotation("Firing SLO alerts", (self.name,), self.filters)

    def fill(self) -> None:
        self.goodput_and_cost()
        for name, slo in self.ctx.model.slos.slos.items():
            self.objective(name, slo)

    # -- queries ---------------------------------------------------------------------------------------
    def recorded(self, record: str, name: str) -> str:
        return self.x.recorded(record, name, *self.filters)

    def goodput(self) -> str:
        return promql.selector(self.x.goodput_record(), *self.filters)

    def cost_per_good_million(self) -> str:
        """Cost of the GPUs held over the range / good tokens over the range x 1e6. Both are averages
        over the range times its length, so the length cancels."""
        price = repr(float(self.ctx.settings.defaults.cost.price_per_gpu_hour))
        gpus = f"avg_over_time((\n  {self.models.gpus_per_model()}\n)[$__range:$__interval])"
        good = f"avg_over_time({self.goodput()}[$__range])"
        return promql.guarded_div(f"({gpus}\n* {price} / 3600 * 1e6)", good, self.ctx.identity("model"))

    def serving_link(self) -> grafana.Link:
        roles = self.ctx.roles
        values = {
            "namespace": f"${{__field.labels.{roles.namespace}}}",
            "model": f"${{__field.labels.{roles.model}}}",
        }
        return grafana.Link("vLLM serving view of this model", self.ctx.board_url("vllm-serving", values))

    # -- rows ------------------------------------------------------------------------------------------
    def goodput_and_cost(self) -> None:
        ctx, cost = self.ctx, self.ctx.settings.defaults.cost
        slos = sorted(n for n, slo in ctx.model.slos.slos.items() if slo.goodput)
        self.row("Goodput and cost", collapsed=False)
        self.add(
            timeseries(
                "Goodput: good output tokens per second",
                grafana.Target(self.goodput(), ctx.model_legend("good")),
                grafana.Target(
                    self.models.rate("vllm:generation_tokens_total", "model"), ctx.model_legend("all")
                ),
                unit=TOKENS_PER_SECOND,
                w=16,
                description=f"Output tokens of requests good under {', '.join(slos)}. {GOODPUT_NOTE}",
            ),
            optional="goodput",
        )
        self.add(
            stat(
                "Cost per 1M good output tokens (selected range)",
                grafana.Target(self.cost_per_good_million(), ctx.model_legend()),
                unit=cost.unit,
                decimals=2,
                w=8,
                h=8,
                description=f"{cost.price_per_gpu_hour:g} {cost.currency} per GPU-hour x the GPUs the "
                "model held, averaged over the dashboard's time range / good output tokens per second "
                "averaged over the same range x 1e6. No value when no good token was produced in the "
                f"range. {GOODPUT_NOTE}",
            ),
            optional="cost",
        )

    def sli_stat(self, name: str, slo: s.SLO, window: str, when: str) -> grafana.Panel:
        """The share of good requests per model over `window`, red below the objective."""
        now = window == self.x.window and window != slo.window
        return stat(
            f"SLI now ({window})" if now else f"SLI over {window}",
            grafana.Target(
                f"1 - {self.recorded(self.x.error_record(window), name)}", self.ctx.model_legend()
            ),
            unit="percentunit",
            decimals=3,
            steps=grafana.thresholds((None, RED), (slo.objective, GREEN)),
            description=f"Share of requests that were good ({slo.description}), {when}; red below the "
            "objective.",
        )

    def objective(self, name: str, slo: s.SLO) -> None:
        ctx, x, rows = self.ctx, self.x, slo.alerting.windows
        legend = ctx.model_legend()
        self.row(f"{name}: {slo.summary}", collapsed=False)
        self.add(self.sli_stat(name, slo, slo.window, "over the SLO window"))
        self.add(self.sli_stat(name, slo, x.window, "now; no value while no request finishes"))
        self.add(
            stat(
                "Objective",
                grafana.Target(self.recorded(OBJECTIVE, name), legend),
                unit="percentunit",
                decimals=3,
                description="The objective per model (specs/slos.yaml, per-model overrides applied).",
            )
        )
        self.add(
            stat(
                f"Error budget left ({slo.window})",
                grafana.Target(self.recorded(REMAINING, name), legend),
                unit="percentunit",
                decimals=1,
                steps=grafana.thresholds((None, RED), (0, ORANGE), (0.25, GREEN)),
                description="1 - (error ratio over the SLO window / (1 - objective)); negative once "
                "overspent.",
            )
        )
        fast = max(rows, key=lambda r: r.burn_rate)
        self.add(
            stat(
                f"Time to exhaustion at the {fast.long} burn rate",
                grafana.Target(x.time_to_exhaustion(name, slo, fast.long, *self.filters), legend),
                unit="s",
                w=8,
                no_value="not burning",
                steps=grafana.thresholds(
                    (None, RED), (seconds(fast.long) * 6, ORANGE), (seconds("1d"), GREEN)
                ),
                description=f"Budget left x {slo.window} / the burn rate over the last {fast.long}: when the "
                "budget runs out if the last hour's burn goes on. 0 once it is spent.",
            )
        )
        self.add(
            table(
                "Firing SLO alerts",
                instant_table(ctx.firing(f'slo="{name}"', *self.filters)),
                hide=("alertstate", "slo", "Value"),
                w=24,
                h=5,
                no_value=f"None: no burn-rate row of {name} fires for the selected models.",
                description="Burn-rate alerts of this SLO firing now; `long` and `short` name the windows.",
            )
        )
        windows = [w for w in x.windows(slo) if w != slo.window]
        steps = sorted({r.burn_rate: RED if r.tier == "page" else ORANGE for r in rows}.items())
        burning = [a for a in ctx.alerts if getattr(a.spec, "slo", None) == name]
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
            ),
            alert_view=burning,
        )
